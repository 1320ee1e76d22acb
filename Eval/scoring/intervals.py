"""95% intervals for a dataset score, and the paired statistics that `eval.py diff` reports: 0/1
metrics get the Wilson interval (the bootstrap collapses to a point near 0% and 100%), every other
metric a seeded percentile bootstrap over examples.

Usage:
    score_interval([1.0, 0.0, 1.0])        # {"ci95": [20.77, 93.85], "ci95_method": "wilson"}
"""
from __future__ import annotations

import math
from statistics import NormalDist

SEED = 20240613
RESAMPLES = 2000
Z95 = NormalDist().inv_cdf(0.975)  # 1.959963984540054
_CHUNK_CELLS = 4_000_000  # index cells drawn at once: bounds memory (32 MB of int64) for large n


def is_binary(values) -> bool:
    return bool(values) and all(v == 0.0 or v == 1.0 for v in values)


def wilson_interval(successes: int, n: int) -> tuple[float, float]:
    """Wilson score interval for k successes out of n, as proportions in [0, 1]."""
    p = successes / n
    z2 = Z95 * Z95
    centre = (p + z2 / (2 * n)) / (1 + z2 / n)
    half = Z95 / (1 + z2 / n) * math.sqrt(p * (1 - p) / n + z2 / (4 * n * n))
    # clamp: at p = 0 or 1 the formula gives the bound up to a rounding error outside [0, 1]
    return max(0.0, centre - half), min(1.0, centre + half)


def bootstrap_means(values):
    """Means of RESAMPLES resamples of `values`, drawn in chunks from the one generator (bounded
    memory, the same draws whatever the chunk size), from the values sorted: the interval is the
    same whatever the order of the file's lines."""
    import numpy as np  # only when an interval is asked for

    data = np.sort(np.asarray(values, dtype=np.float64))
    rng = np.random.default_rng(SEED)
    rows = max(1, _CHUNK_CELLS // max(data.size, 1))
    means = np.empty(RESAMPLES, dtype=np.float64)
    for start in range(0, RESAMPLES, rows):
        stop = min(RESAMPLES, start + rows)
        means[start:stop] = data[rng.integers(0, data.size, size=(stop - start, data.size))].mean(1)
    return means


def _percent_interval(values) -> list[float]:
    import numpy as np

    low, high = np.percentile(bootstrap_means(values), [2.5, 97.5])
    return [round(100 * float(low), 2), round(100 * float(high), 2)]


def score_interval(values: list[float]) -> dict:
    if not values:
        return {"ci95": None, "ci95_method": None}
    if is_binary(values):
        low, high = wilson_interval(values.count(1.0), len(values))
        return {"ci95": [round(100 * low, 2), round(100 * high, 2)], "ci95_method": "wilson"}
    return {"ci95": _percent_interval(values), "ci95_method": "bootstrap"}


def paired_difference_interval(a: list[float], b: list[float]) -> list[float] | None:
    """Bootstrap 95% interval of mean(b - a), resampling pairs (what the runs share cancels)."""
    return _percent_interval([y - x for x, y in zip(a, b)]) if a else None


def mcnemar_exact(a_only: int, b_only: int) -> float:
    """McNemar's exact test: p = min(1, 2 P(X <= min(b, c))), X ~ Bin(b + c, 1/2), in integers."""
    n = a_only + b_only
    if n == 0:
        return 1.0
    tail = sum(math.comb(n, i) for i in range(min(a_only, b_only) + 1))
    return min(1.0, 2 * tail / 2 ** n)
