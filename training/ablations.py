"""The BERT paper's Table 5 in miniature: BERT, No NSP, LTR & No NSP (+ BiLSTM)
and OpenAI GPT, pretrained alike on the default corpus, fine-tuned on three
offline tasks, beside a model without pretraining and the trivial baselines.

    python -m training.ablations                                  # the default run
    python -m training.ablations --quick --output_dir=/tmp/t5     # a smoke run

The default run takes under an hour on 2 CPU cores; `--quick` takes a few
minutes and only checks that every piece runs (its numbers mean nothing).
Every step is skipped when its `summary.json` exists, so the same command
after a crash goes on where it stopped, and a finished run only redraws the
table:

1. the default corpus, written once to `<output_dir>/corpus/`;
2. pretraining, `training.pretrain.run` per system into
   `<output_dir>/pretrain/<system>/` (its `log.txt` holds the run's
   output): BERT (MLM + NSP), No NSP and
   LTR & No NSP (the last two read BERT's records and vocabulary: the same
   data, masks undone for LTR) and OpenAI GPT (its BPE vocabulary and token
   windows from the same text). One size (BERT `tiny`, GPT `gpt_tiny`: L=2,
   H=128, A=2), and the same steps, batch, sequence length and
   learning-rate schedule for all. BERT and GPT start together, No NSP and
   LTR once BERT is done;
3. the three tasks of `training.ablation_tasks` in `<output_dir>/tasks/`;
4. fine-tuning of every system on every task with `--seeds` seeds, into
   `<output_dir>/finetune/<system>/<task>/seed<k>/` (its `log.txt` holds the
   run's output), by `training.finetune.run`:
   "+ BiLSTM" is the LTR checkpoint with `--ablation=ltr_bilstm`, "No
   pretraining" a randomly initialized tiny BERT; all with the same
   fine-tuning settings (GPT adds its own auxiliary LM loss, lm_coef 0.5).
   GPT has no span QA (its paper fine-tunes none, and `training.finetune`
   refuses it): n/a;
5. `<output_dir>/table5.json`, `<output_dir>/table5.png` and the table,
   printed beside the paper's with a verdict for each of its directions.

Pretraining and fine-tuning runs go to `--workers` worker processes:
TensorFlow starts once per worker, not once per run.

A system whose pretraining or fine-tuning fails keeps its place in the
table with the error message; the command then exits with status 1.
"""

import contextlib
import dataclasses
import json
import os
import sys
import time
import traceback

from tf_records.input_files import check_output_folder
from training import console
from training import keras_extras
from training.ablation_table import SYSTEMS
from training.ablation_table import TASKS
from training.ablation_table import build_table
from training.ablation_table import format_table
from training.ablation_table import plot_table
from training.ablation_table import pretraining_scores
from training.config_flags import check_at_least
from training.config_flags import define_flags
from training.config_flags import from_flags
from training.pretrain_common import write_json


@dataclasses.dataclass(frozen=True)
class AblationsConfig:
    """Settings of the comparison; the defaults are the default run's."""

    output_dir: str = "ablations_output"
    quick: bool = False
    pretrain_steps: int = 1000
    pretrain_batch_size: int = 32
    pretrain_seq_length: int = 128
    pretrain_learning_rate: float = 2e-3
    pretrain_warmup_steps: int = 100
    vocab_size: int = 8000
    num_train: int = 2000
    num_dev: int = 400
    seeds: int = 3
    epochs: int = 3
    batch_size: int = 32
    learning_rate: float = 5e-4
    seed: int = 12345
    workers: int = 2


HELP = {
    "output_dir": "Run folder: corpus, pretraining, tasks, fine-tuning cells, table5.json/png.",
    "quick": "Smoke run: the budgets below that are left at their defaults become tiny "
             "(20 pretraining steps on 150 documents, 48 training rows, 1 seed, 1 epoch).",
    "pretrain_steps": "Pretraining steps of every system.",
    "pretrain_batch_size": "Pretraining sequences per step.",
    "pretrain_seq_length": "Pretraining tokens per sequence (GPT: per window).",
    "pretrain_learning_rate": "Peak pretraining learning rate.",
    "pretrain_warmup_steps": "Linear warmup, then linear decay to 0 at the last step.",
    "vocab_size": "Size of the learned vocabularies (BERT WordPiece, GPT BPE).",
    "num_train": "Training rows (questions) of each task.",
    "num_dev": "Dev rows (questions) of each task, from documents held out of pretraining.",
    "seeds": "Fine-tuning seeds per system and task.",
    "epochs": "Fine-tuning epochs.",
    "batch_size": "Fine-tuning batch size.",
    "learning_rate": "Peak fine-tuning learning rate (10% warmup, then linear decay), for all.",
    "seed": "Pretraining seed; fine-tuning seed k is seed + 1 + k.",
    "workers": "Worker processes for the pretraining and fine-tuning runs. 1: every run "
               "in this process, one after the other.",
}

# What --quick changes, where the flag was left at its default.
QUICK = {"pretrain_steps": 20, "pretrain_batch_size": 8, "pretrain_seq_length": 64,
         "pretrain_warmup_steps": 2, "vocab_size": 1000, "num_train": 48, "num_dev": 24,
         "seeds": 1, "epochs": 1, "batch_size": 8, "learning_rate": 1e-3}
QUICK_DOCUMENTS = 150  # training documents of the quick run's corpus


def say(message):
    print(message, flush=True)


def main(argv):
    del argv
    cfg = from_flags(AblationsConfig)
    if cfg.quick:
        defaults = AblationsConfig()
        cfg = dataclasses.replace(cfg, **{k: v for k, v in QUICK.items()
                                         if getattr(cfg, k) == getattr(defaults, k)})
    sys.exit(run(cfg))


def run(cfg):
    """The whole comparison; returns the exit status (0: every cell ran)."""
    from training.checkpointing import OutputLock

    started = time.time()
    check_flags(cfg)
    settings = _check_settings(cfg)  # before the lock makes the folder
    try:
        lock = OutputLock(cfg.output_dir)
    except RuntimeError as e:
        raise SystemExit(str(e)) from None
    try:
        if settings:
            write_json(os.path.join(cfg.output_dir, "settings.json"), settings)
        say(f"Table 5 in miniature -> {cfg.output_dir}\n  {json.dumps(dataclasses.asdict(cfg))}")
        corpus = _write_corpus(cfg)
        with _workers(cfg) as pool:
            pretraining = _pretrain_all(cfg, corpus, pool)
            from training.ablation_tasks import write_ablation_tasks

            say("Tasks ...")
            tasks = write_ablation_tasks(os.path.join(cfg.output_dir, "tasks"), cfg.num_train,
                                         cfg.num_dev, seed=0)
            cells = _fine_tune_all(cfg, pretraining, pool)
        table = build_table(cfg, pretraining, tasks, cells, time.time() - started)
        write_json(os.path.join(cfg.output_dir, "table5.json"), table)
        plot_table(table, os.path.join(cfg.output_dir, "table5.png"))
        say(format_table(table))
        say(f"-> {os.path.join(cfg.output_dir, 'table5.json')}, "
            f"{os.path.join(cfg.output_dir, 'table5.png')} ({time.time() - started:.0f} s)")
        return 1 if table["errors"] else 0
    finally:
        lock.release()


GPT_POSITIONS = 128  # gpt_tiny's n_positions: the longest window GPT's pretraining takes


def check_flags(cfg):
    """`SystemExit` naming the first flag whose value cannot make a
    comparison; run before anything is written."""
    check_at_least(cfg, {
        "pretrain_steps": 1, "pretrain_batch_size": 1, "pretrain_seq_length": 2,
        "pretrain_warmup_steps": 0, "vocab_size": 1, "num_train": 1, "num_dev": 1, "seeds": 1,
        "epochs": 1, "batch_size": 1, "workers": 1})
    for name in ("pretrain_learning_rate", "learning_rate"):
        if not getattr(cfg, name) > 0:
            raise SystemExit(f"--{name}={getattr(cfg, name)!r}: must be > 0.")
    if cfg.pretrain_seq_length > GPT_POSITIONS:
        raise SystemExit(
            f"--pretrain_seq_length={cfg.pretrain_seq_length}: OpenAI GPT's size here (gpt_tiny) "
            f"has {GPT_POSITIONS} positions, and every system pretrains alike: give at most "
            f"{GPT_POSITIONS}.")
    check_output_folder(cfg.output_dir)


def _check_settings(cfg):
    """A folder holds one comparison: other settings would mix results.
    Returns the settings to write (a new folder), or None (the same as
    the folder's)."""
    path = os.path.join(cfg.output_dir, "settings.json")
    mine = {k: v for k, v in dataclasses.asdict(cfg).items()
            if k not in ("output_dir", "workers")}  # neither changes a result
    if os.path.exists(path):
        with open(path, encoding="utf-8") as f:
            saved = json.load(f)
        changed = {k: (saved.get(k), v) for k, v in mine.items() if saved.get(k) != v}
        if changed:
            shown = ", ".join(f"--{k}: {a!r} there, {b!r} now" for k, (a, b) in changed.items())
            raise SystemExit(f"{cfg.output_dir} holds a comparison with other settings ({shown}). "
                             "Use the same settings to resume, or another --output_dir.")
        return None
    return mine


# --- 1. Corpus and 2. pretraining ---------------------------------------------


def _write_corpus(cfg):
    """`{"train": path, "heldout": path}` of the default corpus (quick: its first documents)."""
    from training.default_corpus import write_default_corpus

    folder = os.path.join(cfg.output_dir, "corpus")
    paths = {side: os.path.join(folder, f"{side}.txt") for side in ("train", "heldout")}
    if all(os.path.exists(p) for p in paths.values()):
        return paths
    say("Default corpus ...")
    paths, counts = write_default_corpus(folder)
    if cfg.quick:
        with open(paths["train"], encoding="utf-8") as f:
            documents = f.read().split("\n\n")[:QUICK_DOCUMENTS]
        with open(paths["train"] + ".tmp", "w", encoding="utf-8") as f:
            f.write("\n\n".join(documents) + "\n")
        os.replace(paths["train"] + ".tmp", paths["train"])
        counts["train"] = len(documents)
    say(f"  {counts['train']} training and {counts['heldout']} held-out documents -> {folder}")
    return paths


def _pretrain_all(cfg, corpus, pool):
    """Every system's pretraining summary, or `{"error": message}`.

    In `pool`'s worker processes (`_workers`), or here one after the other
    when it is None: BERT and GPT first, No NSP and LTR once BERT is done
    (they read its records).
    """
    config = dataclasses.asdict(cfg)
    results, running = {}, {}

    def start(name):
        summary = _pretraining_summary(cfg, name)
        if summary is not None:  # done before
            settle(name, summary)
        elif name in ("no_nsp", "ltr") and not os.path.exists(os.path.join(
                _pretrain_folder(cfg, "bert"), "data", "train_records", "manifest.json")):
            settle(name, {"error": "BERT's pretraining data was not written (see "
                                   "pretrain/bert/log.txt)."})
        else:
            say(f"Pretraining {name} ({cfg.pretrain_steps} steps; log "
                f"{os.path.join(_pretrain_folder(cfg, name), 'log.txt')}) ...")
            if pool is None:
                settle(name, _run_pretraining(config, name, corpus), ran=True)
            else:
                from training import ablations  # workers import it by this name, not as __main__

                running[pool.submit(ablations._run_pretraining, config, name, corpus)] = name

    def settle(name, summary, ran=False):
        if ran and "error" in summary:
            say(f"  pretraining {name} FAILED: {summary['error']}")
        elif ran:
            say(f"  pretraining {name} done in {summary['wall_seconds']:.0f} s: "
                f"{pretraining_scores(summary)}")
        results[name] = summary
        if name == "bert":
            start("no_nsp")
            start("ltr")

    start("bert")
    start("gpt")
    import concurrent.futures

    while running:
        done, _ = concurrent.futures.wait(running, return_when=concurrent.futures.FIRST_COMPLETED)
        for future in done:
            settle(running.pop(future), future.result(), ran=True)
    return {name: results[name] for name in ("bert", "no_nsp", "ltr", "gpt")}


def _free_models():
    """Frees the finished run's models and graphs for the next run (one
    process, many runs). `keras.backend.clear_session` collects garbage
    over the whole heap, where TensorFlow and Keras keep about a million
    long-lived objects: 0.5 s after every run. Frozen after the first
    collection, they are not walked again; the runs' own objects are."""
    import gc

    import keras

    keras.backend.clear_session()
    gc.freeze()


def _pretrain_folder(cfg, name):
    return os.path.abspath(os.path.join(cfg.output_dir, "pretrain", name))


def _pretraining_summary(cfg, name):
    """A finished pretraining's `summary.json`, or None."""
    path = os.path.join(_pretrain_folder(cfg, name), "summary.json")
    if not os.path.exists(path):
        return None
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def _run_pretraining(config, name, corpus):
    """`training.pretrain.run` for one system, its output in its `log.txt`:
    its summary, or `{"error": message}` (the traceback goes to the log).
    Takes plain values: it runs in a worker process."""
    from training import pretrain

    cfg = AblationsConfig(**config)
    folder = _pretrain_folder(cfg, name)
    flags = _pretrain_flags(cfg, name, corpus, folder)
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, "log.txt"), "a", encoding="utf-8") as log:
        log.write("$ python -m training.pretrain "
                  + " ".join(f"--{k}={v}" for k, v in flags.items()) + "\n")
        log.flush()
        try:
            with contextlib.redirect_stdout(log), contextlib.redirect_stderr(log):
                pretrain.run(pretrain.PretrainConfig(**flags), explicit=set(flags))
        except (Exception, SystemExit) as e:  # noqa: BLE001 (a failed system stays in the table)
            log.write(traceback.format_exc())
            return {"error": f"training.pretrain: {type(e).__name__}: {e}"}
        finally:
            _free_models()
    summary = _pretraining_summary(cfg, name)
    return summary if summary is not None else {
        "error": f"training.pretrain wrote no summary.json (see {folder}/log.txt)"}


def _pretrain_flags(cfg, name, corpus, folder):
    """`training.pretrain`'s flags for one system, by name."""
    model, ablation = {"bert": ("bert", ""), "no_nsp": ("bert", "no_nsp"),
                       "ltr": ("bert", "ltr"), "gpt": ("gpt", "")}[name]
    if name in ("no_nsp", "ltr"):  # BERT's records and vocabulary: the same data
        bert_data = os.path.join(_pretrain_folder(cfg, "bert"), "data")
        data = {"input": f"{bert_data}/train_records",
                "heldout_input": f"{bert_data}/heldout_records",
                "vocab_file": f"{bert_data}/vocab.txt"}
    else:
        data = {"input": os.path.abspath(corpus["train"]),
                "heldout_input": os.path.abspath(corpus["heldout"])}
    steps = cfg.pretrain_steps
    return {
        "model": model, "ablation": ablation, "output_dir": folder,
        "preset": "gpt_tiny" if model == "gpt" else "tiny", **data,
        "vocab_size": cfg.vocab_size, "num_train_steps": steps,
        "global_batch_size": cfg.pretrain_batch_size, "max_seq_length": cfg.pretrain_seq_length,
        "learning_rate": cfg.pretrain_learning_rate, "warmup_steps": cfg.pretrain_warmup_steps,
        "seed": cfg.seed, "checkpoint_every_steps": max(1, steps // 4),
        "log_every_steps": max(1, steps // 10), "dupe_factor": 1 if cfg.quick else 5,
        "fill_mask_examples": 0 if cfg.quick else 2,
        "saved_model": False,  # fine-tuning reads the Keras model
        # float32 for every system: not given, BERT's rows would train in
        # bfloat16 on some CPUs and GPT's in float32.
        "mixed_precision": False}


@contextlib.contextmanager
def _workers(cfg):
    """`--workers` worker processes for the pretraining and fine-tuning runs
    (spawned: each starts TensorFlow once and runs its share in-process), or
    None with `--workers=1` (the runs go one after the other here)."""
    if cfg.workers < 2:
        yield None
        return
    import concurrent.futures
    import multiprocessing

    with concurrent.futures.ProcessPoolExecutor(
            cfg.workers, mp_context=multiprocessing.get_context("spawn"),
            initializer=keras_extras.leave_out_of_keras) as pool:
        yield pool


def _fine_tune_all(cfg, pretraining, pool):
    """`{(system, task): {"seeds": [...], "errors": [...]} or {"na": why}}`,
    the runs in `pool` (or here when it is None)."""
    cells, jobs = {}, []
    for system in SYSTEMS:
        for task in TASKS:
            if system.model == "gpt" and task.name == "span_qa":
                cells[system.name, task.name] = {
                    "na": "the GPT paper fine-tunes no span extraction; training.finetune "
                          "refuses --task=squad with --model=gpt"}
                continue
            failed = pretraining[system.checkpoint].get("error") if system.checkpoint else None
            cells[system.name, task.name] = {"seeds": [], "errors": []}
            if failed:
                cells[system.name, task.name]["errors"].append(
                    f"pretraining {system.checkpoint} failed: {failed}")
                continue
            jobs += [(system.name, task.name, k) for k in range(cfg.seeds)]
    config = dataclasses.asdict(cfg)
    if pool is None:
        results = [_run_cell(config, *job) for job in jobs]
    else:
        from training import ablations  # workers import it by this name, not as __main__

        results = list(pool.map(ablations._run_cell, [config] * len(jobs),
                                *zip(*jobs)) if jobs else [])
    for (system, task, _), result in zip(jobs, results):
        cell = cells[system, task]
        if "error" in result:
            cell["errors"].append(result["error"])
        else:
            cell["seeds"].append(result)
    return cells


def _run_cell(config, system_name, task_name, k):
    """One fine-tuning run and its score, or `{"error": message}` (the
    traceback goes to the run's log.txt). Takes plain values: it runs in a
    worker process."""
    cfg = AblationsConfig(**config)
    system = next(s for s in SYSTEMS if s.name == system_name)
    task = next(t for t in TASKS if t.name == task_name)
    try:
        return _cell(cfg, system, task, k)
    except (Exception, SystemExit) as e:  # noqa: BLE001 (a failed run stays in the table)
        message = f"{system_name}/{task_name}/seed{k}: {type(e).__name__}: {e}"
        say(f"  FAILED {message}")
        folder = _cell_folder(cfg, system, task, k)
        os.makedirs(folder, exist_ok=True)
        with open(os.path.join(folder, "log.txt"), "a", encoding="utf-8") as log:
            log.write(traceback.format_exc())
        return {"error": message}


def _cell_folder(cfg, system, task, k):
    return os.path.join(cfg.output_dir, "finetune", system.name, task.name, f"seed{k}")


def _finetune_config(cfg, system, task, k, folder):
    from training.finetune import FinetuneConfig

    pretrain = os.path.abspath(os.path.join(cfg.output_dir, "pretrain"))
    bert_vocab = os.path.join(pretrain, "bert", "data", "vocab.txt")
    if system.model == "gpt":
        checkpoint = os.path.join(pretrain, "gpt", "export", "causal_lm.keras")
        vocab = os.path.join(pretrain, "gpt", "data", "gpt_vocab", "vocab.json")
    elif system.checkpoint:
        checkpoint = os.path.join(pretrain, system.checkpoint, "export", "pretrainer.keras")
        vocab = bert_vocab
    else:
        checkpoint, vocab = "", bert_vocab
    return FinetuneConfig(
        model=system.model, task={"word_order": "glue/cola", "sentence_order": "glue/rte",
                                  "span_qa": "squad"}[task.name],
        data_dir=os.path.join(cfg.output_dir, "tasks", task.name), output_dir=folder,
        init_checkpoint=checkpoint, vocab_file=vocab, preset="" if checkpoint else "tiny",
        ablation=system.ablation, max_seq_length=task.max_seq_length,
        doc_stride=task.max_seq_length // 2, max_query_length=48, max_answer_length=10,
        batch_size=cfg.batch_size, epochs=cfg.epochs, learning_rate=cfg.learning_rate,
        warmup_proportion=0.1, seed=cfg.seed + 1 + k, export=False)


def _cell(cfg, system, task, k):
    """One fine-tuning run (unless done) and its dev score on the table's scale."""
    folder = _cell_folder(cfg, system, task, k)
    summary_path = os.path.join(folder, "summary.json")
    if not os.path.exists(summary_path):
        from training.finetune import run as finetune

        os.makedirs(folder, exist_ok=True)
        start = time.time()
        ft = _finetune_config(cfg, system, task, k, folder)
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
    history = summary["history"]
    if task.name == "span_qa":
        score = {"score": history["dev_f1"][-1], "exact_match": history["dev_exact_match"][-1]}
    else:
        score = {"score": 100 * _accuracy(os.path.join(folder, "dev_predictions.tsv"))}
    say(f"  {system.name:10s} {task.name:14s} seed {k}: {score['score']:.2f}{took}")
    return {"seed": k, **score, "wall_seconds": summary.get("wall_seconds")}


def _accuracy(path):
    """Accuracy of a `dev_predictions.tsv` (guid, prediction, label)."""
    with open(path, encoding="utf-8") as f:
        rows = [line.rstrip("\n").split("\t") for line in f][1:]
    return sum(r[1] == r[2] for r in rows) / len(rows)


def cli():
    """`kbi-ablations` and `python -m training.ablations`: flags, then `main` on a quiet console."""
    define_flags(AblationsConfig, HELP)
    try:
        console.run(main, __name__)
    except KeyboardInterrupt:
        sys.exit(130)


if __name__ == "__main__":
    cli()
