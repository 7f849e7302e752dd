"""Where each direction of Table 5 stands with the pretraining budget:
`python -m training.ablations --scaling`.

BERT, No NSP and LTR & No NSP pretrained for 1/4 and 1/2 of
`--pretrain_steps` (warmup scaled alike), fine-tuned and scored exactly as
the default run; the full budget is the default run itself. No
pretraining does not depend on the budget: its cells come from the default
run. Each budget is a stage, run by one command (the stages take 30-100
minutes each on 2 cores) that writes `scaling/stage_<steps>.json` when it
is done; the next `--scaling` runs the next stage. A stage's JSON copied
into another machine's `<output_dir>/scaling/` (for example from
`docs/results/span_qa_rows/`) counts as done there. After every stage, `scaling.json`
and `scaling.png` are redrawn from all stages present: each direction's
paired difference (mean and 95% interval) against the pretraining steps.
"""

import dataclasses
import json
import os
import shutil

from training.ablation.charts import panels
from training.ablation.charts import save_figure
from training.ablation.stats import paired_difference
from training.ablation.stats import verdict
from training.ablation.systems import TASKS
from training.pretraining.common import write_json

SCALING_SYSTEMS = ("bert", "no_nsp", "ltr")
FRACTIONS = (4, 2)  # 1/4, then 1/2 of --pretrain_steps; then the default run
GAPS = (("bert", "random", "BERT - No pretraining"),
        ("no_nsp", "ltr", "No NSP - LTR & No NSP"),
        ("bert", "no_nsp", "BERT - No NSP"))


def say(message):
    print(message, flush=True)


def stage_steps(cfg):
    """The pretraining steps of each stage, in the order they run."""
    return [max(1, cfg.pretrain_steps // f) for f in FRACTIONS] + [cfg.pretrain_steps]


def _stage_path(cfg, steps):
    return os.path.join(cfg.output_dir, "scaling", f"stage_{steps}.json")


def run_scaling(cfg, run):
    """Runs the next stage not done with `run`
    (`training.ablation.comparison.run`: passed in, as this module sits
    below it); redraws the plot. Returns the exit status."""

    folder = os.path.join(cfg.output_dir, "scaling")
    os.makedirs(folder, exist_ok=True)
    status = 0
    for steps in stage_steps(cfg):
        path = _stage_path(cfg, steps)
        if os.path.exists(path):
            continue
        if steps == cfg.pretrain_steps:  # the default run, in the run folder itself
            sub = dataclasses.replace(cfg, scaling=False)
            table = os.path.join(cfg.output_dir, "table5.json")
        else:
            sub = dataclasses.replace(
                cfg, scaling=False, systems=",".join(SCALING_SYSTEMS),
                output_dir=os.path.join(folder, f"steps{steps}"), pretrain_steps=steps,
                pretrain_warmup_steps=cfg.pretrain_warmup_steps * steps // cfg.pretrain_steps)
            table = os.path.join(sub.output_dir, "table5.json")
        say(f"Scaling stage: {steps} pretraining steps -> {sub.output_dir}")
        status = run(sub)
        if status == 0:
            shutil.copyfile(table, path + ".tmp")
            os.replace(path + ".tmp", path)
        break
    else:
        say("Every scaling stage is done.")
    scaling = build_scaling(cfg)
    write_json(os.path.join(cfg.output_dir, "scaling.json"), scaling)
    plot_scaling(scaling, os.path.join(cfg.output_dir, "scaling.png"))
    say(format_scaling(scaling))
    return status


def _seeds(table, system, task):
    entry = table["systems"].get(system, {}).get("tasks", {}).get(task, {})
    return {s["seed"]: s["score"] for s in entry.get("seeds", [])}


def build_scaling(cfg):
    """`{"stages": [steps...], "gaps": [{better, worse, label, task, points:
    [{steps, difference, verdict}]}]}` from the stages present."""
    tables = {}
    for steps in stage_steps(cfg):
        path = _stage_path(cfg, steps)
        if os.path.exists(path):
            with open(path, encoding="utf-8") as f:
                tables[steps] = json.load(f)
    full = tables.get(cfg.pretrain_steps)
    gaps = []
    for better, worse, label in GAPS:
        for task in TASKS:
            points = []
            for steps, table in sorted(tables.items()):
                # No pretraining does not depend on the budget: the default run's.
                source = full if worse == "random" else table
                if source is None:
                    continue
                diff = paired_difference(_seeds(table, better, task.name),
                                         _seeds(source, worse, task.name))
                points.append({"steps": steps, "difference": diff, "verdict": verdict(diff)})
            gaps.append({"better": better, "worse": worse, "label": label, "task": task.name,
                         "points": points})
    return {"stages": sorted(tables), "planned": stage_steps(cfg), "gaps": gaps}


def format_scaling(scaling):
    lines = ["", f"Scaling: stages done {scaling['stages']} of {scaling['planned']} pretraining "
                 "steps; paired difference [95% interval] per budget:"]
    for gap in scaling["gaps"]:
        shown = "; ".join(
            f"{p['steps']}: {p['difference']['mean']:+.1f}"
            + (f" [{p['difference']['low']:+.1f}, {p['difference']['high']:+.1f}]"
               if p["difference"] and p["difference"]["low"] is not None else "")
            for p in gap["points"] if p["difference"]) or "no stage yet"
        lines.append(f"  {gap['label']:24s} {gap['task']:16s} {shown}")
    return "\n".join(lines)


def plot_scaling(scaling, path):
    """One panel per direction: its difference per task against the steps."""
    figure, axes = panels(len(GAPS), 4.2)
    for ax, (better, worse, label) in zip(axes, GAPS):
        for i, task in enumerate(TASKS):
            gap = next(g for g in scaling["gaps"] if g["better"] == better
                       and g["worse"] == worse and g["task"] == task.name)
            points = [p for p in gap["points"] if p["difference"]]
            if not points:
                continue
            x = [p["steps"] * (1 + 0.03 * (i - 1)) for p in points]  # side by side
            y = [p["difference"]["mean"] for p in points]
            low = [p["difference"]["mean"] - (p["difference"]["low"] or p["difference"]["mean"])
                   for p in points]
            high = [(p["difference"]["high"] or p["difference"]["mean"])
                    - p["difference"]["mean"] for p in points]
            ax.errorbar(x, y, yerr=[low, high], marker="o", capsize=3, label=task.label)
        ax.axhline(0, color="k", linewidth=0.8)
        ax.set_xscale("log")
        ax.set_xlabel("pretraining steps")
        ax.set_title(f"{label} (mean, 95% interval)", fontsize=10)
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize=8)
    save_figure(figure, path)
