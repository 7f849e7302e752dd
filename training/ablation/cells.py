"""One fine-tuning run of the Table 5 comparison (`training.ablation.runs`
schedules them): its `training.finetune` config, the run in a worker
process with its output in the run's `log.txt`, and its score on the
table's scale; or, with nothing run, the score a finished run left.
"""

import contextlib
import gc
import json
import os
import time
import traceback

from training.ablation.settings import QUICK_EPOCHS
from training.ablation.settings import AblationsConfig
from training.ablation.systems import SYSTEMS
from training.ablation.systems import TASKS
from training.ablation.task_rows import MAX_WORDS
from training.finetune import FinetuneConfig
from training.finetune import run as finetune


def say(message):
    print(message, flush=True)


def _free_models():
    """Frees the finished run's models and graphs for the next run (one
    process, many runs). `keras.backend.clear_session` collects garbage
    over the whole heap, where TensorFlow and Keras keep about a million
    long-lived objects: 0.5 s after every run. Frozen after the first
    collection, they are not walked again; the runs' own objects are."""
    import keras  # lazy: TensorFlow loads after the console starts and runs._start_worker

    keras.backend.clear_session()
    gc.freeze()


def _run_cell(config, system_name, task_name, split, rate, k):
    """One fine-tuning run and its score, or `{"error": message}` (the
    traceback goes to the run's log.txt). `split`: "select" (trained on the
    training rows, scored on validation) or "dev". Takes plain values: it
    runs in a worker process."""
    cfg, system, task, folder = _cell_of(config, system_name, task_name, split, rate, k)
    try:
        return _cell(cfg, system, task, split, rate, k, folder)
    except (Exception, SystemExit) as e:  # noqa: BLE001 (a failed run stays in the table)
        message = f"{system_name}/{task_name}/{split}/lr{rate:g}/seed{k}: {type(e).__name__}: {e}"
        say(f"  FAILED {message}")
        os.makedirs(folder, exist_ok=True)
        with open(os.path.join(folder, "log.txt"), "a", encoding="utf-8") as log:
            log.write(traceback.format_exc())
        return {"error": message}


def _load_cell(config, system_name, task_name, split, rate, k):
    """A finished run's score, or `{"error": "not run"}`: `_run_cell`
    without running anything."""
    cfg, system, task, folder = _cell_of(config, system_name, task_name, split, rate, k)
    if not os.path.exists(os.path.join(folder, "summary.json")):
        return {"error": "not run"}
    with open(os.path.join(folder, "summary.json"), encoding="utf-8") as f:
        return _score(task, folder, json.load(f), k)


def _cell_of(config, system_name, task_name, split, rate, k):
    """`(cfg, system, task, folder)` of a run named by plain values."""
    cfg = AblationsConfig(**config)
    system = next(s for s in SYSTEMS if s.name == system_name)
    task = next(t for t in TASKS if t.name == task_name)
    return cfg, system, task, _cell_folder(cfg, system, task, split, rate, k)


def _cell_folder(cfg, system, task, split, rate, k):
    return os.path.join(cfg.output_dir, "finetune", system.name, task.name,
                        f"{split}-lr{rate:g}-seed{k}")


def _finetune_config(cfg, system, task, split, rate, k, folder):
    pretrain = os.path.abspath(os.path.join(cfg.output_dir, "pretrain"))
    checkpoint, preset = "", "tiny"  # no pretraining: random weights, BERT's vocabulary
    if system.checkpoint:
        checkpoint, preset = os.path.join(pretrain, system.checkpoint, system.export), ""
    vocab = os.path.join(pretrain, system.vocab) if system.vocab else ""
    data = os.path.join(cfg.output_dir, "tasks", task.name)
    length = task.max_seq_length
    if system.counts_words:
        length = MAX_WORDS + 2  # words, <S> and </S>
    return FinetuneConfig(
        model=system.model, task=task.finetune_task,
        data_dir=os.path.join(data, "select") if split == "select" else data,
        output_dir=folder, init_checkpoint=checkpoint, vocab_file=vocab, preset=preset,
        ablation=system.ablation, max_seq_length=length, doc_stride=length // 2,
        max_query_length=48, max_answer_length=10, batch_size=cfg.batch_size,
        epochs=QUICK_EPOCHS if cfg.quick else task.epochs, learning_rate=rate,
        warmup_proportion=0.1, seed=cfg.seed + 1 + k, export=False)


def _cell(cfg, system, task, split, rate, k, folder):
    """One fine-tuning run (unless done) and its score on the table's scale."""
    summary_path = os.path.join(folder, "summary.json")
    if not os.path.exists(summary_path):
        os.makedirs(folder, exist_ok=True)
        start = time.time()
        ft = _finetune_config(cfg, system, task, split, rate, k, folder)
        with open(os.path.join(folder, "log.txt"), "a", encoding="utf-8") as log:
            with contextlib.redirect_stdout(log):
                try:
                    finetune(ft)
                finally:
                    _free_models()
        took = f" ({time.time() - start:.0f} s)"
    else:
        took = " (done before)"
    with open(summary_path, encoding="utf-8") as f:
        summary = json.load(f)
    score = _score(task, folder, summary, k)
    say(f"  {system.name:13s} {task.name:15s} {split:6s} lr {rate:<6g} seed {k}: "
        f"{score['score']:.2f}{took}")
    return score


def _score(task, folder, summary, k):
    """A finished run's score on the table's scale."""
    if task.name == "span_qa":
        score = {"score": summary["history"]["dev_f1"][-1],
                 "exact_match": summary["history"]["dev_exact_match"][-1]}
    else:
        score = {"score": 100 * _accuracy(os.path.join(folder, "dev_predictions.tsv"))}
    return {"seed": k, **score, "wall_seconds": summary.get("wall_seconds")}


def _accuracy(path):
    """Accuracy of a `dev_predictions.tsv` (guid, prediction, label)."""
    with open(path, encoding="utf-8") as f:
        rows = [line.rstrip("\n").split("\t") for line in f][1:]
    return sum(r[1] == r[2] for r in rows) / len(rows)
