"""The Table 5 comparison's runs (`training.ablations`): each system's
pretraining and each fine-tuning run (the learning rate chosen on
validation by a seed of its own, then the reported seeds, early-stopped on
validation and scored once on dev), submitted to `--workers` worker
processes as soon as what it needs is done, longest first. A run whose
`summary.json` exists is not run again; a failed one leaves its error in
its cell. Each fine-tuning run is `training.ablation.cells`. The runs live
here, not in `training.ablations`: the spawned workers import what they run
by its module's name, and under `python -m` that module is `__main__`.
The workers import this module before their initializer sets their
threads (`_start_worker`), so nothing it imports loads TensorFlow or NumPy.
"""

import concurrent.futures
import contextlib
import dataclasses
import json
import multiprocessing
import os
import traceback

from tf_records.command_line import keras_extras
from training import pretrain
from training.ablation.cells import _free_models
from training.ablation.cells import _load_cell
from training.ablation.cells import _run_cell
from training.ablation.settings import PRETRAINED
from training.ablation.settings import PRETRAININGS
from training.ablation.settings import AblationsConfig
from training.ablation.settings import beyond_grid
from training.ablation.settings import learning_rates
from training.ablation.systems import SYSTEMS
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
    schedule = _Schedule(cfg, corpus, systems, pool or _Inline(), load_only)
    schedule.start()
    schedule.wait()
    return {name: schedule.pretraining[name] for name in schedule.needed}, schedule.cells


def _add_finished_systems(cfg, corpus, systems, pretraining, cells):
    """Adds to `pretraining` and `cells` every other system whose runs are
    all in the folder (from an earlier `--systems`), so the tables show
    everything that ran there."""
    others = tuple(s for s in SYSTEMS if s not in systems)
    if not others:
        return
    more_pretraining, more_cells = _schedule(cfg, corpus, others, None, load_only=True)
    incomplete = {name for (name, _), cell in more_cells.items() if cell.get("errors")}
    cells.update({key: cell for key, cell in more_cells.items() if key[0] not in incomplete})
    pretraining.update({name: summary for name, summary in more_pretraining.items()
                        if name not in pretraining and "error" not in summary})


AFTER_BERT = ("ltr", "no_nsp", "xlnet", "elmo")  # submitted in this order once BERT is done


class _Schedule:
    """The state of one `_schedule`: what is needed, running and done. Each
    finished run's result goes to `pretrained`, `selected` or `seeded`,
    which submit what it lets start."""

    def __init__(self, cfg, corpus, systems, pool, load_only):
        self.cfg, self.corpus, self.systems, self.pool = cfg, corpus, systems, pool
        self.load_only = load_only
        self.tell = (lambda message: None) if load_only else say
        self.config = dataclasses.asdict(cfg)
        self.rates = learning_rates(cfg)
        # No pretraining (no checkpoint) needs BERT's vocabulary, so BERT's pretraining.
        self.needed = [name for name in PRETRAINED if any(
            s.checkpoint == name or (name == "bert" and not s.checkpoint) for s in systems)]
        self.pretraining, self.cells, self.running, self.started = {}, {}, {}, set()
        self.tried = {}  # (system, task): the rates whose selection run was submitted
        for system in systems:
            for task in TASKS:
                self.cells[system.name, task.name] = (
                    {"na": system.no_span} if system.no_span and task.name == "span_qa"
                    else {"selection": {}, "seeds": [], "errors": []})
        # No pretraining reads BERT's vocabulary, written (atomically) in the
        # first seconds of BERT's pretraining: its runs start once it is there.
        self.waiting = [system for system in systems if not system.checkpoint]
        self.bert_vocab = os.path.join(_pretrain_folder(cfg, "bert"), "data", "vocab.txt")

    def start(self):
        """Longest first: GPT (a loss at every position) and BERT, then what
        BERT's records let start (LTR, as long as GPT, first)."""
        self.start_pretrainings(("gpt", "bert"))
        if "bert" not in self.needed:
            self.start_pretrainings(AFTER_BERT)

    def wait(self):
        """Until every submitted run is done, starting what each lets start."""
        while True:
            if self.waiting and os.path.exists(self.bert_vocab):
                self.start_waiting()
            if self.waiting and "bert" in self.pretraining:
                # Finished (or failed) without it: their runs fail naming the file.
                self.start_waiting()
            if not self.running:
                break
            done, _ = concurrent.futures.wait(self.running, timeout=5 if self.waiting else None,
                                              return_when=concurrent.futures.FIRST_COMPLETED)
            for future in done:
                kind, key = self.running.pop(future)
                {"pretrain": self.pretrained, "select": self.selected, "seed": self.seeded}[kind](
                    key, future.result())

    def submit(self, kind, key, fn, *args):
        if self.load_only:
            fn = _load_cell
        self.running[self.pool.submit(fn, *args)] = (kind, key)

    def start_pretrainings(self, names):
        for name in names:
            if name in self.needed:
                self.start_pretraining(name)

    def start_pretraining(self, name):
        if name in self.started:
            return
        self.started.add(name)
        summary = _pretraining_summary(self.cfg, name)
        if summary is not None:  # done before
            return self.pretrained(name, summary)
        if self.load_only:
            return self.pretrained(name, {"error": "not run"})
        if name in ("no_nsp", "ltr") and not os.path.exists(os.path.join(
                _pretrain_folder(self.cfg, "bert"), "data", "train_records", "manifest.json")):
            return self.pretrained(name, {"error": "BERT's pretraining data was not written "
                                                   "(see pretrain/bert/log.txt)."})
        say(f"Pretraining {name} (log "
            f"{os.path.join(_pretrain_folder(self.cfg, name), 'log.txt')}) ...")
        self.submit("pretrain", name, _run_pretraining, self.config, name, self.corpus)

    def pretrained(self, name, summary):
        self.pretraining[name] = summary
        if "error" in summary:
            self.tell(f"  pretraining {name} FAILED: {summary['error']}")
        elif "wall_seconds" in summary:
            self.tell(f"  pretraining {name} ({summary['wall_seconds']:.0f} s): "
                      f"{pretraining_scores(summary)}")
        if name == "bert":  # the LTR and No NSP read its records; then the rest
            self.start_pretrainings(AFTER_BERT)
        for system in self.systems:
            if system.checkpoint == name:
                self.start_system(system)

    def start_system(self, system):
        failed = self.pretraining.get(system.checkpoint, {}).get("error")
        for task in TASKS:
            cell = self.cells[system.name, task.name]
            if "na" in cell:
                continue
            if failed:
                cell["errors"].append(f"pretraining {system.checkpoint} failed: {failed}")
                continue
            if len(self.rates) == 1:  # nothing to choose
                cell["learning_rate"] = self.rates[0]
                self.submit_seeds(system.name, task.name, self.rates[0])
                continue
            self.tried[system.name, task.name] = list(self.rates)
            for rate in self.rates:
                self.submit_selection(system.name, task.name, rate)

    def start_waiting(self):
        for system in self.waiting:
            self.start_system(system)
        self.waiting.clear()

    def submit_selection(self, system, task, rate):
        self.submit("select", (system, task, rate), _run_cell, self.config, system, task,
                    "select", rate, self.cfg.seeds)  # the seed after the reported ones

    def submit_seeds(self, system, task, rate):
        for k in range(self.cfg.seeds):
            self.submit("seed", (system, task), _run_cell, self.config, system, task, "dev",
                        rate, k)

    def selected(self, key, result):
        system, task, rate = key
        cell = self.cells[system, task]
        if "error" in result:
            cell["errors"].append(result["error"])
        else:
            cell["selection"][f"{rate:g}"] = result["score"]
        rates_tried = self.tried[system, task]
        if len(cell["selection"]) + len(cell["errors"]) < len(rates_tried) or not cell["selection"]:
            return
        # The best validation score; a tie goes to the smaller rate.
        best = max(sorted(cell["selection"], key=float), key=lambda r: cell["selection"][r])
        more = beyond_grid(self.rates, rates_tried, float(best), self.cfg.extend_grid)
        if more is not None and not cell["errors"]:
            # The best is at an end of what was tried: try the next rate out.
            rates_tried.append(more)
            self.tell(f"  {system}/{task}: best rate so far {best}, at the end of those tried; "
                      f"trying {more:g}")
            self.submit_selection(system, task, more)
            return
        cell["learning_rate"] = float(best)
        self.tell(f"  {system}/{task}: learning rate {best} (validation "
                  + ", ".join(f"{r}: {s:.1f}" for r, s in cell["selection"].items()) + ")")
        self.submit_seeds(system, task, float(best))

    def seeded(self, key, result):
        cell = self.cells[key]
        if "error" in result:
            cell["errors"].append(result["error"])
        else:
            cell["seeds"].append(result)


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
