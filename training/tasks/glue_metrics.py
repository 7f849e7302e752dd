"""GLUE metrics, as the GLUE leaderboard reports them.

CoLA: Matthews correlation; MRPC and QQP: F1 of the positive class
("paraphrase", "duplicate": label 1) and accuracy; STS-B: Pearson and
Spearman correlation; the rest: accuracy (MNLI matched and mismatched are two
calls). Computed with scikit-learn and SciPy, the implementations the GLUE
baselines and Hugging Face's `glue_compute_metrics` use, so numbers compare.

Paper: Wang et al., 2018, "GLUE: A Multi-Task Benchmark and Analysis Platform
for Natural Language Understanding", section 3 and table 1.
"""

import numpy as np
import scipy.stats
import sklearn.metrics

from training.tasks.glue import decode_predictions
from training.tasks.glue import get_task


def accuracy(predictions, labels):
    """Fraction of predicted label ids equal to the gold ones."""
    return float(sklearn.metrics.accuracy_score(labels, predictions))


def f1(predictions, labels):
    """F1 of class 1: `2 tp / (2 tp + fp + fn)`; 0.0 when there is no tp."""
    return float(sklearn.metrics.f1_score(labels, predictions, pos_label=1, zero_division=0.0))


def matthews_corr(predictions, labels):
    """Matthews correlation of two binary labelings, in [-1, 1]; 0.0 when
    either side is constant (as scikit-learn, and so the GLUE baselines)."""
    return float(sklearn.metrics.matthews_corrcoef(labels, predictions))


def pearson(predictions, labels):
    """Pearson correlation of predicted and gold scores; NaN for fewer than
    two pairs (undefined), rather than stopping a run at its evaluation."""
    if len(labels) < 2:
        return float("nan")
    return float(scipy.stats.pearsonr(predictions, labels).statistic)


def spearman(predictions, labels):
    """Spearman correlation: Pearson of the ranks, ties sharing their mean
    rank; NaN for fewer than two pairs."""
    if len(labels) < 2:
        return float("nan")
    return float(scipy.stats.spearmanr(predictions, labels).statistic)


METRICS = {
    "accuracy": accuracy,
    "f1": f1,
    "matthews_corr": matthews_corr,
    "pearson": pearson,
    "spearman": spearman,
}


def glue_metrics(task, predictions, labels):
    """The metrics GLUE reports for `task`.

    Args:
        task: str or `training.tasks.glue.GlueTask` (`"cola"`, `"mrpc"`, `"stsb"`, ...).
        predictions: `(N,)` int label ids or `(N, C)` logits (argmax taken);
            `(N,)` or `(N, 1)` scores for STS-B.
        labels: `(N,)` gold label ids (`EncodedExamples.y`) or scores.

    Returns:
        dict of metric name -> float, e.g. `{"f1": 0.88, "accuracy": 0.84}`
        for MRPC, in the leaderboard's order.

    Example:
    >>> glue_metrics("cola", [1, 0, 1], [1, 1, 1])
    {'matthews_corr': 0.0}
    """
    task = get_task(task)
    predictions = decode_predictions(task, predictions)
    labels = np.asarray(labels)
    if labels.shape != predictions.shape:
        raise ValueError(
            f"Got {predictions.shape[0]} predictions but labels of shape {labels.shape}."
        )
    return {name: METRICS[name](predictions, labels) for name in task.metrics}
