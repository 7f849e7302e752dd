"""`training_curves.png`: loss and accuracy over steps, train and held-out,
drawn from a run's TensorBoard logs.

Pretraining and fine-tuning write their scalars as they train
(`training.run.train_log.TrainingLog`: the train run, in the log folder
itself) and their held-out scores where they have them (pretraining's
final evaluation, fine-tuning's dev scores after each epoch), each
held-out set in a subfolder named after it (`heldout/`, `dev/`,
`dev_matched/`), so TensorBoard overlays the runs and this plot reads
them back. A run resumed after a crash logs some steps twice; the last
value written for a step wins.
"""

import glob
import math
import os

import tensorflow as tf
from tensorflow.core.util import event_pb2

# Scalars about speed and schedule, not about how well the model does.
_NOT_SCORES = ("learning_rate", "sequences_per_second", "tokens_per_second")


def read_scalars(log_dir):
    """`{tag: (steps, values)}` of the event files directly in `log_dir`,
    sorted by step; for a step logged more than once, the last write."""
    points = {}  # tag -> {step: (wall_time, value)}
    for path in sorted(glob.glob(os.path.join(log_dir, "events.out.tfevents.*"))):
        for record in tf.data.TFRecordDataset(path):
            event = event_pb2.Event.FromString(record.numpy())
            for value in event.summary.value:
                number = float(tf.make_ndarray(value.tensor)) if value.HasField("tensor") else (
                    float(value.simple_value))
                seen = points.setdefault(value.tag, {})
                if event.step not in seen or seen[event.step][0] <= event.wall_time:
                    seen[event.step] = (event.wall_time, number)
    return {tag: ([s for s in sorted(steps)], [steps[s][1] for s in sorted(steps)])
            for tag, steps in points.items()}


def curve_series(log_dir):
    """What `write_training_curves` plots: `{"loss": {label: (steps, values)},
    "accuracy": {label: (steps, values)}}`.

    "loss" holds the train run's `loss` and each held-out run's `loss`;
    "accuracy" every other score: the train run's `...accuracy` scalars and
    every held-out metric (accuracy, F1, MCC...; a metric in percent, as
    SQuAD's, is shown divided by 100 so that all share one axis).
    """
    series = {"loss": {}, "accuracy": {}}
    runs = [("train", log_dir)] + [
        (os.path.basename(folder), folder) for folder in sorted(glob.glob(os.path.join(
            log_dir, "*"))) if os.path.isdir(folder)]
    for run, folder in runs:
        for tag, (steps, values) in sorted(read_scalars(folder).items()):
            if tag == "loss":
                series["loss"][run] = (steps, values)
            elif tag not in _NOT_SCORES and (run != "train" or tag.endswith("accuracy")):
                finite = [v for v in values if math.isfinite(v)]
                if finite and max(abs(v) for v in finite) > 1.0:  # percent
                    series["accuracy"][f"{run} {tag} (/100)"] = (steps, [v / 100 for v in values])
                else:
                    series["accuracy"][f"{run} {tag}"] = (steps, values)
    return series


def write_training_curves(log_dir, path=None):
    """Draws `curve_series(log_dir)` into `path` (default
    `<log_dir>/training_curves.png`) atomically; returns `(path, series)`."""
    import matplotlib  # lazy: loads only when a plot is drawn, its backend chosen first

    matplotlib.use("Agg")  # headless
    import matplotlib.pyplot as plt  # lazy: after the backend (above)

    path = path or os.path.join(log_dir, "training_curves.png")
    series = curve_series(log_dir)
    figure, axes = plt.subplots(1, 2, figsize=(11, 4.2))
    for ax, (panel, curves) in zip(axes, series.items()):
        for label, (steps, values) in curves.items():
            train = label == "train" or label.startswith("train ")
            # Held-out scores come at a few steps: markers, so one point shows.
            ax.plot(steps, values, "-" if train else "o--", label=label,
                    linewidth=1.2 if train else 1.0, markersize=5)
        ax.set_xlabel("step")
        ax.set_title(panel if panel == "loss" else "accuracy and held-out metrics")
        ax.grid(alpha=0.3)
        if curves:
            ax.legend(fontsize=8)
        else:
            ax.text(0.5, 0.5, "nothing logged", ha="center", va="center",
                    transform=ax.transAxes)
    figure.tight_layout()
    tmp = os.path.join(os.path.dirname(os.path.abspath(path)),
                       f".tmp-{os.path.basename(path)}")
    figure.savefig(tmp, dpi=100, format="png")
    plt.close(figure)
    os.replace(tmp, path)
    return path, series


def write_heldout_scalars(log_dir, step, results, run="heldout"):
    """Held-out scores of a run at `step` into `<log_dir>/<run>/`, where
    `curve_series` finds them: its loss and every accuracy; a language
    model's perplexity also as `loss` = ln(perplexity) (its mean negative
    log-likelihood per token, what it trains on), when it has no loss."""
    scores = {name: float(value) for name, value in results.items()
              if isinstance(value, (int, float)) and not isinstance(value, bool)
              and not name.startswith("baseline") and (
                  name == "loss" or name.endswith("accuracy") or name == "perplexity")}
    if "loss" not in scores and scores.get("perplexity", 0) > 0:
        scores["loss"] = math.log(scores["perplexity"])
    scores.pop("perplexity", None)
    if not scores:
        return {}
    writer = tf.summary.create_file_writer(os.path.join(log_dir, run))
    with writer.as_default(step=step):
        for name, value in scores.items():
            tf.summary.scalar(name, value)
    writer.flush()
    writer.close()
    return scores
