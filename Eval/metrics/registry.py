"""The metric registry: one decorated pure function per metric.

Usage:
    from Eval.metrics.registry import metric, METRICS

    @metric("qa_f1", version="longbench-1")
    def qa_f1(prediction: str, reference: str, **record) -> float:
        '''F1 over normalised words.

        >>> qa_f1("The cat sat", "a cat sat down")
        0.8
        '''

The function may live in any module under Eval/metrics/ (names starting with "_" excepted): importing the package
imports them all, so nothing else has to list a new metric.

Per-reference metrics (the default) take one prediction and ONE reference and return a float; the scorer
takes the maximum over the record's references, floored at 0 (the LongBench loop), then the mean over
records. Extra record fields (for example ``all_classes``) arrive as keyword arguments, so every metric must
accept ``**record``. The docstring is the metric's card and its ``>>>`` example is run by the tests.

Explainers: a metric may have one, registered next to it with ``@explains("qa_f1")``. It takes the same arguments
and returns a dict of the numbers the score comes from, their "score" (recomputed from those numbers with the
metric's own float operations, so it equals the metric's value exactly) and a one-line "text". Explainers are
read-only companions: the scorer never takes a score from them (Eval/scoring/explain.py).
"""
from __future__ import annotations

import dataclasses
import functools
import inspect
import math
from typing import Callable

from Eval.registry import Registry

METRICS = Registry("metric", discover="Eval.metrics",
                   hint="Add one: a function decorated with @metric in any module of Eval/metrics/.")


@dataclasses.dataclass(frozen=True)
class Metric:
    name: str
    fn: Callable[..., float]
    version: str  # bump when the per-sample values change, so stored results say what produced them
    best: float = 1.0  # the value of a perfect answer ("full marks"); ROUGE's 1e-8 makes it 0.999999995

    def bind(self, args: dict[str, str]) -> "Metric":
        """The metric with the keyword arguments of `args` its function takes (eval.py -S key=value), each
        converted to the type of its default; the others are left to the other metrics. The version records them,
        since they change the values."""
        params = inspect.signature(self.fn).parameters
        kept = {}
        for key, text in args.items():
            if key in params and params[key].kind is inspect.Parameter.KEYWORD_ONLY:
                default = params[key].default
                kind = type(default) if default is not inspect.Parameter.empty and default is not None else str
                kept[key] = (text.lower() in ("1", "true", "yes")) if kind is bool else kind(text)
        if not kept:
            return self
        fn = functools.partial(self.fn, **kept)
        version = f"{self.version}+" + ",".join(f"{k}={v}" for k, v in sorted(kept.items()))
        return dataclasses.replace(self, fn=fn, version=version)

    def takes(self, key: str) -> bool:
        """Whether the metric's function takes `key` as a keyword-only argument (an -S option)."""
        param = inspect.signature(self.fn).parameters.get(key)
        return param is not None and param.kind is inspect.Parameter.KEYWORD_ONLY

    def full_marks(self, value: float) -> bool:
        """Whether `value` is this metric's best, up to float noise."""
        return math.isclose(value, self.best, rel_tol=1e-9) or value > self.best

    def __call__(self, prediction: str, reference: str, **record) -> float:
        return self.fn(prediction, reference, **record)

    def explain(self, prediction: str, reference: str, **record) -> dict | None:
        """The registered explainer's dict for this pair, or None when the metric has none yet."""
        explainer = EXPLAINERS.get(self.name)
        return None if explainer is None else explainer(prediction, reference, **record)


# metric name -> explainer; filled by @explains in the metric's own module, so a Metric found through METRICS
# (whose lookup imports every metric module) already has its explainer here.
EXPLAINERS: dict[str, Callable[..., dict]] = {}


class Zeroed(float):
    """A 0.0 that remembers why: the reference scores some failures (an empty hypothesis in the `rouge`
    package, for example) as 0.0 silently; returning this keeps the value identical while the scorer counts
    and reports how many samples were zeroed and why."""

    reason: str

    def __new__(cls, reason: str) -> "Zeroed":
        value = super().__new__(cls, 0.0)
        value.reason = reason
        return value

    def __repr__(self) -> str:
        return "0.0"


def metric(name: str, *, version: str = "1", best: float = 1.0):
    """Register ``fn`` under ``name``; a second registration of the same name is a bug and raises. ``best`` is
    the value a perfect answer gets, when it is not 1.0."""
    def register(fn: Callable[..., float]) -> Callable[..., float]:
        METRICS.register(name, Metric(name, fn, version, best))
        return fn
    return register


def explains(name: str):
    """Register ``fn`` as the explainer of metric ``name``; a second explainer for one metric raises."""
    def register(fn: Callable[..., dict]) -> Callable[..., dict]:
        if name in EXPLAINERS:
            raise ValueError(f"metric {name!r} has two explainers")
        EXPLAINERS[name] = fn
        return fn
    return register


def get_metric(name: str) -> Metric:
    """Look a metric up by name; an unknown name is a KeyError that names the closest known ones."""
    return METRICS[name]
