"""95% intervals for a dataset score, and the paired statistics that `eval.py diff` reports.

A score is a mean over examples, so its uncertainty comes from which examples happened to be in the set:
    - metrics whose per-sample values are all 0 or 1 (accuracy-like) get the Wilson score interval, which is exact
      arithmetic on (k, n) and behaves well near 0% and 100%, where the bootstrap collapses to a point;
    - every other metric gets a percentile bootstrap over examples: RESAMPLES resamples drawn with numpy's
      default_rng(SEED), so the same values always give the same interval, byte for byte.
Both are returned on the 0-100 scale of "score", rounded to 2 decimals.

McNemar's exact test compares two runs on the same items when both are 0/1: only the discordant pairs (one run
right, the other wrong) carry information, and under "no difference" each is equally likely to go either way.

Usage:
    from Eval.scoring.intervals import score_interval, bootstrap_interval, wilson_interval, mcnemar_exact
    score_interval([1.0, 0.0, 1.0])        # {"ci95": [20.77, 93.85], "ci95_method": "wilson"}
    score_interval([0.2, 0.9, 0.4])        # {"ci95": [...], "ci95_method": "bootstrap"}
    mcnemar_exact(3, 11)                   # two-sided p on 3 vs 11 discordant pairs
"""
from __future__ import annotations

import math
from statistics import NormalDist

SEED = 20240613
RESAMPLES = 2000
Z95 = NormalDist().inv_cdf(0.975)  # 1.959963984540054
_CHUNK_CELLS = 4_000_000  # index cells drawn at once: bounds memory (32 MB of int64) for large n


def is_binary(values) -> bool:
    """Whether every per-sample value is exactly 0 or 1 (and there is at least one)."""
    return bool(values) and all(v == 0.0 or v == 1.0 for v in values)


def wilson_interval(successes: int, n: int, z: float = Z95) -> tuple[float, float]:
    """Wilson score interval for k successes out of n, as proportions in [0, 1]."""
    if n <= 0:
        raise ValueError("the Wilson interval needs n > 0")
    p = successes / n
    z2 = z * z
    centre = (p + z2 / (2 * n)) / (1 + z2 / n)
    half = z / (1 + z2 / n) * math.sqrt(p * (1 - p) / n + z2 / (4 * n * n))
    # clamp: at p = 0 or 1 the formula gives the bound up to a rounding error outside [0, 1]
    return max(0.0, centre - half), min(1.0, centre + half)


def bootstrap_means(values, seed: int = SEED, resamples: int = RESAMPLES):
    """Means of `resamples` resamples (with replacement, same size) of `values`, as a numpy array. Drawn in
    chunks so 10k values x 2000 resamples never holds the whole index matrix; the draws are the same ones
    whatever the chunk size, since each chunk continues the one generator."""
    import numpy as np  # only when an interval is asked for

    data = np.asarray(values, dtype=np.float64)
    n = data.size
    rng = np.random.default_rng(seed)
    rows = max(1, _CHUNK_CELLS // max(n, 1))
    means = np.empty(resamples, dtype=np.float64)
    for start in range(0, resamples, rows):
        stop = min(resamples, start + rows)
        idx = rng.integers(0, n, size=(stop - start, n))
        means[start:stop] = data[idx].mean(axis=1)
    return means


def bootstrap_interval(values, seed: int = SEED, resamples: int = RESAMPLES) -> tuple[float, float]:
    """Percentile bootstrap 95% interval of the mean, as (low, high) on the values' own scale."""
    import numpy as np

    if len(values) == 0:
        raise ValueError("the bootstrap needs at least one value")
    low, high = np.percentile(bootstrap_means(values, seed, resamples), [2.5, 97.5])
    return float(low), float(high)


def _percent_pair(low: float, high: float) -> list[float]:
    return [round(100 * low, 2), round(100 * high, 2)]


def score_interval(values: list[float]) -> dict:
    """{"ci95": [low, high], "ci95_method": "wilson" | "bootstrap"} for a dataset's per-sample values (0-1), on
    the 0-100 scale; both null when there are no values."""
    if not values:
        return {"ci95": None, "ci95_method": None}
    if is_binary(values):
        k = sum(1 for v in values if v == 1.0)
        return {"ci95": _percent_pair(*wilson_interval(k, len(values))), "ci95_method": "wilson"}
    return {"ci95": _percent_pair(*bootstrap_interval(values)), "ci95_method": "bootstrap"}


def paired_difference_interval(a: list[float], b: list[float]) -> list[float] | None:
    """Percentile bootstrap 95% interval of mean(b - a) over paired items (resampling pairs, so what the two runs
    share cancels), on the 0-100 scale; None for no pairs."""
    if len(a) != len(b):
        raise ValueError("paired values need the same length")
    if not a:
        return None
    return _percent_pair(*bootstrap_interval([y - x for x, y in zip(a, b)]))


def mcnemar_exact(a_only: int, b_only: int) -> float:
    """McNemar's exact test: two-sided binomial test on the discordant pairs, p = min(1, 2 P(X <= min(b, c))) with
    X ~ Bin(b + c, 1/2). Summed in exact integers and divided once, so it is correctly rounded for any size."""
    n = a_only + b_only
    if n == 0:
        return 1.0
    tail = sum(math.comb(n, i) for i in range(min(a_only, b_only) + 1))
    return min(1.0, 2 * tail / 2 ** n)
