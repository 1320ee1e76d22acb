"""Metrics (the scoring stage): one decorated pure function per metric, in any module of this folder.

METRICS (Eval/metrics/registry.py) imports every module here on its first lookup, which registers each metric
where it is defined; nothing lists them. Modules whose name starts with "_" are private. Importing stays cheap:
the metric modules load their heavy dependency (jieba) on first use only.
"""
from Eval.metrics.registry import METRICS, Metric, Zeroed, explains, get_metric, metric  # noqa: F401
