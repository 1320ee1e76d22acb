"""Dataset-level arithmetic of the unlearning metrics, in open-unlearning's formulas and order.

Usage:
    from Eval.unlearning import aggregate as agg
    agg.mean([[1.0, 3.0], [2.0, 2.0]]), agg.privleak(auc=0.99, ref_auc=0.5)
    agg.roc_auc(forget=[0.1, 0.4], holdout=[0.3, 0.9])      # forget = label 0, holdout = label 1
"""
from __future__ import annotations

import math
import warnings

import numpy as np

EPS = 1e-10  # the reference's guard in every ratio (here and in tofu.py)


def to_1d(values) -> np.ndarray:
    """Per-sample means over every axis but the first (a multi-answer row: its options' mean)."""
    try:
        arr = np.asarray(values, dtype=np.float64)
    except ValueError:  # ragged rows: numpy cannot stack them, nor can the reference
        raise ValueError("the samples hold different numbers of answer options") from None
    return np.mean(arr, axis=tuple(range(1, arr.ndim))) if arr.ndim > 1 else arr


def mean(values) -> float:
    """Mean over samples of `to_1d(values)`; NaN (without np.mean's warning) for none."""
    return float(np.mean(to_1d(values))) if len(values) else math.nan


def roc_auc(forget, holdout) -> float:
    """scikit-learn's ROC AUC (the Mann-Whitney U of the holdout side over n0·n1), forget = label 0
    (near 1: still memorised); NaN in, NaN out.

    >>> roc_auc([1.0, 2.0], [2.0, 3.0])   # one tie counts one half
    0.875
    """
    from scipy.stats import rankdata

    n0, n1 = len(forget), len(holdout)
    if n0 == 0 or n1 == 0:
        raise ValueError(f"an AUC needs forget and holdout samples (got {n0} forget, {n1} holdout)")
    ranks = rankdata(np.concatenate([np.asarray(forget, dtype=np.float64),
                                     np.asarray(holdout, dtype=np.float64)]))  # a NaN: all NaN
    u = ranks[n0:].sum() - n1 * (n1 + 1) / 2.0  # ties share their mean rank
    return float(u / (n0 * n1))


def ks_pvalue(model_values, retain_values) -> float:
    """Two-sided two-sample KS p-value (scipy's default method): forget quality."""
    from scipy.stats import ks_2samp

    return float(ks_2samp(np.asarray(model_values, dtype=np.float64),
                          np.asarray(retain_values, dtype=np.float64)).pvalue)


def privleak(auc: float, ref_auc: float) -> float:
    """100 · ((1-AUC) - (1-AUC_ref)) / ((1-AUC_ref) + 1e-10): MUSE reports AUCs flipped."""
    score, ref = 1 - auc, 1 - ref_auc
    return (score - ref) / (ref + EPS) * 100


def harmonic_mean(values) -> float:
    """scipy.stats.hmean: a zero component makes it 0, a negative one NaN (scipy >= 1.11)."""
    from scipy.stats import hmean

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # scipy warns on a zero / negative value
        return float(hmean(np.asarray(values, dtype=np.float64)))


def float32_mean(values) -> float | None:
    """The float32 mean the reference took of float32 scores; None unless all are float32."""
    arr = np.asarray(values, dtype=np.float64)
    as32 = arr.astype(np.float32)
    if arr.size == 0 or not np.array_equal(as32.astype(np.float64), arr, equal_nan=True):
        return None
    return float(np.mean(as32))
