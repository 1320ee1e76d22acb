"""TOFU / MUSE unlearning metrics from saved log-probabilities, scored as open-unlearning scores them.

Usage:
    python eval.py --unlearning tofu --pred-dir DIR [--retain-logs RETAIN/TOFU_EVAL.json]
    python eval.py --from-open-unlearning PATH/TOFU_EVAL.json [--retain-logs PATH] [--out-dir DIR]

    from Eval.unlearning import score_records, reaggregate, HANDLERS
    outcome = score_records("tofu", Path("pred/my-model"))      # our score records -> TOFU_EVAL / SUMMARY
    outcome.summary["model_utility"]

Modules, torch-free (numpy and scipy; rouge-score only when a ROUGE is computed from records):
    splits      the one TOFU / MUSE split table both stages read (data file -> score-record file)
    suites      which handler each metric name runs, on what (open-unlearning's composition)
    handlers, composites   the handler registry; stats, samples, aggregate, rouge   the numbers themselves
    engine      memoised resolution of a suite; files   reading and writing; evaluate   eval.py's two modes
    confidence  confidence-ordered probability for diffusion LLMs
inference.py is the inference side (runs a BaseLLM to write the score records); only the inference stage imports it.
"""
import importlib

# The public names load on first use, so that importing one small module (splits, confidence) does not pay for
# numpy and scipy. Importing `composites` first fills the handler registry.
_API = {"HANDLERS": "handlers", "handler": "handlers", "SUITES": "suites", "Outcome": "evaluate",
        "reaggregate": "evaluate", "score_records": "evaluate"}
__all__ = sorted(_API)


def __getattr__(name: str):
    if name not in _API:
        raise AttributeError(f"module 'Eval.unlearning' has no attribute {name!r}")
    importlib.import_module("Eval.unlearning.composites")
    return getattr(importlib.import_module(f"Eval.unlearning.{_API[name]}"), name)
