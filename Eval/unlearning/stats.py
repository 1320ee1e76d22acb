"""The unlearning arithmetic in open-unlearning's formulas and order, in float64: per-sample
statistics of one TokenStats dict (TOKEN_STATS_FIELDS), then means, AUC, KS, privleak.

Usage:
    stats.probability({"logprobs": [-0.1, -2.0]}), stats.privleak(auc=0.99, ref_auc=0.5)
"""
from __future__ import annotations

import math
import warnings
import zlib

import numpy as np

VAR_FLOOR = 1e-6  # Min-K%++ clamps each position's variance before its square root, as reference
EPS = 1e-10  # the reference's guard in every ratio (below and in tofu.py)
CONF_EPS = 1e-12  # confidence-ordered probability: the handler's log(p + eps), kept exactly

# A record's `logprobs`: {answer key: [TokenStats per option]}, lists per labelled token (+ EOS):
TOKEN_STATS_FIELDS = {
    "logprobs": "list[float]: log p(y_t | prompt, y_<t), the teacher-forced label log-probs",
    "greedy": "list[bool]: whether the label is the argmax at its position (memorisation)",
    "mean": "list[float]: E_p[log p] over the vocabulary at each position (Min-K%++)",
    "var": "list[float]: Var_p[log p] over the vocabulary at each position (Min-K%++)",
    "text": "str: the label tokens decoded with special tokens skipped (ZLib)",
    "eos": "bool: whether an EOS token was appended to the answer and labelled",
}


def check_token_stats(ts: object) -> dict:
    lp = ts.get("logprobs") if isinstance(ts, dict) else None
    if not isinstance(lp, list) or not all(type(x) in (int, float) for x in lp):  # not bool
        raise ValueError("TokenStats 'logprobs' must be a list of numbers")
    for name in ("greedy", "mean", "var"):
        if name in ts and len(ts[name]) != len(lp):
            raise ValueError(f"TokenStats {name!r} has {len(ts[name])} entries but 'logprobs' has "
                             f"{len(lp)}")
    return ts


def _need(ts: dict, name: str) -> list:
    if name not in ts:
        raise ValueError(f"TokenStats lacks {name!r}, which this metric needs")
    return ts[name]


def avg_loss(ts: dict) -> float:
    """Mean negative log-likelihood over ALL labelled positions (EOS included); NaN for none."""
    lp = ts["logprobs"]
    return -math.fsum(lp) / len(lp) if lp else math.nan


def probability(ts: dict) -> dict:
    loss = avg_loss(ts)
    return {"prob": math.exp(-loss), "avg_loss": loss}


def confidence_ordered_probs(ts: dict) -> list[float]:
    return sorted((math.exp(lp) for lp in ts["logprobs"]), reverse=True)


def confidence_ordered(ts: dict) -> dict:
    """A masked pass's `probability`: exp(mean(log(p + 1e-12))); None for no label (skipped)."""
    probs = confidence_ordered_probs(ts)
    if not probs:
        return {"prob": None, "avg_loss": None, "confidence_ordered_probs": []}
    prob = math.exp(math.fsum(math.log(p + CONF_EPS) for p in probs) / len(probs))
    return {"prob": prob, "avg_loss": -math.log(prob + CONF_EPS), "confidence_ordered_probs": probs}


def exact_memorization(ts: dict) -> float | None:
    """Share of the N = T-1 positions (the reference drops the last) whose label is the argmax."""
    flags = _need(ts, "greedy")[:-1]
    return sum(flags) / len(flags) if flags else None


def extraction_strength(ts: dict) -> float:
    """1 - k*/N, k* the smallest k from which the argmax matches every label; as the reference:
    no matching suffix gives k* = N-1, and `1 - k/N`, not `(N-k)/N`, keeps the float identical."""
    flags = _need(ts, "greedy")[:-1]
    n = len(flags)
    if n == 0:
        return 0
    matched = next((j for j, flag in enumerate(reversed(flags)) if not flag), n)  # suffix length
    return 1 - min(n - matched, n - 1) / n  # no matching suffix: the loop's last k, N-1


def _bottom_k_mean(values: np.ndarray, k: float) -> float:
    # open-unlearning's rule for how many values count: at least one, else floor(len * k).
    count = max(1, int(len(values) * k))
    return float(np.mean(np.sort(values)[:count]))


def min_k_score(ts: dict, k: float = 0.4) -> float:
    """Min-K% Prob: minus the mean of the k·N lowest label log-probs; 0 for N = 0."""
    lp = np.asarray(ts["logprobs"][:-1], dtype=np.float64)
    return -_bottom_k_mean(lp, k) if lp.size else 0.0


def min_k_plus_plus_score(ts: dict, k: float = 0.4) -> float:
    """Min-K%++: minus the mean of the k·N smallest (log p(y_t) - mu_t) / sqrt(var_t)."""
    lp = np.asarray(ts["logprobs"][:-1], dtype=np.float64)
    if lp.size == 0:
        return 0.0
    mu = np.asarray(_need(ts, "mean")[:-1], dtype=np.float64)
    var = np.maximum(np.asarray(_need(ts, "var")[:-1], dtype=np.float64), VAR_FLOOR)
    return -_bottom_k_mean((lp - mu) / np.sqrt(var), k)


def zlib_score(ts: dict) -> float:
    """avg_loss over the zlib-compressed byte length of the decoded answer (`ts["text"]`)."""
    return avg_loss(ts) / len(zlib.compress(_need(ts, "text").encode("utf-8")))


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
    """scikit-learn's ROC AUC (Mann-Whitney U over n0·n1), forget = label 0; NaN in, NaN out.

    >>> roc_auc([1.0, 2.0], [2.0, 3.0])   # one tie counts one half
    0.875
    """
    from scipy.stats import rankdata

    n0, n1 = len(forget), len(holdout)
    if n0 == 0 or n1 == 0:
        raise ValueError(f"an AUC needs forget and holdout samples (got {n0} forget, {n1} holdout)")
    ranks = rankdata(np.asarray([*forget, *holdout], dtype=np.float64))  # a NaN: all NaN
    u = ranks[n0:].sum() - n1 * (n1 + 1) / 2.0  # ties share their mean rank
    return float(u / (n0 * n1))


def ks_pvalue(model_values, retain_values) -> float:
    from scipy.stats import ks_2samp

    return float(ks_2samp(model_values, retain_values).pvalue)


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
