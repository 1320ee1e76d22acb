"""Dataset-level arithmetic of the unlearning metrics, in open-unlearning's formulas and order.

Usage:
    from Eval.unlearning import aggregate as agg
    tr = agg.truth_ratios(correct_losses=[1.0, 2.0], wrong_losses=[[2.0, 2.0], [1.0, 3.0]])
    agg.closer_to_1_better(tr), agg.true_better(tr), agg.privleak(auc=0.99, ref_auc=0.5)
    agg.roc_auc(forget=[0.1, 0.4], holdout=[0.3, 0.9])      # forget = label 0, holdout = label 1
"""
from __future__ import annotations

import math
import warnings

import numpy as np

EPS = 1e-10  # the reference's guard in every ratio below


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


def truth_ratios(correct_losses, wrong_losses) -> np.ndarray:
    """TR_i = exp(-mean wrong avg_loss) / (exp(-mean correct avg_loss) + 1e-10) (the code's)."""
    return np.exp(-to_1d(wrong_losses)) / (np.exp(-to_1d(correct_losses)) + EPS)


def closer_to_1_better(tr) -> float:
    """Forget-set aggregate: mean of min(TR, 1/TR); 1: the model cannot tell true from false."""
    tr = np.asarray(tr, dtype=np.float64)
    return float(np.mean(np.minimum(tr, 1 / (tr + EPS))))


def true_better(tr) -> float:
    """Retain-set aggregate: mean of max(0, 1 - TR); high when the true answer is preferred."""
    return float(np.mean(np.maximum(0, 1 - np.asarray(tr, dtype=np.float64))))


def prob_mean_scores(correct_losses, wrong_losses) -> np.ndarray:
    """`prob_mean` (open-unlearning #163): p_c / (p_c + p_w + 1e-10), p = exp(-mean loss)."""
    correct, wrong = np.exp(-to_1d(correct_losses)), np.exp(-to_1d(wrong_losses))
    return correct / (correct + wrong + EPS)


def normalised_probs(correct_probs, wrong_probs) -> np.ndarray:
    """probability_w_options: p_c / (p_c + sum of the perturbed options' p + 1e-10)."""
    correct = np.asarray(correct_probs, dtype=np.float64)
    wrong = np.asarray(wrong_probs, dtype=np.float64)
    wrong = np.sum(wrong, axis=tuple(range(1, wrong.ndim))) if wrong.ndim > 1 else wrong
    return correct / (correct + wrong + EPS)


def roc_auc(forget, holdout) -> float:
    """scikit-learn's ROC AUC, forget = label 0 (near 1: still memorised); NaN in, NaN out.

    >>> roc_auc([1.0, 2.0], [2.0, 3.0])   # one tie counts one half
    0.875
    """
    n0, n1 = len(forget), len(holdout)
    if n0 == 0 or n1 == 0:
        raise ValueError(f"an AUC needs forget and holdout samples (got {n0} forget, {n1} holdout)")
    scores = np.concatenate([np.asarray(forget, dtype=np.float64),
                             np.asarray(holdout, dtype=np.float64)])
    if np.isnan(scores).any():
        return math.nan
    _, inverse, counts = np.unique(scores, return_inverse=True, return_counts=True)
    average_rank = np.cumsum(counts) - (counts - 1) / 2.0  # 1-based; ties share their mean rank
    u = average_rank[inverse][n0:].sum() - n1 * (n1 + 1) / 2.0
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
