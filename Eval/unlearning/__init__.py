"""TOFU / MUSE unlearning metrics from saved log-probabilities, scored as open-unlearning scores them.

Usage:
    python eval.py --unlearning tofu --pred-dir DIR [--retain-logs RETAIN/TOFU_EVAL.json]
    python eval.py --from-open-unlearning PATH/TOFU_EVAL.json [--retain-logs PATH] [--out-dir DIR]

    from Eval.unlearning import score_records, reaggregate, HANDLERS
    outcome = score_records("tofu", Path("pred/my-model"))      # our score records -> TOFU_EVAL / SUMMARY
    outcome.summary["model_utility"]

Modules: stats (per-sample statistics of one TokenStats), samples (one record -> one per-sample entry),
aggregate (means, truth ratio, AUC, KS, privleak, hmean), rouge (Google rouge-score), handlers + composites
(the handler registry), suites (TOFU / MUSE composition and the record layout), engine (memoised resolution),
files (reading and writing), evaluate (eval.py's two modes), inference (the inference side: score records). Torch-free: numpy and scipy only (rouge-score when a
ROUGE is computed from records).
"""
import importlib

# The public names load on first use: eval.py's LongBench path imports only `suites` (to recognise score-record
# files) and should not pay for numpy. Importing `composites` first fills the handler registry.
_API = {"HANDLERS": "handlers", "handler": "handlers", "SUITES": "suites", "Outcome": "evaluate",
        "reaggregate": "evaluate", "score_records": "evaluate"}
__all__ = sorted(_API)


def __getattr__(name: str):
    if name not in _API:
        raise AttributeError(f"module 'Eval.unlearning' has no attribute {name!r}")
    importlib.import_module("Eval.unlearning.composites")
    return getattr(importlib.import_module(f"Eval.unlearning.{_API[name]}"), name)
