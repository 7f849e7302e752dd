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
2. pretraining, one `python -m training.pretrain` subprocess per system,
   into `<output_dir>/pretrain/<system>/`: BERT (MLM + NSP), No NSP and
   LTR & No NSP (the last two read BERT's records and vocabulary: the same
   data, masks undone for LTR) and OpenAI GPT (its BPE vocabulary and token
   windows from the same text). One size (BERT `tiny`, GPT `gpt_tiny`: L=2,
   H=128, A=2), and the same steps, batch, sequence length and
   learning-rate schedule for all;
3. the three tasks of `training.ablation_tasks` in `<output_dir>/tasks/`;
4. fine-tuning of every system on every task with `--seeds` seeds, into
   `<output_dir>/finetune/<system>/<task>/seed<k>/` (its `log.txt` holds the
   run's output), by `training.finetune.run` called in `--workers` worker
   processes (TensorFlow starts once per worker, not once per run):
   "+ BiLSTM" is the LTR checkpoint with `--ablation=ltr_bilstm`, "No
   pretraining" a randomly initialized tiny BERT; all with the same
   fine-tuning settings (GPT adds its own auxiliary LM loss, lm_coef 0.5).
   GPT has no span QA (its paper fine-tunes none, and `training.finetune`
   refuses it): n/a;
5. `<output_dir>/table5.json`, `<output_dir>/table5.png` and the table,
   printed beside the paper's with a verdict for each of its directions.

A system whose pretraining or fine-tuning fails keeps its place in the
table with the error message; the command then exits with status 1.
"""

import contextlib
import dataclasses
import json
import math
import os
import subprocess
import sys
import time
import traceback

from absl import app

from training.config_flags import define_flags
from training.config_flags import from_flags
from training.pretrain_common import write_json

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


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
    "workers": "Processes at once: pretraining runs (two per wave) and fine-tuning workers. "
               "1: one pretraining at a time, fine-tuning in this process.",
}

# What --quick changes, where the flag was left at its default.
QUICK = {"pretrain_steps": 20, "pretrain_batch_size": 8, "pretrain_seq_length": 64,
         "pretrain_warmup_steps": 2, "vocab_size": 1000, "num_train": 48, "num_dev": 24,
         "seeds": 1, "epochs": 1, "batch_size": 8, "learning_rate": 1e-3}
QUICK_DOCUMENTS = 150  # training documents of the quick run's corpus


@dataclasses.dataclass(frozen=True)
class Task:
    """One fine-tuning task and the Table 5 columns it stands in for."""

    name: str
    label: str
    kind: str
    paper_columns: tuple
    max_seq_length: int


TASKS = (
    Task("word_order", "word order", "single sentence, accuracy", ("SST-2",), 64),
    Task("sentence_order", "sentence order", "sentence pair, accuracy",
         ("MNLI-m", "QNLI", "MRPC"), 96),
    Task("span_qa", "span QA", "span extraction, SQuAD F1", ("SQuAD",), 128),
)


@dataclasses.dataclass(frozen=True)
class System:
    """A row of the table: whose pretraining it starts from and how it fine-tunes.

    `checkpoint` names the pretraining it starts from: a folder of
    `<output_dir>/pretrain/` ("" = random initialization).
    """

    name: str
    label: str
    checkpoint: str
    model: str = "bert"
    ablation: str = ""


SYSTEMS = (
    System("bert", "BERT (MLM + NSP)", "bert"),
    System("no_nsp", "No NSP", "no_nsp"),
    System("ltr", "LTR & No NSP", "ltr", ablation="ltr"),
    System("ltr_bilstm", "+ BiLSTM", "ltr", ablation="ltr_bilstm"),
    System("gpt", "OpenAI GPT", "gpt", model="gpt"),
    System("random", "No pretraining", ""),
)

# The BERT paper's Table 5 (dev; accuracy, SQuAD 1.1 F1), from
# COMPARISON_SYSTEMS.md section 3.
PAPER_COLUMNS = ("MNLI-m", "QNLI", "MRPC", "SST-2", "SQuAD")
PAPER_TABLE5 = {
    "bert": (84.4, 88.4, 86.7, 92.7, 88.5),
    "no_nsp": (83.9, 84.9, 86.5, 92.6, 87.9),
    "ltr": (82.1, 84.3, 77.5, 92.1, 77.8),
    "ltr_bilstm": (82.1, 84.1, 75.7, 91.6, 84.9),
}

# (expected better, expected worse, tasks, what the paper reports).
DIRECTIONS = (
    ("bert", "no_nsp", ("word_order", "sentence_order", "span_qa"),
     "BERT >= No NSP (Table 5): removing NSP hurts every column, most QNLI (88.4 -> 84.9)"),
    ("no_nsp", "ltr", ("word_order", "sentence_order", "span_qa"),
     "No NSP > LTR & No NSP (Table 5): left-to-right loses everywhere, most MRPC "
     "(86.5 -> 77.5) and SQuAD (87.9 -> 77.8)"),
    ("ltr_bilstm", "ltr", ("span_qa",),
     "+ BiLSTM helps LTR on SQuAD (Table 5: 77.8 -> 84.9)"),
    ("ltr", "ltr_bilstm", ("word_order", "sentence_order"),
     "+ BiLSTM does not help LTR on GLUE (Table 5: MRPC 77.5 -> 75.7, SST-2 92.1 -> 91.6)"),
    ("bert", "gpt", ("word_order", "sentence_order"),
     "BERT > OpenAI GPT (Table 1, GLUE test, BERT-Base vs GPT: SST-2 93.5 vs 91.3, "
     "QNLI 90.5 vs 87.4, MRPC F1 88.9 vs 82.3)"),
    ("bert", "random", ("word_order", "sentence_order", "span_qa"),
     "Pretraining helps (the premise of the paper; not a Table 5 row)"),
)


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
    os.makedirs(cfg.output_dir, exist_ok=True)
    try:
        lock = OutputLock(cfg.output_dir)
    except RuntimeError as e:
        raise SystemExit(str(e)) from None
    try:
        _check_settings(cfg)
        say(f"Table 5 in miniature -> {cfg.output_dir}\n  {json.dumps(dataclasses.asdict(cfg))}")
        corpus = _write_corpus(cfg)
        pretraining = _pretrain_all(cfg, corpus)
        from training.ablation_tasks import write_ablation_tasks

        say("Tasks ...")
        tasks = write_ablation_tasks(os.path.join(cfg.output_dir, "tasks"), cfg.num_train,
                                     cfg.num_dev, seed=0)
        cells = _fine_tune_all(cfg, pretraining)
        table = _table(cfg, pretraining, tasks, cells, time.time() - started)
        write_json(os.path.join(cfg.output_dir, "table5.json"), table)
        _plot(table, os.path.join(cfg.output_dir, "table5.png"))
        say(format_table(table))
        say(f"-> {os.path.join(cfg.output_dir, 'table5.json')}, "
            f"{os.path.join(cfg.output_dir, 'table5.png')} ({time.time() - started:.0f} s)")
        return 1 if table["errors"] else 0
    finally:
        lock.release()


def _check_settings(cfg):
    """A folder holds one comparison: other settings would mix results."""
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
        return
    write_json(path, mine)


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


def _pretrain_all(cfg, corpus):
    """Every system's pretraining summary, or `{"error": message}`.

    Up to `--workers` runs at once (a tiny model keeps 2 cores busy only in
    part, and start-up, data writing and export overlap); No NSP and LTR
    start once BERT is done: they read its records.
    """
    pending, running, results = ["bert", "gpt", "no_nsp", "ltr"], {}, {}
    while pending or running:
        for name in list(pending):
            if len(running) >= max(1, cfg.workers):
                break
            if name in ("no_nsp", "ltr") and "bert" not in results:
                continue
            pending.remove(name)
            job = _start_pretraining(cfg, name, corpus)
            if "done" in job:
                results[name] = job["done"]
            else:
                running[name] = job
        finished = [name for name, job in running.items() if job["process"].poll() is not None]
        for name in finished:
            results[name] = _finish_pretraining(cfg, name, running.pop(name))
        if running and not finished:
            time.sleep(1)
    return {name: results[name] for name in ("bert", "no_nsp", "ltr", "gpt")}


def _start_pretraining(cfg, name, corpus):
    """Starts `training.pretrain` for one system; returns what
    `_finish_pretraining` waits for (or a result when there is nothing to run)."""
    model, ablation = {"bert": ("bert", ""), "no_nsp": ("bert", "no_nsp"),
                       "ltr": ("bert", "ltr"), "gpt": ("gpt", "")}[name]
    folder = os.path.abspath(os.path.join(cfg.output_dir, "pretrain", name))
    summary_path = os.path.join(folder, "summary.json")
    if os.path.exists(summary_path):
        with open(summary_path, encoding="utf-8") as f:
            return {"done": json.load(f)}
    bert_data = os.path.abspath(os.path.join(cfg.output_dir, "pretrain", "bert", "data"))
    if name in ("no_nsp", "ltr"):  # BERT's records and vocabulary: the same data
        if not os.path.exists(os.path.join(bert_data, "train_records", "manifest.json")):
            return {"done": {"error": "BERT's pretraining data was not written (see "
                                      "pretrain/bert/log.txt)."}}
        data = [f"--input={bert_data}/train_records", f"--heldout_input={bert_data}/heldout_records",
                f"--vocab_file={bert_data}/vocab.txt"]
    else:
        data = [f"--input={os.path.abspath(corpus['train'])}",
                f"--heldout_input={os.path.abspath(corpus['heldout'])}"]
    steps = cfg.pretrain_steps
    command = [
        sys.executable, "-m", "training.pretrain", f"--model={model}", f"--ablation={ablation}",
        f"--output_dir={folder}", f"--preset={'gpt_tiny' if model == 'gpt' else 'tiny'}",
        *data, f"--vocab_size={cfg.vocab_size}", f"--num_train_steps={steps}",
        f"--global_batch_size={cfg.pretrain_batch_size}",
        f"--max_seq_length={cfg.pretrain_seq_length}",
        f"--learning_rate={cfg.pretrain_learning_rate}",
        f"--warmup_steps={cfg.pretrain_warmup_steps}", f"--seed={cfg.seed}",
        f"--checkpoint_every_steps={max(1, steps // 4)}",
        f"--log_every_steps={max(1, steps // 10)}",
        f"--dupe_factor={1 if cfg.quick else 5}", f"--fill_mask_examples={0 if cfg.quick else 2}"]
    os.makedirs(folder, exist_ok=True)
    log_path = os.path.join(folder, "log.txt")
    say(f"Pretraining {name} ({steps} steps; log {log_path}) ...")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [ROOT] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]))
    log = open(log_path, "a", encoding="utf-8")  # noqa: SIM115 (closed by _finish_pretraining)
    log.write(f"$ {' '.join(command)}\n")
    log.flush()
    process = subprocess.Popen(command, cwd=ROOT, env=env, stdout=log,
                               stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    return {"process": process, "log": log, "start": time.time()}


def _finish_pretraining(cfg, name, job):
    if "done" in job:
        return job["done"]
    code = job["process"].wait()
    job["log"].close()
    folder = os.path.join(cfg.output_dir, "pretrain", name)
    summary_path = os.path.join(folder, "summary.json")
    if code or not os.path.exists(summary_path):
        message = (f"training.pretrain exited with status {code}: "
                   f"{_last_lines(os.path.join(folder, 'log.txt'))}")
        say(f"  pretraining {name} FAILED: {message}")
        return {"error": message}
    with open(summary_path, encoding="utf-8") as f:
        summary = json.load(f)
    say(f"  pretraining {name} done in {time.time() - job['start']:.0f} s: "
        f"{_pretraining_scores(summary)}")
    return summary


def _last_lines(path, count=6):
    """The log's last lines that are not TensorFlow start-up noise."""
    with open(path, encoding="utf-8", errors="replace") as f:
        lines = [line.rstrip() for line in f if line.strip()]
    noise = ("I0000", "W0000", "E0000", "WARNING: All log messages")
    lines = [line for line in lines if not line.startswith(noise)]
    return " | ".join(lines[-count:])


def _pretraining_scores(summary):
    keys = ("masked_lm_accuracy", "baseline_masked_lm_accuracy", "next_sentence_accuracy",
            "next_token_accuracy", "baseline_next_token_accuracy", "perplexity",
            "baseline_unigram_perplexity")
    shown = [f"{k} {summary[k]:.4f}" for k in keys if isinstance(summary.get(k), (int, float))]
    return ", ".join(shown) or "held-out scores: see summary.json"


# --- 4. Fine-tuning -------------------------------------------------------------


def _fine_tune_all(cfg, pretraining):
    """`{(system, task): {"seeds": [...], "errors": [...]} or {"na": why}}`.

    With `--workers` >= 2 the runs go to that many worker processes (each
    starts TensorFlow once and runs its share in-process); else here.
    """
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
    if cfg.workers < 2:
        results = [_run_cell(config, *job) for job in jobs]
    else:
        import concurrent.futures
        import multiprocessing

        from training import ablations  # workers import it by this name, not as __main__

        with concurrent.futures.ProcessPoolExecutor(
                cfg.workers, mp_context=multiprocessing.get_context("spawn")) as pool:
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
        import keras

        from training.finetune import run as finetune

        os.makedirs(folder, exist_ok=True)
        start = time.time()
        ft = _finetune_config(cfg, system, task, k, folder)
        with open(os.path.join(folder, "log.txt"), "a", encoding="utf-8") as log:
            with contextlib.redirect_stdout(log):
                try:
                    finetune(ft)
                finally:
                    keras.backend.clear_session()  # one process, many models
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


# --- 5. The table ---------------------------------------------------------------


def aggregate(scores):
    """Mean, sample std (None for one seed), min, max and count of seed scores."""
    n = len(scores)
    if not n:
        return None
    mean = sum(scores) / n
    std = math.sqrt(sum((s - mean) ** 2 for s in scores) / (n - 1)) if n > 1 else None
    return {"mean": mean, "std": std, "min": min(scores), "max": max(scores), "n": n}


def verdict(better, worse):
    """Whether `better` beat `worse`, against the fine-tuning seeds' noise.

    Clear when the mean difference exceeds two standard errors of the
    difference of means (seed std / sqrt(n) on each side).
    """
    if not better or not worse:
        return "not measured"
    diff = better["mean"] - worse["mean"]
    if better["std"] is None or worse["std"] is None:
        return ("same direction (one seed: noise unknown)" if diff > 0
                else "not reproduced (one seed: noise unknown)")
    noise = 2 * math.sqrt(better["std"] ** 2 / better["n"] + worse["std"] ** 2 / worse["n"])
    if abs(diff) < 1e-9:
        return "not reproduced (no difference)"
    if diff > noise:
        return "reproduced"
    if diff > 0:
        return "same direction, within seed noise"
    if diff >= -noise:
        return "not reproduced (opposite direction, within seed noise)"
    return "not reproduced (clearly opposite)"


def _table(cfg, pretraining, tasks, cells, seconds):
    systems = {}
    errors = []
    for system in SYSTEMS:
        row = {"label": system.label, "tasks": {}}
        for task in TASKS:
            cell = cells[system.name, task.name]
            entry = {"na": cell["na"]} if "na" in cell else {
                "seeds": sorted(cell["seeds"], key=lambda s: s["seed"]),
                "aggregate": aggregate([s["score"] for s in cell["seeds"]])}
            if cell.get("errors"):
                entry["errors"] = cell["errors"]
                errors += [f"{system.label} / {task.label}: {e}" for e in cell["errors"]]
            row["tasks"][task.name] = entry
        systems[system.name] = row
    directions = []
    for better, worse, names, paper in DIRECTIONS:
        found = {}
        for name in names:
            a = systems[better]["tasks"][name].get("aggregate")
            b = systems[worse]["tasks"][name].get("aggregate")
            found[name] = {"difference": (a["mean"] - b["mean"]) if a and b else None,
                           "verdict": verdict(a, b)}
        directions.append({"better": better, "worse": worse, "paper": paper, "here": found})
    return {
        "settings": dataclasses.asdict(cfg),
        "scale": "dev accuracy x 100 (word order, sentence order); official SQuAD v1.1 F1 "
                 "(span QA); mean, sample std, min and max over fine-tuning seeds",
        "tasks": {t.name: {"label": t.label, "kind": t.kind, "stands_for": list(t.paper_columns),
                           **tasks["tasks"][t.name]} for t in TASKS},
        "pretraining": pretraining,
        "systems": systems,
        "baselines": {t.name: {
            "trivial": 100 * tasks["tasks"][t.name]["majority"] if t.name != "span_qa"
            else tasks["tasks"][t.name]["majority"],
            "trivial_means": tasks["tasks"][t.name].get("majority_means",
                                                        "majority class of train"),
            **({"bag_of_words": 100 * tasks["tasks"][t.name]["bag_of_words"]}
               if "bag_of_words" in tasks["tasks"][t.name] else {})} for t in TASKS},
        "paper_table5": {"columns": list(PAPER_COLUMNS), **{
            name: list(values) for name, values in PAPER_TABLE5.items()}},
        "directions": directions,
        "errors": errors,
        "wall_seconds": round(seconds, 1),
    }


def _shown(entry):
    if "na" in entry:
        return "n/a"
    stats = entry.get("aggregate")
    if entry.get("errors") and not stats:
        return "failed"
    if not stats:
        return "-"
    text = f"{stats['mean']:5.1f}"
    if stats["std"] is not None:
        text += f" ± {stats['std']:.1f} [{stats['min']:.1f}-{stats['max']:.1f}]"
    return text + (" (+failed)" if entry.get("errors") else "")


def format_table(table):
    """The miniature table, the paper's Table 5 and the verdicts, as text."""
    width = 28
    labels = {s.name: s.label for s in SYSTEMS}
    settings = table["settings"]
    lines = [
        "",
        f"Table 5 in miniature: tiny models (L=2, H=128, A=2), {settings['pretrain_steps']} "
        f"pretraining steps of {settings['pretrain_batch_size']} x "
        f"{settings['pretrain_seq_length']} tokens; {settings['seeds']} fine-tuning seed(s), "
        f"{settings['epochs']} epoch(s), {settings['num_train']} training / "
        f"{settings['num_dev']} dev rows per task.",
        f"Dev scores: {table['scale']}.",
        "",
        f"{'':18s}" + "".join(f"{t.label:>{width}s}" for t in TASKS),
        f"{'':18s}" + "".join(f"{'(~' + '/'.join(t.paper_columns) + ')':>{width}s}"
                              for t in TASKS),
    ]
    for name, row in table["systems"].items():
        lines.append(f"{labels[name]:18s}" + "".join(
            f"{_shown(row['tasks'][t.name]):>{width}s}" for t in TASKS))
    for key, label in (("trivial", "Trivial baseline"), ("bag_of_words", "Bag of words")):
        lines.append(f"{label:18s}" + "".join(
            f"{table['baselines'][t.name][key]:>{width}.1f}" if key in table["baselines"][t.name]
            else f"{'-':>{width}s}" for t in TASKS))
    lines.append("  (trivial: majority class; span QA: "
                 f"{table['baselines']['span_qa']['trivial_means']}; bag of words: logistic "
                 "regression on word 1-2 grams)")
    lines += ["", "Pretraining, held out (baseline: the most frequent token; the unigram model):"]
    for name, summary in table["pretraining"].items():
        label = {"bert": "BERT (MLM + NSP)", "no_nsp": "No NSP", "ltr": "LTR & No NSP",
                 "gpt": "OpenAI GPT"}[name]
        shown = (f"FAILED: {summary['error']}" if "error" in summary
                 else _pretraining_scores(summary))
        lines.append(f"  {label:18s}{shown}")
    lines += ["", "The paper's Table 5 (BERT-Base size, dev):",
              f"{'':18s}" + "".join(f"{c:>8s}" for c in PAPER_COLUMNS)]
    for name, values in PAPER_TABLE5.items():
        lines.append(f"{labels[name]:18s}" + "".join(f"{v:8.1f}" for v in values))
    lines += ["", "Directions (here: mean difference, expected-better minus expected-worse):"]
    task_labels = {t.name: t.label for t in TASKS}
    for direction in table["directions"]:
        lines.append(f"- {direction['paper']}")
        for name, found in direction["here"].items():
            diff = found["difference"]
            shown = "n/a" if diff is None else f"{diff:+.1f}"
            lines.append(f"    {task_labels[name]:15s} {shown:>7s}  {found['verdict']}")
    lines.append("  One pretraining run per system: the seed spread covers fine-tuning only.")
    if table["errors"]:
        lines += ["", "FAILED:"] + [f"- {e}" for e in table["errors"]]
    return "\n".join(lines)


def _plot(table, path):
    """A bar chart per task: mean and std over seeds, each seed a dot, baselines as lines."""
    import matplotlib

    matplotlib.use("Agg")  # headless
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(1, len(TASKS), figsize=(5 * len(TASKS), 4.8))
    colors = ("#1f77b4", "#6baed6", "#d62728", "#ff9896", "#2ca02c", "#7f7f7f")
    for ax, task in zip(axes, TASKS):
        baselines = table["baselines"][task.name]
        shown = [v for v in baselines.values() if isinstance(v, float | int)]
        for i, system in enumerate(SYSTEMS):
            entry = table["systems"][system.name]["tasks"][task.name]
            stats = entry.get("aggregate")
            if stats:
                ax.bar(i, stats["mean"], color=colors[i], yerr=stats["std"] or 0, capsize=4)
                ax.plot([i] * len(entry["seeds"]), [s["score"] for s in entry["seeds"]], "k.",
                        markersize=4)
                shown += [s["score"] for s in entry["seeds"]] + [stats["mean"] + (stats["std"] or 0)]
            else:
                ax.text(i, 0.03, "n/a" if "na" in entry else "failed", ha="center", fontsize=9,
                        transform=ax.get_xaxis_transform())  # x: bar, y: axes fraction
        ax.axhline(baselines["trivial"], color="k", linestyle="--", linewidth=1,
                   label="trivial baseline")
        if "bag_of_words" in baselines:
            ax.axhline(baselines["bag_of_words"], color="k", linestyle=":", linewidth=1,
                       label="bag of words (1-2 grams)")
        low, high = min(shown), max(shown)
        margin = max(1.0, 0.1 * (high - low))
        ax.set_ylim(max(0.0, low - 4 * margin), high + margin)  # accuracies sit near 50-100
        ax.set_xticks(range(len(SYSTEMS)))
        ax.set_xticklabels([s.label for s in SYSTEMS], rotation=35, ha="right", fontsize=8)
        ax.set_title(f"{task.label} (~{'/'.join(task.paper_columns)})\n{task.kind}", fontsize=10)
        ax.legend(fontsize=7, loc="best")
    settings = table["settings"]
    figure.suptitle(f"BERT Table 5 in miniature: tiny models, {settings['pretrain_steps']} "
                    f"pretraining steps, {settings['seeds']} fine-tuning seed(s); bars: mean ± "
                    "std, dots: seeds", fontsize=10)
    figure.tight_layout()
    figure.savefig(path + ".tmp.png", dpi=100)
    plt.close(figure)
    os.replace(path + ".tmp.png", path)


if __name__ == "__main__":
    define_flags(AblationsConfig, HELP)
    try:
        app.run(main)
    except KeyboardInterrupt:
        sys.exit(130)
