"""The BERT paper's Table 5 and Table 1 in miniature, pre-registered: every
system pretrained alike on the default corpus, fine-tuned alike on three
offline tasks, each cell over five seeds with its 95% interval, and a
verdict for each of the paper's directions.

    python -m training.ablations                                  # the default run
    python -m training.ablations --scaling                        # the next scaling stage
    python -m training.ablations --quick --output_dir=/tmp/t5     # a smoke run

Pre-registration
----------------
Fixed on 2026-11-28 and committed before any ablation system (No NSP,
LTR, + BiLSTM, GPT, ELMo, XLNet, feature-based BERT) was run under it. The
calibration that chose the tasks (`training.ablation.calibration`) ran only
BERT and the same model without pretraining, to ask whether a task can be
learned at all at this scale and whether pretraining helps; what it found
is in the commit message that introduced this design.

- Corpus: the default corpus (`training.default_corpus`: the standard
  library's docstrings and pydoc topics), 15% of its documents held out of
  pretraining (`training.ablation.tasks.HELDOUT_PERCENT`); every dev row
  comes from held-out documents.
- Tasks (`training.ablation.tasks`, official layouts read by
  `training.finetune` as they are):
  - topic (single sentence, SST-2 layout): is a sentence from the library
    reference's internet chapters or from elsewhere;
  - answer sentence (sentence pair, QNLI layout, QNLI's own construction):
    a question made from a sentence (a span replaced by "what") with that
    sentence (entailment) or with its neighbour in the paragraph;
  - span QA (SQuAD v1.1 JSON, official metric): the same kind of
    question, its answer (one to three words) to be found in the sentence it
    was made from; the answer's end is marked only by the words to its right.
  Calibration dropped three candidates that BERT could not learn (word
  order with two words swapped: MCC at most 0.10; one word replaced: at
  most 55.0%; sentence order: at most 59.5%) and span QA over two- and
  four-sentence paragraphs (at most 14.8 F1 against 7.9 for the first word).
- Rows: 2,500 training, 500 validation (carved from training documents) and
  400 dev rows (questions) per task, sampled with seed 0.
- Pretraining: every system the same corpus and the same budget in tokens
  seen, 6,000 steps x 32 sequences x 128 tokens, except ELMo: its LSTMs
  read about 5,000 tokens/s on 2 cores here against BERT's 40,000, so the
  same tokens would take it 3 hours; it gets 1/8 of them (2,400 steps of
  64 windows of 20 tokens) and its row says so. Tiny models (BERT, No NSP, LTR: L=2, H=128, A=2;
  GPT gpt_tiny; XLNet its tiny shape; ELMo elmo_tiny), learned vocabularies
  of 4,000 (WordPiece, BPE, SentencePiece; ELMo's words), learning rate
  2e-3 with 10% warmup and linear decay (ELMo: its own Adagrad 0.2, as
  bilm-tf), one pretraining seed (`--seed`).
- Systems: BERT (MLM + NSP), No NSP, LTR & No NSP (causal in pretraining
  and fine-tuning, pooled from the last token), + BiLSTM (LTR with a random
  BiLSTM in fine-tuning), BERT feature-based (frozen BERT, its hidden
  states concatenated into a trained two-layer BiLSTM: Table 7), OpenAI GPT
  (its input transformations and auxiliary LM loss), ELMo (frozen biLM,
  scalar mix, BiLSTM task network), XLNet, No pretraining (BERT's shape,
  random weights), the trivial and bag-of-words baselines. GPT and ELMo
  have no span QA here: n/a, with the reason.
- Fine-tuning: batch 32, 10% warmup, linear decay; topic and answer
  sentence 3 epochs at 64 and 96 tokens, span QA 6 epochs at 128. Each
  system's learning rate is chosen per task from {1e-4, 3e-4, 1e-3} by its
  validation score (seed 0, trained on the 2,500 rows; a tie goes to the
  smaller rate); five seeds at that rate are then scored on dev, which no
  choice looked at.
- Statistics (`training.ablation.stats`): per cell the mean and 95%
  t interval over the five seeds; per direction the paired difference over
  seeds (seed k with seed k) with its 95% t interval; "reproduced" when the
  interval is above 0, "contradicted" when below, else "inconclusive".
- Directions (`training.ablation.table.DIRECTIONS`): robust, expected to
  be reproduced: No NSP > LTR on answer sentence and span QA; + BiLSTM >
  LTR on span QA; BERT > No pretraining on every task. Reported as
  measured: NSP's effect (BERT vs No NSP), + BiLSTM on the pair task,
  BERT vs GPT, ELMo and its own frozen features.
- Scaling (`--scaling`): BERT, No NSP and LTR pretrained for 1/4 and 1/2
  of the steps, each budget a stage of its own (`scaling/stage_<steps>.json`),
  beside the default run's full budget; No pretraining does not depend on
  the budget. `scaling.png` plots each direction's difference against the
  budget.

Every run is skipped when its `summary.json` exists, so the same command
after a crash goes on where it stopped, and a finished run only redraws the
tables. Pretraining and fine-tuning runs go to `--workers` worker
processes (TensorFlow starts once per worker, not once per run), longest
first. Outputs: `table5.json`/`.png`, `table1.json`/`.png` (settings and
the code's commit in each), and the tables beside the paper's, printed, in
`tables.txt` and as Markdown in `tables.md`.

A system whose pretraining or fine-tuning fails keeps its place in the
tables with the error message; the command then exits with status 1.
"""

import concurrent.futures
import contextlib
import dataclasses
import json
import os
import subprocess
import sys
import time
import traceback

from command_line import console
from command_line import keras_extras
from tf_records.input_files import check_output_folder
from training.ablation.table import PRETRAINED
from training.ablation.table import SYSTEMS
from training.ablation.table import TASKS
from training.ablation.table import build_tables
from training.ablation.table import format_tables
from training.ablation.table import plot_table
from training.ablation.table import pretraining_scores
from training.config_flags import check_at_least
from training.config_flags import define_flags
from training.config_flags import from_flags
from training.pretrain_common import write_json


@dataclasses.dataclass(frozen=True)
class AblationsConfig:
    """Settings of the comparison; the defaults are the pre-registered run's."""

    output_dir: str = "ablations_output"
    quick: bool = False
    scaling: bool = False
    systems: str = ""
    pretrain_steps: int = 6000
    pretrain_batch_size: int = 32
    pretrain_seq_length: int = 128
    pretrain_learning_rate: float = 2e-3
    pretrain_warmup_steps: int = 600
    vocab_size: int = 4000
    num_train: int = 2500
    num_validation: int = 500
    num_dev: int = 400
    seeds: int = 5
    learning_rates: str = "1e-4,3e-4,1e-3"
    batch_size: int = 32
    seed: int = 12345
    workers: int = 2


HELP = {
    "output_dir": "Run folder: corpus, pretraining, tasks, fine-tuning runs, table5.json/png, "
                  "table1.json/png, scaling/.",
    "quick": "Smoke run: the budgets below that are left at their defaults become tiny "
             "(20 pretraining steps on 150 documents, 48 training rows, 1 seed, 1 epoch, one "
             "learning rate, so no selection runs).",
    "scaling": "Run the next scaling stage (BERT, No NSP and LTR pretrained for 1/4, then 1/2 "
               "of --pretrain_steps; the full budget is the default run's) and redraw "
               "scaling.png from every stage present in <output_dir>/scaling/.",
    "systems": "Comma-separated systems to run (empty: all): "
               + ", ".join(s.name for s in SYSTEMS) + ".",
    "pretrain_steps": "Pretraining steps of every system (ELMo: 1/8 of their tokens, in its "
                      "64 windows of 20 tokens per step).",
    "pretrain_batch_size": "Pretraining sequences per step.",
    "pretrain_seq_length": "Pretraining tokens per sequence (GPT: per window).",
    "pretrain_learning_rate": "Peak pretraining learning rate (not ELMo's: bilm-tf's Adagrad "
                              "0.2).",
    "pretrain_warmup_steps": "Linear warmup, then linear decay to 0 at the last step.",
    "vocab_size": "Size of the learned vocabularies (WordPiece, BPE, SentencePiece).",
    "num_train": "Training rows (questions) of each task.",
    "num_validation": "Validation rows of each task (from training documents): the learning "
                      "rate is chosen on them.",
    "num_dev": "Dev rows (questions) of each task, from documents held out of pretraining.",
    "seeds": "Fine-tuning seeds per system and task, scored on dev.",
    "learning_rates": "The fine-tuning learning-rate grid, comma-separated; each system's "
                      "rate per task is the one with the best validation score.",
    "batch_size": "Fine-tuning batch size.",
    "seed": "Pretraining seed; fine-tuning seed k is seed + 1 + k.",
    "workers": "Worker processes for the pretraining and fine-tuning runs. 1: every run "
               "in this process, one after the other.",
}

# What --quick changes, where the flag was left at its default.
QUICK = {"pretrain_steps": 20, "pretrain_batch_size": 8, "pretrain_seq_length": 64,
         "pretrain_warmup_steps": 2, "vocab_size": 1000, "num_train": 48, "num_validation": 16,
         "num_dev": 24, "seeds": 1, "learning_rates": "1e-3"}
QUICK_DOCUMENTS = 150  # training documents of the quick run's corpus
QUICK_EPOCHS = 1
ELMO_WINDOW = 20  # bilm-tf's unroll_steps: ELMo's tokens per row
ELMO_BATCH = 64
# ELMo's LSTMs read about 5,000 tokens/s on 2 cores here, BERT's encoder about
# 40,000: the same tokens would take ELMo 3 hours. It gets this share of them.
ELMO_TOKEN_SHARE = 8


def elmo_steps(cfg):
    """ELMo's pretraining steps: 1/ELMO_TOKEN_SHARE of the others' tokens."""
    tokens = cfg.pretrain_steps * cfg.pretrain_batch_size * cfg.pretrain_seq_length
    return max(1, tokens // (ELMO_TOKEN_SHARE * ELMO_BATCH * ELMO_WINDOW))


def say(message):
    print(message, flush=True)


def main(argv):
    del argv
    cfg = from_flags(AblationsConfig)
    if cfg.quick:
        defaults = AblationsConfig()
        cfg = dataclasses.replace(cfg, **{k: v for k, v in QUICK.items()
                                         if getattr(cfg, k) == getattr(defaults, k)})
    if cfg.scaling:
        from training.ablation.scaling import run_scaling

        sys.exit(run_scaling(cfg, run))
    sys.exit(run(cfg))


def learning_rates(cfg):
    try:
        rates = [float(r) for r in cfg.learning_rates.split(",")]
    except ValueError:
        raise SystemExit(f"--learning_rates={cfg.learning_rates!r}: comma-separated numbers, "
                         "e.g. 1e-4,3e-4,1e-3.") from None
    if not rates or any(not r > 0 for r in rates):
        raise SystemExit(f"--learning_rates={cfg.learning_rates!r}: every rate must be > 0.")
    return rates


def chosen_systems(cfg):
    if not cfg.systems:
        return SYSTEMS
    names = [n.strip() for n in cfg.systems.split(",") if n.strip()]
    known = {s.name: s for s in SYSTEMS}
    unknown = [n for n in names if n not in known]
    if unknown:
        raise SystemExit(f"--systems: {', '.join(map(repr, unknown))} not one of "
                         f"{', '.join(known)}.")
    return tuple(s for s in SYSTEMS if s.name in names)


def check_flags(cfg):
    """`SystemExit` naming the first flag whose value cannot make a
    comparison; run before anything is written."""
    check_at_least(cfg, {
        "pretrain_steps": 1, "pretrain_batch_size": 1, "pretrain_seq_length": 2,
        "pretrain_warmup_steps": 0, "vocab_size": 1, "num_train": 1, "num_validation": 1,
        "num_dev": 1, "seeds": 1, "batch_size": 1, "workers": 1})
    if cfg.pretrain_seq_length < 16:
        raise SystemExit(f"--pretrain_seq_length={cfg.pretrain_seq_length}: BERT's segment "
                         "pairs need at least 16 tokens.")
    if not cfg.pretrain_learning_rate > 0:
        raise SystemExit(f"--pretrain_learning_rate={cfg.pretrain_learning_rate!r}: must be > 0.")
    learning_rates(cfg)
    chosen_systems(cfg)
    if cfg.pretrain_seq_length > GPT_POSITIONS:
        raise SystemExit(
            f"--pretrain_seq_length={cfg.pretrain_seq_length}: OpenAI GPT's size here (gpt_tiny) "
            f"has {GPT_POSITIONS} positions, and every system pretrains alike: give at most "
            f"{GPT_POSITIONS}.")
    check_output_folder(cfg.output_dir)


GPT_POSITIONS = 128  # gpt_tiny's n_positions: the longest window GPT's pretraining takes
# Neither changes a result: a folder resumes with other values.
_FREE_SETTINGS = ("output_dir", "workers", "scaling", "systems")


def _check_settings(cfg):
    """A folder holds one comparison: other settings would mix results.
    Returns the settings to write (a new folder), or None (the same as
    the folder's)."""
    path = os.path.join(cfg.output_dir, "settings.json")
    mine = {k: v for k, v in dataclasses.asdict(cfg).items() if k not in _FREE_SETTINGS}
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


def commit():
    """The code's git commit (with "+changes" when the tree differs), or "unknown"."""
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    try:
        head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=root, capture_output=True,
                              text=True, check=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"],
                               cwd=root, capture_output=True, text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return head + ("+changes" if dirty.strip() else "")


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
        from training.ablation.tasks import write_ablation_tasks

        say("Tasks ...")
        tasks = write_ablation_tasks(os.path.join(cfg.output_dir, "tasks"), cfg.num_train,
                                     cfg.num_dev, seed=0, num_validation=cfg.num_validation)
        systems = chosen_systems(cfg)
        with _workers(cfg) as pool:
            pretraining, cells = _schedule(cfg, corpus, systems, pool)
        settings_now = {k: v for k, v in dataclasses.asdict(cfg).items()
                        if k not in _FREE_SETTINGS}
        table5, table1 = build_tables(settings_now, pretraining, tasks, cells,
                                      time.time() - started, commit())
        for name, table in (("table5", table5), ("table1", table1)):
            write_json(os.path.join(cfg.output_dir, f"{name}.json"), table)
            plot_table(table, os.path.join(cfg.output_dir, f"{name}.png"),
                       {"table5": "BERT Table 5 in miniature",
                        "table1": "BERT Table 1 in miniature"}[name])
        text = format_tables(table5, table1)
        with open(os.path.join(cfg.output_dir, "tables.txt.tmp"), "w", encoding="utf-8") as f:
            f.write(text.lstrip("\n") + "\n")
        os.replace(os.path.join(cfg.output_dir, "tables.txt.tmp"),
                   os.path.join(cfg.output_dir, "tables.txt"))
        from training.ablation.table import format_markdown

        with open(os.path.join(cfg.output_dir, "tables.md.tmp"), "w", encoding="utf-8") as f:
            f.write(format_markdown(table5, table1))
        os.replace(os.path.join(cfg.output_dir, "tables.md.tmp"),
                   os.path.join(cfg.output_dir, "tables.md"))
        say(text)
        say(f"-> {cfg.output_dir}/table5.json, table5.png, table1.json, table1.png, tables.txt "
            f"({time.time() - started:.0f} s)")
        return 1 if table5["errors"] or table1["errors"] else 0
    finally:
        lock.release()


# --- 1. Corpus ---------------------------------------------------------------


def _write_corpus(cfg):
    """`{"train": path, "heldout": path}` of the default corpus (quick: its first documents)."""
    from training.ablation.tasks import HELDOUT_PERCENT
    from training.default_corpus import write_default_corpus

    folder = os.path.join(cfg.output_dir, "corpus")
    paths = {side: os.path.join(folder, f"{side}.txt") for side in ("train", "heldout")}
    if all(os.path.exists(p) for p in paths.values()):
        return paths
    say("Default corpus ...")
    paths, counts = write_default_corpus(folder, heldout_percent=HELDOUT_PERCENT)
    if cfg.quick:
        with open(paths["train"], encoding="utf-8") as f:
            documents = f.read().split("\n\n")[:QUICK_DOCUMENTS]
        with open(paths["train"] + ".tmp", "w", encoding="utf-8") as f:
            f.write("\n\n".join(documents) + "\n")
        os.replace(paths["train"] + ".tmp", paths["train"])
        counts["train"] = len(documents)
    say(f"  {counts['train']} training and {counts['heldout']} held-out documents -> {folder}")
    return paths


# --- 2. The schedule: pretraining, selection, seeds ----------------------------


class _Inline:
    """`submit` runs the call at once: the schedule without worker processes."""

    def submit(self, fn, *args):
        future = concurrent.futures.Future()
        future.set_result(fn(*args))
        return future


def _schedule(cfg, corpus, systems, pool):
    """Every pretraining, then each cell's learning-rate selection, then its
    seeds, each submitted as soon as what it needs is done (pretraining
    first: the longest runs). Returns `(pretraining summaries, cells)`."""
    from training import ablations  # workers import it by this name, not as __main__

    pool = pool or _Inline()
    config = dataclasses.asdict(cfg)
    rates = learning_rates(cfg)
    needed = [name for name in PRETRAINED if any(s.checkpoint == name for s in systems)]
    pretraining, cells, running, started = {}, {}, {}, set()
    for system in systems:
        for task in TASKS:
            cells[system.name, task.name] = (
                {"na": system.no_span} if system.no_span and task.name == "span_qa"
                else {"selection": {}, "seeds": [], "errors": []})

    def submit(kind, key, fn, *args):
        running[pool.submit(fn, *args)] = (kind, key)

    def start_pretraining(name):
        if name in started:
            return
        started.add(name)
        summary = _pretraining_summary(cfg, name)
        if summary is not None:  # done before
            return pretrained(name, summary)
        if name in ("no_nsp", "ltr") and not os.path.exists(os.path.join(
                _pretrain_folder(cfg, "bert"), "data", "train_records", "manifest.json")):
            return pretrained(name, {"error": "BERT's pretraining data was not written (see "
                                              "pretrain/bert/log.txt)."})
        say(f"Pretraining {name} (log {os.path.join(_pretrain_folder(cfg, name), 'log.txt')})"
            " ...")
        submit("pretrain", name, ablations._run_pretraining, config, name, corpus)

    def pretrained(name, summary):
        pretraining[name] = summary
        if "error" in summary:
            say(f"  pretraining {name} FAILED: {summary['error']}")
        elif "wall_seconds" in summary:
            say(f"  pretraining {name} ({summary['wall_seconds']:.0f} s): "
                f"{pretraining_scores(summary)}")
        if name == "bert":  # the LTR and No NSP read its records; then the rest
            for later in AFTER_BERT:
                if later in needed:
                    start_pretraining(later)
        for system in systems:
            if system.checkpoint == name:
                start_system(system)

    def start_system(system):
        failed = pretraining.get(system.checkpoint, {}).get("error")
        for task in TASKS:
            cell = cells[system.name, task.name]
            if "na" in cell:
                continue
            if failed:
                cell["errors"].append(f"pretraining {system.checkpoint} failed: {failed}")
                continue
            if len(rates) == 1:  # nothing to choose
                cell["learning_rate"] = rates[0]
                submit_seeds(system.name, task.name, rates[0])
                continue
            for rate in rates:
                submit("select", (system.name, task.name, rate), ablations._run_cell, config,
                       system.name, task.name, "select", rate, 0)

    def submit_seeds(system, task, rate):
        for k in range(cfg.seeds):
            submit("seed", (system, task), ablations._run_cell, config, system, task, "dev",
                   rate, k)

    def selected(key, result):
        system, task, rate = key
        cell = cells[system, task]
        if "error" in result:
            cell["errors"].append(result["error"])
        else:
            cell["selection"][f"{rate:g}"] = result["score"]
        if len(cell["selection"]) + len(cell["errors"]) < len(rates) or not cell["selection"]:
            return
        # The best validation score; a tie goes to the smaller rate.
        best = max(sorted(cell["selection"], key=float), key=lambda r: cell["selection"][r])
        cell["learning_rate"] = float(best)
        say(f"  {system}/{task}: learning rate {best} (validation "
            + ", ".join(f"{r}: {s:.1f}" for r, s in cell["selection"].items()) + ")")
        submit_seeds(system, task, float(best))

    def seeded(key, result):
        cell = cells[key]
        if "error" in result:
            cell["errors"].append(result["error"])
        else:
            cell["seeds"].append(result)

    # Longest first: GPT (a loss at every position) and BERT, then what
    # BERT's records let start (LTR, as long as GPT, first).
    for name in ("gpt", "bert"):
        if name in needed:
            start_pretraining(name)
    if "bert" not in needed:
        for name in AFTER_BERT:
            if name in needed:
                start_pretraining(name)
    for system in systems:
        if not system.checkpoint:
            start_system(system)
    while running:
        done, _ = concurrent.futures.wait(running, return_when=concurrent.futures.FIRST_COMPLETED)
        for future in done:
            kind, key = running.pop(future)
            {"pretrain": pretrained, "select": selected, "seed": seeded}[kind](
                key, future.result())
    return {name: pretraining[name] for name in needed}, cells


AFTER_BERT = ("ltr", "no_nsp", "xlnet", "elmo")  # submitted in this order once BERT is done


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
    """`training.pretrain`'s flags for one system, by name: the same corpus
    and tokens seen for all."""
    model, ablation = {"bert": ("bert", ""), "no_nsp": ("bert", "no_nsp"),
                       "ltr": ("bert", "ltr"), "gpt": ("gpt", ""), "elmo": ("elmo", ""),
                       "xlnet": ("xlnet", "")}[name]
    if name in ("no_nsp", "ltr"):  # BERT's records and vocabulary: the same data
        bert_data = os.path.join(_pretrain_folder(cfg, "bert"), "data")
        data = {"input": f"{bert_data}/train_records",
                "heldout_input": f"{bert_data}/heldout_records",
                "vocab_file": f"{bert_data}/vocab.txt"}
    else:
        data = {"input": os.path.abspath(corpus["train"]),
                "heldout_input": os.path.abspath(corpus["heldout"])}
    steps, batch, length = cfg.pretrain_steps, cfg.pretrain_batch_size, cfg.pretrain_seq_length
    schedule = {"learning_rate": cfg.pretrain_learning_rate,
                "warmup_steps": cfg.pretrain_warmup_steps}
    extra = {}
    if model == "elmo":  # 1/8 of the tokens, in bilm-tf's windows; its own optimizer
        steps = elmo_steps(cfg)
        batch, length, schedule = ELMO_BATCH, ELMO_WINDOW, {}
    elif model == "xlnet":  # as many predictions per sequence as BERT's
        extra = {"max_predictions_per_seq": max(1, round(0.15 * length))}
    elif model == "bert":
        extra = {"dupe_factor": 1 if cfg.quick else 10, "fill_mask_examples": 0}
    return {
        "model": model, "ablation": ablation, "output_dir": folder, "preset": "tiny", **data,
        "vocab_size": cfg.vocab_size, "num_train_steps": steps, "global_batch_size": batch,
        "max_seq_length": length, **schedule, **extra, "seed": cfg.seed,
        "checkpoint_every_steps": max(1, steps // 4), "log_every_steps": max(1, steps // 10),
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
    import multiprocessing

    with concurrent.futures.ProcessPoolExecutor(
            cfg.workers, mp_context=multiprocessing.get_context("spawn"),
            initializer=keras_extras.leave_out_of_keras) as pool:
        yield pool


# --- 3. Fine-tuning ----------------------------------------------------------------


def _run_cell(config, system_name, task_name, split, rate, k):
    """One fine-tuning run and its score, or `{"error": message}` (the
    traceback goes to the run's log.txt). `split`: "select" (trained on the
    training rows, scored on validation) or "dev". Takes plain values: it
    runs in a worker process."""
    cfg = AblationsConfig(**config)
    system = next(s for s in SYSTEMS if s.name == system_name)
    task = next(t for t in TASKS if t.name == task_name)
    folder = _cell_folder(cfg, system, task, split, rate, k)
    try:
        return _cell(cfg, system, task, split, rate, k, folder)
    except (Exception, SystemExit) as e:  # noqa: BLE001 (a failed run stays in the table)
        message = f"{system_name}/{task_name}/{split}/lr{rate:g}/seed{k}: {type(e).__name__}: {e}"
        say(f"  FAILED {message}")
        os.makedirs(folder, exist_ok=True)
        with open(os.path.join(folder, "log.txt"), "a", encoding="utf-8") as log:
            log.write(traceback.format_exc())
        return {"error": message}


def _cell_folder(cfg, system, task, split, rate, k):
    return os.path.join(cfg.output_dir, "finetune", system.name, task.name,
                        f"{split}-lr{rate:g}-seed{k}")


def _finetune_config(cfg, system, task, split, rate, k, folder):
    from training.finetune import FinetuneConfig

    pretrain = os.path.abspath(os.path.join(cfg.output_dir, "pretrain"))
    bert_vocab = os.path.join(pretrain, "bert", "data", "vocab.txt")
    vocab, preset = bert_vocab, ""
    if system.model == "gpt":
        checkpoint = os.path.join(pretrain, "gpt", "export", "causal_lm.keras")
        vocab = os.path.join(pretrain, "gpt", "data", "gpt_vocab", "vocab.json")
    elif system.model in ("elmo", "xlnet"):  # their export folders, vocabulary inside
        checkpoint, vocab = os.path.join(pretrain, system.model, "export"), ""
    elif system.checkpoint:
        checkpoint = os.path.join(pretrain, system.checkpoint, "export", "pretrainer.keras")
    else:
        checkpoint, preset = "", "tiny"
    data = os.path.join(cfg.output_dir, "tasks", task.name)
    length = task.max_seq_length
    if system.model == "elmo":
        from training.ablation.tasks import MAX_WORDS

        length = MAX_WORDS + 2  # ELMo counts words, <S> and </S>
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
        from training.finetune import run as finetune

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
    if task.name == "span_qa":
        score = {"score": summary["history"]["dev_f1"][-1],
                 "exact_match": summary["history"]["dev_exact_match"][-1]}
    else:
        score = {"score": 100 * _accuracy(os.path.join(folder, "dev_predictions.tsv"))}
    say(f"  {system.name:13s} {task.name:15s} {split:6s} lr {rate:<6g} seed {k}: "
        f"{score['score']:.2f}{took}")
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
