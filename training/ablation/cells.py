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
from training.ablation.systems import PATIENCE
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
        summary = json.load(f)
    other = _other_run(summary, _finetune_config(cfg, system, task, split, rate, k, folder),
                       folder)
    return {"error": other} if other else _score(task, summary, k)


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
    # select/ holds the training rows with the validation rows as its dev:
    # a selection run reads no dev row; a reported run watches the
    # validation rows and reads dev once, at the end.
    folders = ({"data_dir": os.path.join(data, "select")} if split == "select" else
               {"data_dir": data, "validation_data_dir": os.path.join(data, "select")})
    length = task.max_seq_length
    if system.counts_words:
        length = MAX_WORDS + 2  # words, <S> and </S>
    return FinetuneConfig(
        model=system.model, task=task.finetune_task, **folders, output_dir=folder, init_checkpoint=checkpoint, vocab_file=vocab, preset=preset,
        ablation=system.ablation, max_seq_length=length, doc_stride=length // 2,
        max_query_length=48, max_answer_length=10, batch_size=cfg.batch_size,
        epochs=QUICK_EPOCHS if cfg.quick else task.epochs, early_stopping_patience=PATIENCE,
        learning_rate=rate, warmup_proportion=0.1, seed=cfg.seed + 1 + k, export=False)


def _cell(cfg, system, task, split, rate, k, folder):
    """One fine-tuning run (unless done) and its score on the table's scale."""
    summary_path = os.path.join(folder, "summary.json")
    ft = _finetune_config(cfg, system, task, split, rate, k, folder)
    if not os.path.exists(summary_path):
        os.makedirs(folder, exist_ok=True)
        start = time.time()
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
    other = _other_run(summary, ft, folder)
    if other:
        raise SystemExit(other)
    score = _score(task, summary, k)
    say(f"  {system.name:13s} {task.name:15s} {split:6s} lr {rate:<6g} seed {k}: "
        f"{score['score']:.2f}, best epoch {score['best_epoch']} of {score['epochs_trained']}"
        f"{took}")
    return score


# What a finished run must share with the run this design would make.
_SAME_RUN = ("epochs", "early_stopping_patience", "learning_rate", "seed")


def _other_run(summary, ft, folder):
    """The message for a finished run made with other settings than `ft`
    (an earlier design's run in the same `--output_dir`), naming the first
    that differs; None for the same run."""
    made = summary.get("config", {})
    for key in _SAME_RUN:
        if made.get(key) != getattr(ft, key):
            return (f"{folder} holds a run with {key}={made.get(key)!r}, where this design "
                    f"runs {getattr(ft, key)!r}: an earlier design's run. Use another "
                    "--output_dir.")
    return None


def _score(task, summary, k):
    """A finished run's scores on the table's scale: `score` (dev, with the
    weights kept; a selection run's dev is the validation rows), span QA's
    `exact_match`, the best `validation` score, `best_epoch` (1-based),
    `epochs_trained`, `converged` (early stopping ended the run before the
    cap) and the `curve`: each epoch's training loss and validation score."""
    metric, scale = ("f1", 1.0) if task.name == "span_qa" else ("accuracy", 100.0)
    history = summary["history"]
    watched = summary["monitor"]  # validation_<metric>, or a selection run's dev_<metric>
    scores = summary["scores"]
    score = {"score": scale * scores[f"dev_{metric}"]}
    if task.name == "span_qa":
        score["exact_match"] = scores["dev_exact_match"]
    curve = [{"epoch": i + 1, "loss": loss, "validation": scale * value}
             for i, (loss, value) in enumerate(zip(history["loss"], history[watched]))]
    best = summary["best_epoch"]
    return {"seed": k, **score,
            "validation": curve[best - 1]["validation"] if best else None,
            "best_epoch": best, "epochs_trained": summary["epochs_trained"],
            "converged": summary["stopped_early"], "curve": curve,
            "wall_seconds": summary.get("wall_seconds")}
