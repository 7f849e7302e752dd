"""The Table 5 comparison run whole (`python -m training.ablations`, which
imports this module once its console is up: TensorFlow loads with it):
the checks, the corpus, the tasks, the runs (`training.ablation.runs`)
and the tables, written into `--output_dir`.
"""

import dataclasses
import json
import os
import subprocess
import time

# First: Keras loads before our scikit-learn and matplotlib, so it leaves
# them out (tf_records/command_line/keras_extras.py).
from training.run.checkpointing import OutputLock

# isort: split
from training.ablation.charts import plot_curves
from training.ablation.charts import plot_table
from training.ablation.checks import _FREE_SETTINGS
from training.ablation.checks import _check_settings
from training.ablation.checks import check_flags
from training.ablation.runs import _add_finished_systems
from training.ablation.runs import _schedule
from training.ablation.runs import _workers
from training.ablation.scaling import run_scaling
from training.ablation.settings import QUICK_DOCUMENTS
from training.ablation.settings import QUICK_HELDOUT_DOCUMENTS
from training.ablation.settings import chosen_systems
from training.ablation.table import TABLE1_SYSTEMS
from training.ablation.table import TABLE5_SYSTEMS
from training.ablation.table import build_tables
from training.ablation.table import format_markdown
from training.ablation.table import format_tables
from training.ablation.tasks import HELDOUT_PERCENT
from training.ablation.tasks import write_ablation_tasks
from training.pretraining.common import write_json
from training.pretraining.default_corpus import write_default_corpus

TITLES = {"table5": "BERT Table 5 in miniature", "table1": "BERT Table 1 in miniature"}
# A table's own systems: it is written when this command ran one of them.
OWN_SYSTEMS = {"table5": set(TABLE5_SYSTEMS) - set(TABLE1_SYSTEMS),
               "table1": set(TABLE1_SYSTEMS) - set(TABLE5_SYSTEMS)}


def say(message):
    print(message, flush=True)


def run_command(cfg):
    """`python -m training.ablations` once its flags are read: the next
    scaling stage with `--scaling`, else the comparison; the exit status."""
    if cfg.scaling:
        return run_scaling(cfg, run)
    return run(cfg)


def run(cfg):
    """The whole comparison; returns the exit status (0: every cell ran)."""
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
        say("Tasks ...")
        tasks = write_ablation_tasks(os.path.join(cfg.output_dir, "tasks"), cfg.num_train,
                                     cfg.num_dev, seed=0, num_validation=cfg.num_validation,
                                     span_qa_num_train=cfg.span_qa_num_train)
        systems = chosen_systems(cfg)
        with _workers(cfg) as pool:
            pretraining, cells = _schedule(cfg, corpus, systems, pool)
        _add_finished_systems(cfg, corpus, systems, pretraining, cells)
        settings_now = {k: v for k, v in dataclasses.asdict(cfg).items()
                        if k not in _FREE_SETTINGS}
        tables = build_tables(settings_now, pretraining, tasks, cells, time.time() - started,
                              commit())
        written, shown = _write_tables(cfg, systems, dict(zip(("table5", "table1"), tables)))
        text = format_tables(shown["table5"], shown["table1"])
        _write_text(os.path.join(cfg.output_dir, "tables.txt"), text.lstrip("\n") + "\n")
        _write_text(os.path.join(cfg.output_dir, "tables.md"),
                    format_markdown(shown["table5"], shown["table1"]))
        say(text)
        say(f"-> {cfg.output_dir}: "
            + ", ".join(f"{name}.json, {name}.png" for name in written)
            + f", tables.txt ({time.time() - started:.0f} s)")
        return 1 if any(shown[name]["errors"] for name in written) else 0
    finally:
        lock.release()


def _write_tables(cfg, systems, tables):
    """Writes each of `tables` (`{"table5": ..., "table1": ...}`) whose own
    systems this command ran (its time and commit are this command's), with
    its chart and, where its seeds carry curves, span QA's curves
    (`<name>_span_qa_curves.png`); else the folder's is kept. Returns
    `(names written, {name: table shown or None})`."""
    ran = {s.name for s in systems}
    written, shown = [], {}
    for name, table in tables.items():
        path = os.path.join(cfg.output_dir, f"{name}.json")
        if OWN_SYSTEMS[name] & ran:
            written.append(name)
            write_json(path, table)
            plot_table(table, os.path.join(cfg.output_dir, f"{name}.png"), TITLES[name])
            plot_curves(table, os.path.join(cfg.output_dir, f"{name}_span_qa_curves.png"))
            shown[name] = table
        elif os.path.exists(path):
            with open(path, encoding="utf-8") as f:
                shown[name] = json.load(f)
            say(f"{name}.json: kept as an earlier command wrote it (--systems ran none of "
                f"{', '.join(sorted(OWN_SYSTEMS[name]))}).")
        else:
            shown[name] = None
            say(f"{name}: not run in {cfg.output_dir}; --systems={name} runs it.")
    return written, shown


def _write_text(path, text):
    """Writes `text` to `path` through a temporary file and a rename."""
    with open(path + ".tmp", "w", encoding="utf-8") as f:
        f.write(text)
    os.replace(path + ".tmp", path)


def commit():
    """The code's git commit (with "+changes" when the tree differs), or "unknown"."""
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    try:
        head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=root, capture_output=True,
                              text=True, check=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"],
                               cwd=root, capture_output=True, text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return head + ("+changes" if dirty.strip() else "")


# --- The corpus --------------------------------------------------------------


def _write_corpus(cfg):
    """`{"train": path, "heldout": path}` of the default corpus (quick: the first
    documents of each side)."""
    folder = os.path.join(cfg.output_dir, "corpus")
    paths = {side: os.path.join(folder, f"{side}.txt") for side in ("train", "heldout")}
    if all(os.path.exists(p) for p in paths.values()):
        return paths
    say("Default corpus ...")
    paths, counts = write_default_corpus(folder, heldout_percent=HELDOUT_PERCENT)
    if cfg.quick:
        for side, count in (("train", QUICK_DOCUMENTS), ("heldout", QUICK_HELDOUT_DOCUMENTS)):
            with open(paths[side], encoding="utf-8") as f:
                documents = f.read().split("\n\n")[:count]
            _write_text(paths[side], "\n\n".join(documents) + "\n")
            counts[side] = len(documents)
    say(f"  {counts['train']} training and {counts['heldout']} held-out documents -> {folder}")
    return paths
