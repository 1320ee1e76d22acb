"""Metrics: importing this package imports every module in this folder, which registers each metric in METRICS.

A new metric is one decorated function in any module here (see registry.py for the contract); nothing else
lists it. Modules whose name starts with "_" are private and not imported. Importing stays cheap because the
metric modules load their heavy dependencies (jieba, nltk) on first use only.
"""
import importlib
import pkgutil

from Eval.metrics.registry import METRICS, Metric, Zeroed, get_metric, metric  # noqa: F401


def _import_metric_modules() -> None:
    for module in pkgutil.iter_modules(__path__):
        if not module.name.startswith("_"):
            importlib.import_module(f"{__name__}.{module.name}")


_import_metric_modules()
