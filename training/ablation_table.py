"""Table 5 in miniature, the table itself: its rows, columns and the paper's.

What `training.ablations` compares (`SYSTEMS`, `TASKS`), the paper's Table 5
and the directions it reports (`PAPER_TABLE5`, `DIRECTIONS`), and what is
made of the runs' scores: mean and spread over seeds (`aggregate`), a
verdict per direction against the seeds' noise (`verdict`), the JSON
(`build_table`), the text beside the paper's (`format_table`) and the PNG
(`plot_table`).
"""

import dataclasses
import math
import os


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




def pretraining_scores(summary):
    keys = ("masked_lm_accuracy", "baseline_masked_lm_accuracy", "next_sentence_accuracy",
            "next_token_accuracy", "baseline_next_token_accuracy", "perplexity",
            "baseline_unigram_perplexity")
    shown = [f"{k} {summary[k]:.4f}" for k in keys if isinstance(summary.get(k), (int, float))]
    return ", ".join(shown) or "held-out scores: see summary.json"


# --- 4. Fine-tuning -------------------------------------------------------------




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


def build_table(cfg, pretraining, tasks, cells, seconds):
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
                 else pretraining_scores(summary))
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


def plot_table(table, path):
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
