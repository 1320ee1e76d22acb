"""Per-sample statistics of one saved TokenStats dict (Eval/records.py), in float64. Min-K%,
Min-K%++, exact memorisation and extraction strength drop the last labelled position, as the
reference does.

Usage:
    ts = {"logprobs": [-0.1, -2.0, -0.05], "greedy": [True, False, True], "text": "Paris"}
    stats.probability(ts), stats.min_k_score(ts, k=0.4), stats.confidence_ordered_prob(ts)
"""
from __future__ import annotations

import math
import zlib
from typing import Mapping, Sequence

import numpy as np

VAR_FLOOR = 1e-6  # Min-K%++ clamps each position's variance before its square root, as reference
CONF_EPS = 1e-12  # confidence-ordered probability: the handler's log(p + eps), kept exactly


def check_token_stats(ts: object) -> dict:
    """`ts` if it is a usable TokenStats dict, else ValueError."""
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


def confidence_ordered_probs(stats: Mapping | Sequence[float]) -> list[float]:
    """The label probabilities of a TokenStats (or its `logprobs`), most confident first."""
    logprobs = stats["logprobs"] if isinstance(stats, Mapping) else stats
    return sorted((math.exp(lp) for lp in logprobs), reverse=True)


def confidence_ordered_prob(stats: Mapping | Sequence[float]) -> float:
    """exp(mean(log(p + 1e-12))): the ordinary probability up to the epsilon; NaN for no label."""
    probs = confidence_ordered_probs(stats)
    if not probs:
        return math.nan
    return math.exp(math.fsum(math.log(p + CONF_EPS) for p in probs) / len(probs))


def confidence_ordered(ts: dict) -> dict | None:
    """`probability` of a masked pass: prob, avg_loss = -log(prob + 1e-12), the ordered list."""
    if not ts["logprobs"]:
        return None
    prob = confidence_ordered_prob(ts)
    return {"prob": prob, "avg_loss": -math.log(prob + CONF_EPS),
            "confidence_ordered_probs": confidence_ordered_probs(ts)}


def exact_memorization(ts: dict) -> float | None:
    """Share of the N = T-1 positions whose label is the teacher-forced argmax; None if N = 0."""
    flags = _need(ts, "greedy")[:-1]
    return sum(flags) / len(flags) if flags else None


def extraction_strength(ts: dict) -> float:
    """1 - k*/N, k* the smallest start k in [0, N) from which the argmax matches every label. As in
    the reference: no matching suffix gives k* = N-1, so 1/N, never 0; N = 0 scores 0; `1 - k/N`,
    not `(N-k)/N`, so that the float is bit-identical.

    >>> extraction_strength({"logprobs": [0] * 5, "greedy": [False, True, True, True, False]})
    0.75
    >>> extraction_strength({"logprobs": [0] * 5, "greedy": [True, True, True, False, True]})
    0.25
    """
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
    """Min-K%++: minus the mean of the k·N smallest (log p(y_t) - mu_t) / sqrt(max(var_t,
    1e-6))."""
    lp = np.asarray(ts["logprobs"][:-1], dtype=np.float64)
    if lp.size == 0:
        return 0.0
    mu = np.asarray(_need(ts, "mean")[:-1], dtype=np.float64)
    var = np.maximum(np.asarray(_need(ts, "var")[:-1], dtype=np.float64), VAR_FLOOR)
    return -_bottom_k_mean((lp - mu) / np.sqrt(var), k)


def zlib_score(ts: dict) -> float:
    """avg_loss over the zlib-compressed byte length of the decoded answer (`ts["text"]`)."""
    text = _need(ts, "text")
    return avg_loss(ts) / len(zlib.compress(text.encode("utf-8")))
