"""The Table 5 comparison's charts, drawn headless into PNG files: each
table's bars (`plot_table`), a task's per-seed fine-tuning curves (`plot_curves`,
the final design's seeds), and the figure setup and saving (`panels`,
`save_figure`) that `training.ablation.scaling` draws with too.
"""

import os

import matplotlib

matplotlib.use("Agg")  # headless, before pyplot loads
import matplotlib.pyplot as plt  # noqa: E402 (after the backend is chosen)
from matplotlib.ticker import MaxNLocator  # noqa: E402

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


def plot_curves(table, path, task_name="span_qa"):
    """A panel per system whose seeds on `task_name` carry curves: each seed's
    validation score by epoch, its best epoch marked, and its training loss
    thin on a second axis. Returns True once drawn, False (nothing written)
    where no seed has a curve."""
    task = {t.name: t for t in TASKS}[task_name]
    drawn = {name: row for name, row in table["systems"].items()
             if any(s.get("curve") for s in row["tasks"][task_name].get("seeds", []))}
    if not drawn:
        return False
    figure, axes = panels(len(drawn), 4.2)
    for ax, row in zip(axes if len(drawn) > 1 else [axes], drawn.values()):
        seeds = [s for s in row["tasks"][task_name]["seeds"] if s.get("curve")]
        loss_axis = ax.twinx()
        ax.set_zorder(loss_axis.get_zorder() + 1)  # the scores and legend over the losses
        ax.patch.set_visible(False)
        for i, seed in enumerate(seeds):
            epochs = [point["epoch"] for point in seed["curve"]]
            scores = [point["validation"] for point in seed["curve"]]
            ax.plot(epochs, scores, color=f"C{i}", marker=".", label=f"seed {seed['seed']}")
            best = seed.get("best_epoch") or epochs[scores.index(max(scores))]
            if best in epochs:
                ax.plot(best, scores[epochs.index(best)], color=f"C{i}", marker="*",
                        markersize=12, markeredgecolor="k")
            loss_axis.plot(epochs, [point["loss"] for point in seed["curve"]], color=f"C{i}",
                           linewidth=0.7, alpha=0.6)
        converged = sum(s.get("converged") is True for s in seeds)
        ax.set_title(f"{row['label']}: {converged}/{len(seeds)} seeds converged", fontsize=10)
        ax.set_xlabel("epoch")
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.set_ylabel("validation " + ("SQuAD F1" if task.name == "span_qa" else "accuracy x 100"))
        loss_axis.set_ylabel("training loss (thin)")
        ax.legend(fontsize=7, loc="lower right")
    figure.suptitle(f"{task.label} (~{task.paper_column}): validation score by epoch per "
                    "fine-tuning seed (star: best epoch, its weights kept); thin: training "
                    "loss", fontsize=10)
    save_figure(figure, path)
    return True
