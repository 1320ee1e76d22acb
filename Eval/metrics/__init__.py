"""Metrics: one decorated pure function per metric, in any module of this folder; METRICS imports
them all on its first lookup (Eval/metrics/registry.py). Heavy dependencies load on first use."""
from Eval.metrics.registry import METRICS, Metric, metric  # noqa: F401
