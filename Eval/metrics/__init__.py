"""Metrics: importing this package registers every metric in METRICS (see registry.py for the contract)."""
from Eval.metrics import code_bleu, labels, qa, rouge  # noqa: F401  (imports fill the registry)
from Eval.metrics.registry import METRICS, Metric, Zeroed, get_metric, metric  # noqa: F401
