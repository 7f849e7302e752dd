"""The statistics of Table 5 in miniature, fixed before any result was seen.

- A cell (one system on one task) is the scores of its fine-tuning seeds:
  its mean and the 95% Student-t interval of that mean (`cell_interval`).
- A direction of the paper ("A beats B on task T") is the paired difference
  A - B over the seeds both have (seed k of A with seed k of B: the same
  fine-tuning seed, so the same data order), its mean and 95% t interval
  (`paired_difference`).
- Its verdict (`verdict`): "reproduced" when the interval lies wholly above
  0 (the paper's direction), "contradicted" when wholly below, else
  "inconclusive". One pretraining run per system: the intervals cover the
  fine-tuning seeds' noise, not the pretraining's.
- Beside each cell, the final design's secondary readings (never a
  verdict): among them the `median` of its seeds' scores.

scipy's t quantiles; everything else is plain arithmetic, so a test can
check it on known numbers.
"""

import math

CONFIDENCE = 0.95


def _t_quantile(n):
    """The two-sided `CONFIDENCE` Student-t quantile with n - 1 degrees of freedom."""
    from scipy import stats  # lazy: NumPy loads in a worker only after runs._start_worker

    return float(stats.t.ppf(0.5 + CONFIDENCE / 2, n - 1))


def cell_interval(scores):
    """`{"mean", "std", "low", "high", "n"}` of seed scores: the mean and its
    95% t interval (std: sample std; with one score no interval: None)."""
    n = len(scores)
    if not n:
        return None
    mean = sum(scores) / n
    if n == 1:
        return {"mean": mean, "std": None, "low": None, "high": None, "n": 1}
    std = math.sqrt(sum((s - mean) ** 2 for s in scores) / (n - 1))
    half = _t_quantile(n) * std / math.sqrt(n)
    return {"mean": mean, "std": std, "low": mean - half, "high": mean + half, "n": n}


def median(scores):
    """The median of `scores` (the mean of the middle two when their count is
    even), or None when there are none."""
    ordered = sorted(scores)
    n = len(ordered)
    if not n:
        return None
    middle = n // 2
    return ordered[middle] if n % 2 else (ordered[middle - 1] + ordered[middle]) / 2


def paired_difference(better, worse):
    """The paired difference `better - worse` of two `{seed: score}` maps
    over the seeds both have: `cell_interval` of the differences plus the
    seeds used, or None when fewer than one pair exists."""
    seeds = sorted(set(better) & set(worse))
    if not seeds:
        return None
    stats = cell_interval([better[k] - worse[k] for k in seeds])
    return {**stats, "seeds": seeds}


def verdict(difference):
    """"reproduced", "contradicted" or "inconclusive" for a `paired_difference`
    whose sign the paper predicts positive; "not measured" without one."""
    if difference is None:
        return "not measured"
    if difference["low"] is None:
        return "inconclusive"  # one pair: no interval
    if difference["low"] > 0:
        return "reproduced"
    if difference["high"] < 0:
        return "contradicted"
    return "inconclusive"
