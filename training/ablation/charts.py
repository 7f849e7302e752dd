"""The Table 5 comparison's charts, drawn headless into PNG files: each
table's bars (`plot_table`), and the figure setup and saving
(`panels`, `save_figure`) that `training.ablation.scaling` draws with too.
"""

import os

import matplotlib

matplotlib.use("Agg")  # headless, before pyplot loads
import matplotlib.pyplot as plt  # noqa: E402 (after the backend is chosen)

from training.ablation.systems import TASKS  # noqa: E402


def panels(count, height):
    """`(figure, axes)`: `count` panels side by side, 5 inches wide each."""
    return plt.subplots(1, count, figsize=(5 * count, height))


def save_figure(figure, path):
    """Lays `figure` out, writes it to `path` (a temporary file, then a
    rename) and closes it."""
    figure.tight_layout()
    figure.savefig(path + ".tmp.png", dpi=100)
    plt.close(figure)
    os.replace(path + ".tmp.png", path)


def plot_table(table, path, title):
    """A bar chart per task: mean and 95% interval, each seed a dot, baselines as lines."""
    names = list(table["systems"])
    figure, axes = panels(len(TASKS), 4.8)
    for ax, task in zip(axes, TASKS):
        baselines = table["baselines"][task.name]
        shown = [v for v in baselines.values() if isinstance(v, float | int)]
        for i, name in enumerate(names):
            entry = table["systems"][name]["tasks"][task.name]
            stats = entry.get("interval")
            if stats:
                error = 0 if stats["low"] is None else stats["mean"] - stats["low"]
                ax.bar(i, stats["mean"], color=f"C{i}", yerr=error, capsize=4)
                ax.plot([i] * len(entry["seeds"]), [s["score"] for s in entry["seeds"]], "k.",
                        markersize=4)
                shown += [s["score"] for s in entry["seeds"]] + [stats["mean"] + error]
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
        ax.set_ylim(max(0.0, low - 4 * margin), high + margin)
        ax.set_xticks(range(len(names)))
        ax.set_xticklabels([table["systems"][n]["label"] for n in names], rotation=35,
                           ha="right", fontsize=8)
        ax.set_title(f"{task.label} (~{task.paper_column})\n{task.kind}", fontsize=10)
        ax.legend(fontsize=7, loc="lower right")
    settings = table["settings"]
    figure.suptitle(f"{title}: tiny models, {settings['pretrain_steps']} pretraining steps, "
                    f"{settings['seeds']} fine-tuning seeds; bars: mean and 95% interval, "
                    "dots: seeds", fontsize=10)
    save_figure(figure, path)
