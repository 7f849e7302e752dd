"""Table 5 and Table 1 in miniature, the tables themselves: the paper's
numbers and the directions it reports, and what is made of the
runs' scores (`build_tables`), as text (`format_tables`) and Markdown
(`format_markdown`), each cell with its secondary readings where its seeds
carry them (the final design: `_readings`; the blocks under each table come
from `training.ablation.readings`). The statistics are
`training.ablation.stats`; the charts `training.ablation.charts`.
"""

import dataclasses

from training.ablation.readings import readings_markdown
from training.ablation.readings import readings_text
from training.ablation.stats import cell_interval
from training.ablation.stats import median
from training.ablation.stats import paired_difference
from training.ablation.stats import verdict
from training.ablation.systems import PATIENCE
from training.ablation.systems import SYSTEMS
from training.ablation.systems import TASKS

# The BERT paper's Table 5 (dev; accuracy, SQuAD 1.1 F1), from
# COMPARISON_SYSTEMS.md section 3, in our columns' order.
PAPER_TABLE5 = {
    "bert": {"SST-2": 92.7, "QNLI": 88.4, "SQuAD": 88.5},
    "no_nsp": {"SST-2": 92.6, "QNLI": 84.9, "SQuAD": 87.9},
    "ltr": {"SST-2": 92.1, "QNLI": 84.3, "SQuAD": 77.8},
    "ltr_bilstm": {"SST-2": 91.6, "QNLI": 84.1, "SQuAD": 84.9},
}
# Table 1 (GLUE test) and Table 2 (SQuAD 1.1 dev F1); BERT-Base, OpenAI GPT,
# BiLSTM+ELMo+Attn (BiDAF+ELMo on SQuAD). Table 7 (CoNLL-2003 dev F1):
# fine-tuned BERT-Base 96.4, its concatenated last four layers as features 96.1.
PAPER_TABLE1 = {
    "bert": {"SST-2": 93.5, "QNLI": 90.5, "SQuAD": 88.5},
    "gpt": {"SST-2": 91.3, "QNLI": 87.4},
    "elmo": {"SST-2": 90.4, "QNLI": 79.8, "SQuAD": 85.6},
}
TABLE5_SYSTEMS = ("bert", "no_nsp", "ltr", "ltr_bilstm", "random")
TABLE1_SYSTEMS = ("bert", "bert_features", "gpt", "elmo", "xlnet", "random")

ALL = tuple(t.name for t in TASKS)
PAIR = ("answer_sentence",)


@dataclasses.dataclass(frozen=True)
class Direction:
    """The paper's claim that `better` scores above `worse` on `tasks`."""

    better: str
    worse: str
    tasks: tuple
    claim: str
    table: str  # "table5" or "table1"
    robust: bool  # the robust directions: must come out reproduced


DIRECTIONS = (
    Direction("no_nsp", "ltr", ("answer_sentence", "span_qa"), "Bidirectional beats "
              "left-to-right: No NSP > LTR & No NSP (SQuAD 87.9 -> 77.8, MRPC 86.5 -> 77.5)",
              "table5", True),
    Direction("no_nsp", "ltr", ("topic",), "... and on the single sentence only a little "
              "(SST-2 92.6 -> 92.1)", "table5", False),
    Direction("ltr_bilstm", "ltr", ("span_qa",), "+ BiLSTM recovers part of the span-QA gap "
              "(SQuAD 77.8 -> 84.9)", "table5", True),
    Direction("no_nsp", "ltr_bilstm", ("span_qa",), "... but only part: No NSP > + BiLSTM on "
              "span QA (87.9 vs 84.9)", "table5", False),
    Direction("ltr", "ltr_bilstm", ("answer_sentence",), "+ BiLSTM does not help the pair "
              "tasks (QNLI 84.3 -> 84.1, MRPC 77.5 -> 75.7)", "table5", False),
    Direction("bert", "no_nsp", ("answer_sentence",), "NSP helps the sentence-pair task "
              "(QNLI 88.4 -> 84.9; RoBERTa could not confirm this)", "table5", False),
    Direction("bert", "no_nsp", ("topic",), "... and barely moves the single sentence "
              "(SST-2 92.7 -> 92.6)", "table5", False),
    Direction("bert", "random", ALL, "Pretraining helps every task against the same model "
              "from scratch", "table5", True),
    Direction("bert", "gpt", ("topic", "answer_sentence"), "BERT > OpenAI GPT of the same size "
              "on the same data (Table 1: SST-2 93.5 vs 91.3, QNLI 90.5 vs 87.4)", "table1",
              False),
    Direction("bert", "elmo", ("topic", "answer_sentence"), "Fine-tuned BERT > ELMo's frozen "
              "features (Table 1: SST-2 93.5 vs 90.4, QNLI 90.5 vs 79.8)", "table1", False),
    Direction("bert", "bert_features", ALL, "Fine-tuning BERT >= its frozen features (Table 7: "
              "CoNLL-2003 96.4 vs 96.1 for the last four layers concatenated)", "table1",
              False),
)


def pretraining_scores(summary):
    keys = ("masked_lm_accuracy", "baseline_masked_lm_accuracy", "next_sentence_accuracy",
            "next_token_accuracy", "baseline_next_token_accuracy", "perplexity",
            "baseline_unigram_perplexity")
    shown = [f"{k} {summary[k]:.4f}" for k in keys if isinstance(summary.get(k), (int, float))]
    return ", ".join(shown) or "held-out scores: see summary.json"


def _readings(seeds):
    """The secondary readings of a cell's `seeds` (sorted by seed), or None
    where none carries "converged" (seeds from before the final design):
    `{"median", "converged": seeds whose early stopping ended them before
    their cap, "seeds": n, "best_on_validation": {"seed", "validation",
    "score"} of the seed best on validation (a tie: the lowest seed), or
    None}`."""
    if not any("converged" in s for s in seeds):
        return None
    scored = [s for s in seeds if s.get("validation") is not None]
    best = max(scored, key=lambda s: s["validation"]) if scored else None  # the first of a tie
    return {"median": median([s["score"] for s in seeds]),
            "converged": sum(s.get("converged") is True for s in seeds), "seeds": len(seeds),
            "best_on_validation": best and {k: best[k] for k in ("seed", "validation", "score")}}


def _system_rows(cells):
    """`({system: row}, errors)`: each system run (in `cells`) with its
    cells' seeds, intervals and readings (`_readings`, where its seeds carry
    them), and every cell's errors, labelled."""
    systems, errors = {}, []
    for system in SYSTEMS:
        if (system.name, TASKS[0].name) not in cells:  # not run (--systems)
            continue
        row = {"label": system.label, "tasks": {}}
        for task in TASKS:
            cell = cells[system.name, task.name]
            if "na" in cell:
                entry = {"na": cell["na"]}
            else:
                seeds = sorted(cell.get("seeds", []), key=lambda s: s["seed"])
                entry = {"learning_rate": cell.get("learning_rate"),
                         "selection": cell.get("selection", {}), "seeds": seeds,
                         "interval": cell_interval([s["score"] for s in seeds])}
                readings = _readings(seeds)
                if readings:
                    entry["readings"] = readings
            if cell.get("errors"):
                entry["errors"] = cell["errors"]
                errors += [f"{system.label} / {task.label}: {e}" for e in cell["errors"]]
            row["tasks"][task.name] = entry
        systems[system.name] = row
    return systems, errors


def _directions(systems):
    """`{"table5": [...], "table1": [...]}`: each direction's paired
    difference and verdict per task."""
    directions = {"table5": [], "table1": []}
    for d in DIRECTIONS:
        found = {}
        for name in d.tasks:
            a, b = (systems[s]["tasks"][name].get("seeds") or [] if s in systems else []
                    for s in (d.better, d.worse))
            diff = paired_difference({s["seed"]: s["score"] for s in a},
                                     {s["seed"]: s["score"] for s in b})
            found[name] = {"difference": diff, "verdict": verdict(diff)}
        directions[d.table].append({"better": d.better, "worse": d.worse, "claim": d.claim,
                                    "robust": d.robust, "here": found})
    return directions


def build_tables(settings, pretraining, tasks, cells, seconds, commit):
    """`table5.json`'s and `table1.json`'s content.

    `cells[system, task]`: `{"na": why}` or `{"selection": {lr: validation
    score}, "learning_rate": chosen, "seeds": [{"seed": k, "score": ...}],
    "errors": [...]}`.
    """
    systems, errors = _system_rows(cells)
    directions = _directions(systems)
    common = {
        "settings": settings, "commit": commit,
        "scale": "dev accuracy x 100 (topic, answer sentence); official SQuAD v1.1 F1 (span "
                 "QA); per cell the mean over fine-tuning seeds and its 95% t interval; per "
                 "direction the paired difference over seeds, its 95% t interval and the "
                 "verdict (reproduced: above 0; contradicted: below 0; else inconclusive)",
        "tasks": {t.name: {"label": t.label, "kind": t.kind, "stands_for": t.paper_column,
                           "epochs": t.epochs, "early_stopping_patience": PATIENCE,
                           "max_seq_length": t.max_seq_length,
                           **tasks["tasks"][t.name]} for t in TASKS},
        "baselines": {t.name: {
            "trivial": tasks["tasks"][t.name]["majority"] * (1 if t.name == "span_qa" else 100),
            "trivial_means": tasks["tasks"][t.name].get("majority_means",
                                                        "majority class of train"),
            **({"bag_of_words": 100 * tasks["tasks"][t.name]["bag_of_words"]}
               if "bag_of_words" in tasks["tasks"][t.name] else {})} for t in TASKS},
        "errors": errors, "wall_seconds": round(seconds, 1)}
    table5 = {**common, "pretraining": pretraining,
              "systems": {k: systems[k] for k in TABLE5_SYSTEMS if k in systems},
              "paper": PAPER_TABLE5, "directions": directions["table5"]}
    table1 = {**common, "pretraining": {k: v for k, v in pretraining.items() if k in (
                  "bert", "gpt", "elmo", "xlnet")},
              "systems": {k: systems[k] for k in TABLE1_SYSTEMS if k in systems},
              "paper": PAPER_TABLE1, "directions": directions["table1"]}
    return table5, table1


def _shown(entry):
    if "na" in entry:
        return "n/a"
    stats = entry.get("interval")
    if not stats:
        return "failed" if entry.get("errors") else "-"
    if stats["low"] is None:
        return f"{stats['mean']:5.1f}"
    return f"{stats['mean']:5.1f} [{stats['low']:.1f}, {stats['high']:.1f}]"


def _difference(found):
    diff = found["difference"]
    if diff is None:
        return "n/a"
    if diff["low"] is None:
        return f"{diff['mean']:+.1f}"
    return f"{diff['mean']:+.1f} [{diff['low']:+.1f}, {diff['high']:+.1f}]"


def _span_rows(settings):
    """The captions' "(span QA: 9,000) " where span QA trains on more rows than
    the others, else an empty string."""
    rows = settings.get("span_qa_num_train", settings["num_train"])
    return f"(span QA: {rows:,}) " if rows != settings["num_train"] else ""


def format_table(table, title):
    """One table beside the paper's, its baselines and its verdicts, as text."""
    width = 24
    labels = {s.name: s.label for s in SYSTEMS}
    settings = table["settings"]
    lines = [
        "", f"{title}: tiny models (L=2, H=128), {settings['pretrain_steps']} pretraining steps "
        f"of {settings['pretrain_batch_size']} x {settings['pretrain_seq_length']} tokens each; "
        f"{settings['seeds']} fine-tuning seeds per cell at the learning rate chosen on "
        f"{settings['num_validation']} validation rows; {settings['num_train']} training "
        f"{_span_rows(settings)}/ {settings['num_dev']} dev rows per task.",
        f"Scale: {table['scale']}.", "",
        f"{'':20s}" + "".join(f"{TASK.label + ' (~' + TASK.paper_column + ')':>{width}s}"
                              for TASK in TASKS) + "   paper: " + " / ".join(
            t.paper_column for t in TASKS)]
    for name, row in table["systems"].items():
        paper = table["paper"].get(name, {})
        lines.append(f"{labels[name]:20s}" + "".join(
            f"{_shown(row['tasks'][t.name]):>{width}s}" for t in TASKS) + "   " + " / ".join(
            f"{paper[t.paper_column]:.1f}" if t.paper_column in paper else "-" for t in TASKS))
    for key, label in (("trivial", "Trivial baseline"), ("bag_of_words", "Bag of words")):
        lines.append(f"{label:20s}" + "".join(
            f"{table['baselines'][t.name][key]:>{width}.1f}" if key in table["baselines"][t.name]
            else f"{'-':>{width}s}" for t in TASKS))
    lines += readings_text(table)
    lines += ["", "Directions (paired difference over fine-tuning seeds, 95% interval):"]
    task_labels = {t.name: t.label for t in TASKS}
    for d in table["directions"]:
        lines.append(f"- {d['claim']}{' [robust]' if d['robust'] else ''}")
        for name, found in d["here"].items():
            lines.append(f"    {labels[d['better']]} - {labels[d['worse']]}, "
                         f"{task_labels[name]}: {_difference(found)}  {found['verdict']}")
    if table["errors"]:
        lines += ["", "FAILED:"] + [f"- {e}" for e in table["errors"]]
    return "\n".join(lines)


def format_tables(table5, table1):
    """Both tables as printed (either may be None: not run)."""
    lines = []
    for title, table in (("Table 5 in miniature", table5), ("Table 1 in miniature", table1)):
        if not table:
            continue
        lines.append(format_table(table, title))
        if table is table5 or not table5:  # the pretraining once, after the first table
            lines += ["", "Pretraining, held out (baseline: the most frequent token; the "
                      "unigram model):"]
            for name, summary in table.get("pretraining", {}).items():
                shown = (f"FAILED: {summary['error']}" if "error" in summary
                         else pretraining_scores(summary))
                lines.append(f"  {name:8s}{shown}")
    return "\n".join(lines)


def _md_cell(entry):
    if "na" in entry:
        return "n/a"
    stats = entry.get("interval")
    if not stats:
        return "failed"
    if stats["low"] is None:
        return f"{stats['mean']:.1f}"
    return f"{stats['mean']:.1f} [{stats['low']:.1f}, {stats['high']:.1f}]"


def format_markdown(table5, table1):
    """Both tables (either may be None: not run), their baselines and
    verdicts as Markdown (docs/results/)."""
    first = table5 or table1
    settings = first["settings"]
    lines = [f"Tiny models (L=2, H=128), {settings['pretrain_steps']:,} pretraining steps of "
             f"{settings['pretrain_batch_size']} x {settings['pretrain_seq_length']} tokens "
             f"(ELMo: 1/8 of those tokens), one pretraining seed; {settings['seeds']} "
             f"fine-tuning seeds per cell at the learning rate chosen on validation; "
             f"{settings['num_train']:,} training {_span_rows(settings)}/ {settings['num_dev']} dev "
             f"rows per task. "
             f"Mean over seeds [95% interval]; accuracy x 100, span QA official SQuAD F1. "
             f"Code {first['commit'][:7]}{'+changes' if 'changes' in first['commit'] else ''}, "
             f"{first['wall_seconds'] / 60:.0f} minutes on 2 CPU cores."]
    header = "| | " + " | ".join(f"{t.label} (~{t.paper_column})" for t in TASKS) + \
        " | paper " + " / ".join(t.paper_column for t in TASKS) + " |"
    for title, table in (("Table 5 in miniature", table5), ("Table 1 in miniature", table1)):
        if not table:
            continue
        lines += ["", f"### {title}", "", header, "|---" * (len(TASKS) + 2) + "|"]
        for name, row in table["systems"].items():
            paper = table["paper"].get(name, {})
            lines.append(f"| {row['label']} | " + " | ".join(
                _md_cell(row["tasks"][t.name]) for t in TASKS) + " | " + " / ".join(
                f"{paper[t.paper_column]:.1f}" if t.paper_column in paper else "-"
                for t in TASKS) + " |")
        for key, label in (("trivial", "Trivial baseline"), ("bag_of_words", "Bag of words")):
            lines.append(f"| {label} | " + " | ".join(
                f"{table['baselines'][t.name][key]:.1f}" if key in table["baselines"][t.name]
                else "-" for t in TASKS) + " | |")
        lines += readings_markdown(table)
        lines += ["", "| The paper's direction | task | difference [95% interval] | verdict |",
                  "|---|---|---|---|"]
        task_labels = {t.name: t.label for t in TASKS}
        for d in table["directions"]:
            for name, found in d["here"].items():
                lines.append(f"| {d['claim']}{' (robust)' if d['robust'] else ''} | "
                             f"{task_labels[name]} | {_difference(found)} | "
                             f"{found['verdict']} |")
    return "\n".join(lines) + "\n"


def format_runs_side_by_side(runs):
    """Markdown: each direction's difference and verdict in every run of
    `runs` (`[(heading, table JSON)]`, the same table from runs with other
    `--seed`s), one row per direction and task."""
    labels = {s.name: s.label for s in SYSTEMS}
    task_labels = {t.name: t.label for t in TASKS}
    found = [{(d["better"], d["worse"], name): here for d in table["directions"]
              for name, here in d["here"].items()} for _, table in runs]
    robust = {(d["better"], d["worse"], name) for _, table in runs
              for d in table["directions"] if d["robust"] for name in d["here"]}
    lines = ["| Direction | task | " + " | ".join(heading for heading, _ in runs) + " |",
             "|---|---|" + "---|" * len(runs)]
    for key in found[0]:
        better, worse, task = key
        mark = " (robust)" if key in robust else ""
        cells = [f"{_difference(f[key])} {f[key]['verdict']}" if key in f else "not run"
                 for f in found]
        lines.append(f"| {labels[better]} > {labels[worse]}{mark} | {task_labels[task]} | "
                     + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"
