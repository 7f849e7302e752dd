"""Your own labelled texts scored (`training.tasks.text_classification` reads
them): accuracy, macro-F1, per-class precision / recall / F1 and the
confusion matrix of predicted label ids, as the usual reports give them
(scikit-learn's).
"""

import numpy as np
import sklearn.metrics


def classification_metrics(gold, predicted, labels):
    """Accuracy, macro-F1, per-class precision / recall / F1 and the confusion matrix.

    Macro-F1 averages the classes that occur in `gold` or `predicted`
    (scikit-learn's default set), so a training label absent from dev and
    never predicted does not count as a zero. A class never predicted has
    precision 0, one never in `gold` recall 0 (`zero_division=0`).

    Args:
        gold: int `(N,)` label ids.
        predicted: int `(N,)` label ids.
        labels: tuple of str. The label of each id.

    Returns:
        dict: `accuracy`, `macro_f1` (floats 0..1), `per_class` (label ->
        `precision`, `recall`, `f1`, `support`) and `confusion_matrix`
        (rows: gold, columns: predicted, in `labels` order).
    """
    gold, predicted = np.asarray(gold), np.asarray(predicted)
    ids = list(range(len(labels)))
    precision, recall, f1, support = sklearn.metrics.precision_recall_fscore_support(
        gold, predicted, labels=ids, zero_division=0)
    present = sorted(set(gold.tolist()) | set(predicted.tolist()))
    return {
        "accuracy": float(sklearn.metrics.accuracy_score(gold, predicted)),
        "macro_f1": float(np.mean(f1[present])) if present else 0.0,
        "per_class": {label: {"precision": float(precision[i]), "recall": float(recall[i]),
                              "f1": float(f1[i]), "support": int(support[i])}
                      for i, label in enumerate(labels)},
        "confusion_matrix": sklearn.metrics.confusion_matrix(
            gold, predicted, labels=ids).tolist(),
    }
