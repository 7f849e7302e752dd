"""The Table 5 comparison's runs (`training.ablations`): each system's
pretraining and each fine-tuning run (the learning rate chosen on
validation, then the seeds on dev), submitted to `--workers` worker
processes as soon as what it needs is done, longest first. A run whose
`summary.json` exists is not run again; a failed one leaves its error in
its cell. Each fine-tuning run is `training.ablation.cells`. The runs live
here, not in `training.ablations`: the spawned workers import what they run
by its module's name, and under `python -m` that module is `__main__`.
"""

import concurrent.futures
import contextlib
import dataclasses
import json
import os
import traceback

from tf_records.command_line import keras_extras
from training.ablation.cells import _free_models
from training.ablation.cells import _load_cell
from training.ablation.cells import _run_cell
from training.ablation.settings import PRETRAINED
from training.ablation.settings import PRETRAININGS
from training.ablation.settings import AblationsConfig
from training.ablation.settings import beyond_grid
from training.ablation.settings import learning_rates
from training.ablation.systems import TASKS
from training.ablation.table import pretraining_scores


def say(message):
    print(message, flush=True)


# --- The schedule: pretraining, selection, seeds -------------------------------


class _Inline:
    """`submit` runs the call at once: the schedule without worker processes."""

    def submit(self, fn, *args):
        future = concurrent.futures.Future()
        future.set_result(fn(*args))
        return future


def _schedule(cfg, corpus, systems, pool, load_only=False):
    """Every pretraining, then each cell's learning-rate selection, then its
    seeds, each submitted as soon as what it needs is done (pretraining
    first: the longest runs). Returns `(pretraining summaries, cells)`.

    `load_only`: run nothing; read what earlier runs in the folder left (a
    run not there is the error "not run")."""
    pool = pool or _Inline()
    tell = (lambda message: None) if load_only else say
    config = dataclasses.asdict(cfg)
    rates = learning_rates(cfg)
    # No pretraining (no checkpoint) needs BERT's vocabulary, so BERT's pretraining.
    needed = [name for name in PRETRAINED if any(
        s.checkpoint == name or (name == "bert" and not s.checkpoint) for s in systems)]
    pretraining, cells, running, started = {}, {}, {}, set()
    tried = {}  # (system, task): the rates whose selection run was submitted
    for system in systems:
        for task in TASKS:
            cells[system.name, task.name] = (
                {"na": system.no_span} if system.no_span and task.name == "span_qa"
                else {"selection": {}, "seeds": [], "errors": []})

    def submit(kind, key, fn, *args):
        if load_only:
            fn = _load_cell
        running[pool.submit(fn, *args)] = (kind, key)

    def start_pretraining(name):
        if name in started:
            return
        started.add(name)
        summary = _pretraining_summary(cfg, name)
        if summary is not None:  # done before
            return pretrained(name, summary)
        if load_only:
            return pretrained(name, {"error": "not run"})
        if name in ("no_nsp", "ltr") and not os.path.exists(os.path.join(
                _pretrain_folder(cfg, "bert"), "data", "train_records", "manifest.json")):
            return pretrained(name, {"error": "BERT's pretraining data was not written (see "
                                              "pretrain/bert/log.txt)."})
        say(f"Pretraining {name} (log {os.path.join(_pretrain_folder(cfg, name), 'log.txt')})"
            " ...")
        submit("pretrain", name, _run_pretraining, config, name, corpus)

    def pretrained(name, summary):
        pretraining[name] = summary
        if "error" in summary:
            tell(f"  pretraining {name} FAILED: {summary['error']}")
        elif "wall_seconds" in summary:
            tell(f"  pretraining {name} ({summary['wall_seconds']:.0f} s): "
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
            tried[system.name, task.name] = list(rates)
            for rate in rates:
                submit("select", (system.name, task.name, rate), _run_cell, config,
                       system.name, task.name, "select", rate, 0)

    def submit_seeds(system, task, rate):
        for k in range(cfg.seeds):
            submit("seed", (system, task), _run_cell, config, system, task, "dev",
                   rate, k)

    def selected(key, result):
        system, task, rate = key
        cell = cells[system, task]
        if "error" in result:
            cell["errors"].append(result["error"])
        else:
            cell["selection"][f"{rate:g}"] = result["score"]
        rates_tried = tried[system, task]
        if len(cell["selection"]) + len(cell["errors"]) < len(rates_tried) or not cell["selection"]:
            return
        # The best validation score; a tie goes to the smaller rate.
        best = max(sorted(cell["selection"], key=float), key=lambda r: cell["selection"][r])
        more = beyond_grid(rates, rates_tried, float(best), cfg.extend_grid)
        if more is not None and not cell["errors"]:
            # The best is at an end of what was tried: try the next rate out.
            rates_tried.append(more)
            tell(f"  {system}/{task}: best rate so far {best}, at the end of those tried; "
                 f"trying {more:g}")
            submit("select", (system, task, more), _run_cell, config, system, task, "select",
                   more, 0)
            return
        cell["learning_rate"] = float(best)
        tell(f"  {system}/{task}: learning rate {best} (validation "
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
    # No pretraining reads BERT's vocabulary, written (atomically) in the
    # first seconds of BERT's pretraining: its runs start once it is there.
    waiting = [system for system in systems if not system.checkpoint]
    bert_vocab = os.path.join(_pretrain_folder(cfg, "bert"), "data", "vocab.txt")

    def start_waiting():
        for system in waiting:
            start_system(system)
        waiting.clear()

    while True:
        if waiting and os.path.exists(bert_vocab):
            start_waiting()
        if waiting and "bert" in pretraining:
            # Finished (or failed) without it: their runs fail naming the file.
            start_waiting()
        if not running:
            break
        done, _ = concurrent.futures.wait(running, timeout=5 if waiting else None,
                                          return_when=concurrent.futures.FIRST_COMPLETED)
        for future in done:
            kind, key = running.pop(future)
            {"pretrain": pretrained, "select": selected, "seed": seeded}[kind](
                key, future.result())
    return {name: pretraining[name] for name in needed}, cells


AFTER_BERT = ("ltr", "no_nsp", "xlnet", "elmo")  # submitted in this order once BERT is done


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
    """`training.pretrain`'s flags for one pretraining run (`PRETRAININGS`):
    the same corpus and tokens seen for all, then the run's own flags."""
    run = next(p for p in PRETRAININGS if p.name == name)
    if run.records_from:  # its records and vocabulary: the same data
        data_folder = os.path.join(_pretrain_folder(cfg, run.records_from), "data")
        data = {"input": f"{data_folder}/train_records",
                "heldout_input": f"{data_folder}/heldout_records",
                "vocab_file": f"{data_folder}/vocab.txt"}
    else:
        data = {"input": os.path.abspath(corpus["train"]),
                "heldout_input": os.path.abspath(corpus["heldout"])}
    flags = {
        "model": run.model, "ablation": run.ablation, "output_dir": folder, "preset": "tiny",
        **data, "vocab_size": cfg.vocab_size, "num_train_steps": cfg.pretrain_steps,
        "global_batch_size": cfg.pretrain_batch_size, "max_seq_length": cfg.pretrain_seq_length,
        "learning_rate": cfg.pretrain_learning_rate, "warmup_steps": cfg.pretrain_warmup_steps,
        "seed": cfg.seed, **run.flags(cfg)}
    steps = flags["num_train_steps"]
    return {k: v for k, v in {
        **flags, "checkpoint_every_steps": max(1, steps // 4),
        "log_every_steps": max(1, steps // 10),
        "saved_model": False,  # fine-tuning reads the Keras model
        # float32 for every system: not given, BERT's rows would train in
        # bfloat16 on some CPUs and GPT's in float32.
        "mixed_precision": False}.items() if v is not None}


@contextlib.contextmanager
def _workers(cfg):
    """`--workers` worker processes for the pretraining and fine-tuning runs
    (spawned: each starts TensorFlow once and runs its share in-process), or
    None with `--workers=1` (the runs go one after the other here)."""
    if cfg.workers < 2:
        yield None
        return
    import multiprocessing

    threads = max(1, len(os.sched_getaffinity(0)) // cfg.workers)
    with concurrent.futures.ProcessPoolExecutor(
            cfg.workers, mp_context=multiprocessing.get_context("spawn"),
            initializer=_start_worker, initargs=(threads,)) as pool:
        yield pool


def _start_worker(threads):
    """A worker's share of the cores for TensorFlow's and the BLAS pools
    (unless the environment sets them), before anything imports them: the
    workers run side by side, and two runs of a tiny model on 2 cores were
    measured faster with one op thread each than with two (the suite's
    main-job measurement, `tests/conftest.py`)."""
    for name in ("TF_NUM_INTRAOP_THREADS", "TF_NUM_INTEROP_THREADS", "OMP_NUM_THREADS",
                 "OPENBLAS_NUM_THREADS"):
        os.environ.setdefault(name, str(threads))
    keras_extras.leave_out_of_keras()
