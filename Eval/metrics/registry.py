"""The metric registry: one decorated pure function per metric, in any module of Eval/metrics/;
it takes one prediction, ONE reference and the record's other fields as keywords. An explainer
returns the numbers behind a score, the "score" recomputed the metric's way, and a "text".

Usage:
    @metric("qa_f1", version="longbench-1")
    def qa_f1(prediction: str, reference: str, **record) -> float: ...   # its card: a >>> example
"""
from __future__ import annotations

import dataclasses
import functools
import inspect
from typing import Callable

from Eval.registry import Registry

METRICS = Registry("metric", discover="Eval.metrics",
                   hint="Add one: a function decorated with @metric in any module "
                        "of Eval/metrics/.")


@dataclasses.dataclass(frozen=True)
class Metric:
    name: str
    fn: Callable[..., float]
    version: str  # bump when the per-sample values change: stored results say what produced them
    best: float = 1.0  # a perfect answer's value; ROUGE's 1e-8 makes it 0.999999995
    per_query: bool = False  # a ranking metric: fn(records) -> a value or None per record
    files: tuple[str, ...] = ()  # -S keys naming a file, read from where eval.py runs

    def bind(self, args: dict[str, str]) -> "Metric":
        """The metric with those of `args` (eval.py -S) it takes, typed as their defaults; the
        version records them."""
        params = inspect.signature(self.fn).parameters
        kept = {}
        for key, text in args.items():
            if self.takes(key):
                default = params[key].default
                kind = str if default in (None, inspect.Parameter.empty) else type(default)
                kept[key] = (text.lower() in ("1", "true", "yes")) if kind is bool else kind(text)
        if not kept:
            return self
        fn = functools.partial(self.fn, **kept)
        version = f"{self.version}+" + ",".join(f"{k}={v}" for k, v in sorted(kept.items()))
        return dataclasses.replace(self, fn=fn, version=version)

    def takes(self, key: str) -> bool:
        """Whether the function takes `key` as a keyword-only argument (an -S option)."""
        param = inspect.signature(self.fn).parameters.get(key)
        return param is not None and param.kind is inspect.Parameter.KEYWORD_ONLY

    def __call__(self, prediction: str, reference: str, **record) -> float:
        return self.fn(prediction, reference, **record)

    def explain(self, prediction: str, reference: str, **record) -> dict | None:
        explainer = EXPLAINERS.get(self.name)
        return None if explainer is None else explainer(prediction, reference, **record)


EXPLAINERS: dict[str, Callable[..., dict]] = {}


class Zeroed(float):
    """A 0.0 that remembers why: the reference scores some failures (the `rouge` package on an
    empty text) 0.0 silently; the scorer reports what was zeroed and why."""

    reason: str

    def __new__(cls, reason: str) -> "Zeroed":
        value = super().__new__(cls, 0.0)
        value.reason = reason
        return value

    def __repr__(self) -> str:
        return "0.0"


def metric(name: str, *, version: str = "1", best: float = 1.0):
    def register(fn: Callable[..., float]) -> Callable[..., float]:
        METRICS.register(name, Metric(name, fn, version, best))
        return fn
    return register


def explains(name: str, tokens: Callable[[str], object] | None = None):
    """Register the explainer of metric `name`; with `tokens`, it gets both texts' tokens only."""
    def register(fn: Callable[..., dict]) -> Callable[..., dict]:
        if name in EXPLAINERS:
            raise ValueError(f"metric {name!r} has two explainers")
        EXPLAINERS[name] = fn if tokens is None else \
            lambda prediction, reference, **record: fn(tokens(prediction), tokens(reference))
        return fn
    return register

