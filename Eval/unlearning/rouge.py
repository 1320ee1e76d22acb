"""ROUGE as open-unlearning computes it: Google's `rouge-score` package, imported only when a ROUGE runs.

Usage:
    from Eval.unlearning.rouge import rouge_scores
    rouge_scores(generation="Paris is the capital", ground_truth="Paris")   # rouge1_recall, rougeL_f1, rougeL_recall

RougeScorer(["rouge1", "rougeL"], use_stemmer=True).score(target=ground_truth, prediction=generation); TOFU reports
rougeL_recall, MUSE rougeL_f1. Not the `rouge` package that Eval/metrics/rouge.py reproduces for LongBench: each
benchmark uses its own reference implementation.
"""
from __future__ import annotations

import functools


@functools.lru_cache(maxsize=1)
def _scorer():
    try:
        from rouge_score import rouge_scorer  # imports nltk (about 2 s): only when a ROUGE is computed
    except ImportError as err:  # pragma: no cover - requirements.txt installs it
        raise ImportError("TOFU / MUSE ROUGE needs Google's `rouge-score` package: pip install rouge-score") \
            from err
    return rouge_scorer.RougeScorer(["rouge1", "rougeL"], use_stemmer=True)


def rouge_scores(generation: str, ground_truth: str) -> dict:
    """The three ROUGE figures open-unlearning stores per sample.

    >>> rouge_scores(generation="Paris is the capital", ground_truth="Paris")["rougeL_f1"]
    0.4
    """
    scores = _scorer().score(target=ground_truth, prediction=generation)
    return {"rouge1_recall": scores["rouge1"].recall, "rougeL_f1": scores["rougeL"].fmeasure,
            "rougeL_recall": scores["rougeL"].recall}
