"""Fine-tuning's early stopping (`--early_stopping_patience`): the score it
watches, the best epoch of a run's history, and `KeepBest`, the callback
that saves the best epoch's weights and stops the run once its patience is
spent.

Everything is read off the run's history (one dict of logs per finished
epoch, `history.json` beside the checkpoints), so a resumed run finds the
same best epoch and the same count of epochs since, and a run that stopped
early does not train again. Keras' own `EarlyStopping` keeps its best
weights in memory only: a run killed after its best epoch would lose them,
and a resume would start its patience over. All the scores it watches
(accuracy, F1, Matthews, Pearson) are better higher.
"""

import math
import os

import keras

BEST_WEIGHTS = "best.weights.h5"  # the best epoch's weights, in <output_dir>/checkpoints


def monitored(logs, split):
    """The key of `logs` early stopping watches for `split` (the name its
    scores carry, e.g. "validation"): `<split>_f1` where the task reports an
    F1, else the split's first score; None when the split has no score.
    Counts and SQuAD v2's null-score threshold are not scores."""
    keys = [k for k, v in logs.items() if k.startswith(split + "_") and isinstance(v, float)
            and "threshold" not in k]
    if split + "_f1" in keys:
        return split + "_f1"
    return keys[0] if keys else None


def best_epoch(history, key):
    """The index (0-based) of the best epoch of `history` by `key`, the
    first on a tie; None when no epoch has a finite score."""
    best = None
    for epoch, logs in enumerate(history):
        value = logs.get(key)
        if value is None or not math.isfinite(value):
            continue
        if best is None or value > history[best][key]:
            best = epoch
    return best


def stopped_early(history, key, patience):
    """Whether `history`'s last `patience` epochs came after its best one:
    the rule that ends a run before its last epoch."""
    best = best_epoch(history, key)
    if best is None or not patience:
        return False
    return len(history) - 1 - best >= patience


class KeepBest(keras.callbacks.Callback):
    """After each epoch's scores (put it after `EvaluateEachEpoch`, before
    the checkpointing one): saves the weights at `path` when the epoch is the
    best so far, and stops training once `patience` epochs have passed
    without a better one.

    Args:
        path: str. The weights file (`.weights.h5`), replaced whole.
        split: str. The scores' name in the logs ("validation", "dev").
        patience: int. Epochs without improvement before the run stops.
        history: list. The logs of the epochs finished before this fit (the
            checkpointing callback appends each epoch after this one runs).
        is_chief: bool. Whether this process writes files.
    """

    def __init__(self, path, split, patience, history, is_chief=True):
        super().__init__()
        self.path, self.split, self.patience = path, split, patience
        self.history, self.is_chief = history, is_chief
        self.key = monitored(history[0], split) if history else None
        self.stopped = bool(self.key) and stopped_early(history, self.key, patience)

    def on_epoch_end(self, epoch, logs=None):
        logs = logs or {}
        self.key = self.key or monitored(logs, self.split)
        if self.key is None:
            raise SystemExit(f"Early stopping: the {self.split} split reported no score "
                             f"(logs: {sorted(logs)}).")
        history = [*self.history, logs]
        best = best_epoch(history, self.key)
        if best == len(history) - 1 and self.is_chief:
            partial = self.path[:-len(".weights.h5")] + ".partial.weights.h5"
            self.model.save_weights(partial)
            os.replace(partial, self.path)
        if stopped_early(history, self.key, self.patience):
            self.stopped = True
            self.model.stop_training = True


def final_scores(model, task):
    """`{"<split>_<metric>": value}` of every dev split of `task`, scored
    once with the model's weights as they are: a run with
    `--validation_data_dir` reads dev only here."""
    scores = {}
    for split in task.eval_splits:
        metrics, _ = task.evaluate(model, split)
        scores.update({f"{split}_{k}": v for k, v in metrics.items()
                       if isinstance(v, (int, float))})
    return scores


def kept_weights(model, output_dir, patience, history, watched, splits):
    """With early stopping, loads the best epoch's weights into `model` and
    returns what summary.json says of them: `monitor` (the key watched),
    `best_epoch` (1-based), `epochs_trained`, `stopped_early`, and `scores`
    (the best epoch's scores of `splits`, e.g. the dev splits); without it
    (`patience` 0), `{}`: the last weights are kept.

    `history`: `{key: [one value per epoch]}`, as `fit_resumable` returns it."""
    if not patience:
        return {}
    rows = [dict(zip(history, values)) for values in zip(*history.values())]
    key = monitored(rows[0], watched) if rows else None
    best = best_epoch(rows, key) if key else None
    path = os.path.join(output_dir, "checkpoints", BEST_WEIGHTS)
    if best is None or not os.path.exists(path):
        print(f"Early stopping: no epoch scored on {watched}: the last weights are kept.",
              flush=True)
        return {"monitor": key, "best_epoch": None, "epochs_trained": len(rows),
                "stopped_early": False}
    model.load_weights(path)
    print(f"Early stopping: the weights of epoch {best + 1} ({key} {rows[best][key]:.4f}) "
          f"kept, from {path}", flush=True)
    return {"monitor": key, "best_epoch": best + 1, "epochs_trained": len(rows),
            "stopped_early": stopped_early(rows, key, patience),
            "scores": {k: v for k, v in rows[best].items()
                       if any(k.startswith(split + "_") for split in splits)}}
