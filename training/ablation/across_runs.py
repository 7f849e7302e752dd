"""Tables 5 and 1 across pretraining runs: runs of the same comparison that
differ only in `--seed`, read from the JSON each run wrote (committed, so
every run can come from another machine or session).

    python -m training.ablation.across_runs \\
        --runs=docs/results/span_qa_rows,docs/results/span_qa_rows/seed1 \\
        --output_dir=docs/results/span_qa_rows/across_runs

Pre-registration
----------------
Fixed on 2026-11-29 and committed before the third run (`--seed=7`) started.
The default run (seed 12345) and `--seed=1` had been read: with one
pretraining run per system, the intervals of `training.ablation.stats`
cover the fine-tuning seeds only, and the second run moved cells by more
than those intervals (BERT's span QA 18.1 [17.2, 19.0] -> 28.2 [22.5,
33.9]) and lost two of the first run's five "reproduced" verdicts. So:

- The unit is a pretraining run. Within run r, a cell is the mean over its
  fine-tuning seeds and a direction is its mean paired difference d_r, as
  each run's own table gives them.
- Across K runs a cell is the mean of the runs' means with the 95% Student-t
  interval over the K run means (K - 1 degrees of freedom); a direction is
  the mean of its d_r with the 95% t interval over them, and its verdict
  follows the same rule as within a run (`stats.verdict`: "reproduced" when
  the interval is above 0, "contradicted" when below, else
  "inconclusive"). Each d_r carries its own fine-tuning noise, so this
  interval covers the pretraining seed and the fine-tuning seeds together.
- With K = 2 the t quantile is 12.7, with K = 3 it is 4.3: few runs can only
  show large effects, and the tables say K. Beside each direction: how many
  runs' own verdicts were each ("2 of 3 reproduced").
- The runs must share every setting but `seed` (the code may differ: each
  run's commit is listed); anything else is refused, naming the setting.
- The next run is `--seed=7` (fine-tuning seeds 8 to 12, none shared with
  seed 12345's or seed 1's), Table 5's command first.
"""

import json
import os
import shutil
import sys
import tempfile

from absl import app
from absl import flags

from keras_bert_impl.file_modes import as_if_created
from training.ablation.stats import cell_interval
from training.ablation.stats import verdict
from training.ablation.systems import SYSTEMS
from training.ablation.systems import TASKS
from training.pretraining.common import write_json

TABLES = ("table5", "table1")


def read_runs(folders, name):
    """`[(folder, table JSON)]` of every folder that has `name`.json; refuses
    runs whose settings differ in more than `seed` or share a seed."""
    runs = []
    for folder in folders:
        path = os.path.join(folder, f"{name}.json")
        if os.path.exists(path):
            with open(path, encoding="utf-8") as f:
                runs.append((folder, json.load(f)))
    if not runs:
        return runs
    first_folder, first = runs[0]
    seeds = {}
    for folder, table in runs:
        settings = table["settings"]
        for key in sorted(set(settings) | set(first["settings"])):
            if key != "seed" and settings.get(key) != first["settings"].get(key):
                raise ValueError(
                    f"{os.path.join(folder, name + '.json')}: setting {key}="
                    f"{settings.get(key)!r}, but {os.path.join(first_folder, name + '.json')} "
                    f"has {first['settings'].get(key)!r}; runs to combine differ only in seed.")
        if settings["seed"] in seeds:
            raise ValueError(f"{folder} and {seeds[settings['seed']]} are both seed "
                             f"{settings['seed']}: the same pretraining run twice.")
        seeds[settings["seed"]] = folder
    return runs


def _found(table, better, worse, task):
    """`table`'s finding for "better > worse on task", or None."""
    for d in table["directions"]:
        if (d["better"], d["worse"]) == (better, worse) and task in d["here"]:
            return d["here"][task]
    return None


def combine(runs):
    """One table across `runs` (`[(folder, table JSON)]` of the same table):
    per cell and per direction the run means and the interval over them."""
    systems = {}
    for system in SYSTEMS:
        rows = [table["systems"].get(system.name) for _, table in runs]
        if not any(rows):
            continue
        tasks = {}
        for task in TASKS:
            entries = [row["tasks"][task.name] if row else None for row in rows]
            if any(e is not None and "na" in e for e in entries):
                tasks[task.name] = {"na": next(e["na"] for e in entries if e and "na" in e)}
                continue
            means = [e["interval"]["mean"] if e and e.get("interval") else None
                     for e in entries]
            tasks[task.name] = {"runs": means,
                                "interval": cell_interval([m for m in means if m is not None])}
        systems[system.name] = {"label": system.label, "tasks": tasks}
    directions = []
    for d in runs[0][1]["directions"]:
        here = {}
        for name in d["here"]:
            found = [_found(table, d["better"], d["worse"], name) for _, table in runs]
            diffs = [f["difference"]["mean"] if f and f["difference"] else None for f in found]
            difference = cell_interval([x for x in diffs if x is not None])
            here[name] = {"runs": diffs, "run_verdicts": [f["verdict"] if f else "not run"
                                                          for f in found],
                          "difference": difference, "verdict": verdict(difference)}
        directions.append({k: d[k] for k in ("better", "worse", "claim", "robust")}
                          | {"here": here})
    return {"runs": [{"folder": folder, "seed": table["settings"]["seed"],
                      "commit": table["commit"]} for folder, table in runs],
            "settings": {k: v for k, v in runs[0][1]["settings"].items() if k != "seed"},
            "scale": "per cell the mean over pretraining runs of each run's mean over its "
                     "fine-tuning seeds, with the 95% t interval over the runs; per "
                     "direction the same over each run's mean paired difference",
            "paper": runs[0][1]["paper"], "systems": systems, "directions": directions}


def _interval(stats, sign="+"):
    """"mean [low, high]" to one decimal, signed (a difference) or not ("": a cell)."""
    if not stats:
        return "-"
    form = f"{sign}.1f"
    if stats["low"] is None:
        return format(stats["mean"], form)
    return (f"{format(stats['mean'], form)} [{format(stats['low'], form)}, "
            f"{format(stats['high'], form)}]")


def _tally(verdicts):
    counts = {v: verdicts.count(v) for v in dict.fromkeys(verdicts)}
    return ", ".join(f"{n} of {len(verdicts)} {v}" for v, n in counts.items())


def format_markdown(name, combined):
    """The combined table as Markdown: cells, then directions."""
    labels = {s.name: s.label for s in SYSTEMS}
    task_labels = {t.name: t.label for t in TASKS}
    k = len(combined["runs"])
    seeds = ", ".join(str(r["seed"]) for r in combined["runs"])
    lines = [f"### {name}: {k} pretraining runs (seeds {seeds})", "",
             "| System | " + " | ".join(t.label for t in TASKS) + " |",
             "|---|" + "---|" * len(TASKS)]
    for row in combined["systems"].values():
        cells = []
        for task in TASKS:
            entry = row["tasks"][task.name]
            cells.append("n/a" if "na" in entry else _interval(entry["interval"], sign=""))
        lines.append(f"| {row['label']} | " + " | ".join(cells) + " |")
    lines += ["", f"| Direction | task | each run | across the {k} runs | verdict | "
              "runs' own verdicts |", "|---|---|---|---|---|---|"]
    for d in combined["directions"]:
        mark = " (robust)" if d["robust"] else ""
        for task, found in d["here"].items():
            each = ", ".join("-" if x is None else f"{x:+.1f}" for x in found["runs"])
            lines.append(f"| {labels[d['better']]} > {labels[d['worse']]}{mark} | "
                         f"{task_labels[task]} | {each} | {_interval(found['difference'])} | "
                         f"{found['verdict']} | {_tally(found['run_verdicts'])} |")
    return "\n".join(lines) + "\n"


def format_designs_side_by_side(designs):
    """Each direction across runs under several designs, as Markdown:
    `designs` is `[(label, combine(...))]` of the same table, one column
    each ("mean [low, high] verdict")."""
    labels = {s.name: s.label for s in SYSTEMS}
    task_labels = {t.name: t.label for t in TASKS}
    lines = ["| Direction | task | " + " | ".join(label for label, _ in designs) + " |",
             "|---|---|" + "---|" * len(designs)]
    for d in designs[0][1]["directions"]:
        mark = " (robust)" if d["robust"] else ""
        for task in d["here"]:
            shown = []
            for _, combined in designs:
                found = next((e["here"][task] for e in combined["directions"]
                              if (e["better"], e["worse"]) == (d["better"], d["worse"])
                              and task in e["here"]), None)
                shown.append(f"{_interval(found['difference'])} {found['verdict']}"
                             if found else "-")
            lines.append(f"| {labels[d['better']]} > {labels[d['worse']]}{mark} | "
                         f"{task_labels[task]} | " + " | ".join(shown) + " |")
    return "\n".join(lines) + "\n"


OUTPUTS = ("table5.json", "table1.json", "tables.md")


def check_replaceable(output_dir):
    """ValueError unless `output_dir` is absent or holds this command's
    outputs only (a run's own `table5.json` has no "runs"): the folder is
    replaced whole."""
    if not os.path.lexists(output_dir):
        return
    if not os.path.isdir(output_dir):
        raise ValueError(f"--output_dir={output_dir} is not a folder.")
    for entry in sorted(os.listdir(output_dir)):
        ours = entry in OUTPUTS
        if ours and entry.endswith(".json"):
            try:
                with open(os.path.join(output_dir, entry), encoding="utf-8") as f:
                    ours = "runs" in json.load(f)
            except (OSError, ValueError):
                ours = False
        if not ours:
            raise ValueError(f"--output_dir={output_dir} holds {entry}, which across_runs did "
                             "not write; refusing to replace the folder.")


def write_combined(output_dir, combined):
    """Writes `combined` (`{table name: combine(...)}`) as `<name>.json` and
    `tables.md` into a fresh folder beside `output_dir`, then swaps it in
    (`check_replaceable` first); returns the Markdown."""
    check_replaceable(output_dir)
    text = "\n".join(format_markdown(name, table) for name, table in combined.items())
    output_dir = os.path.abspath(output_dir)
    parent, base = os.path.split(output_dir)
    os.makedirs(parent, exist_ok=True)
    tmp = tempfile.mkdtemp(prefix=f".{base}.tmp-", dir=parent)
    for name, table in combined.items():
        write_json(os.path.join(tmp, f"{name}.json"), table)
    with open(os.path.join(tmp, "tables.md"), "w", encoding="utf-8") as f:
        f.write(text)
    swap_in(tmp, output_dir)
    return text


def swap_in(tmp, output_dir):
    """Puts the finished folder `tmp` (made beside `output_dir`) in place of
    `output_dir` by renames, so a reader sees the old folder or the new one,
    whole, never a mix."""
    as_if_created(tmp)
    parent, base = os.path.split(os.path.abspath(output_dir))
    if os.path.exists(output_dir):
        old = tempfile.mkdtemp(prefix=f".{base}.old-", dir=parent)
        os.replace(output_dir, os.path.join(old, base))
        os.replace(tmp, output_dir)
        shutil.rmtree(old)
    else:
        os.replace(tmp, output_dir)


FLAGS = flags.FLAGS


def define_flags():
    """This command's flags, defined when it runs (not at import: the other
    commands define their own `--output_dir`)."""
    flags.DEFINE_list("runs", None, "Folders of runs of the same comparison with other --seed "
                      "values, each with table5.json and/or table1.json.")
    flags.DEFINE_string("output_dir", None, "Where table5.json, table1.json (those at least "
                        "two runs have) and tables.md go.")


def main(argv):
    del argv
    if not FLAGS.runs or not FLAGS.output_dir:
        raise app.UsageError("--runs and --output_dir are required.")
    for folder in FLAGS.runs:
        if not os.path.isdir(folder):
            raise app.UsageError(f"--runs: {folder} is not a folder.")
    try:
        check_replaceable(FLAGS.output_dir)
    except ValueError as e:
        raise app.UsageError(str(e)) from None
    combined = {}
    for name in TABLES:
        try:
            runs = read_runs(FLAGS.runs, name)
        except ValueError as e:
            raise app.UsageError(str(e)) from None
        if len(runs) < 2:
            print(f"{name}: {len(runs)} run(s) have {name}.json; two or more are needed.")
            continue
        combined[name] = combine(runs)
    if not combined:
        sys.exit(1)
    text = write_combined(FLAGS.output_dir, combined)
    print(text)
    print(f"-> {FLAGS.output_dir}: " + ", ".join(f"{n}.json" for n in combined) + ", tables.md")


if __name__ == "__main__":
    define_flags()
    app.run(main)
