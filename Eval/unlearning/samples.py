"""The leaf kinds (open-unlearning's leaf handlers): score record -> per-sample entry -> result.

Usage:
    leaf_result("probability", {"0": KINDS["probability"][0](record, "answer")})
"""
from __future__ import annotations

import functools
import math

from Eval.records import normalize_answers
from Eval.unlearning import stats


class Missing(ValueError):
    """A leaf's input is absent (e.g. a record lacks "gradnorm['answer']")."""


def _field(record: dict, field: str, key: str):
    saved = record.get(field)
    if not isinstance(saved, dict) or key not in saved:
        raise Missing(f"{field}[{key!r}]")
    return saved[key]


def options(record: dict, key: str) -> list[dict]:
    saved = _field(record, "logprobs", key)  # outside the try: Missing is a ValueError
    try:
        return [stats.check_token_stats(ts) for ts in saved]
    except (ValueError, TypeError) as err:
        raise ValueError(f"logprobs[{key!r}]: {err}") from None


def per_option(fn):
    """fn over every option: one option gives scalars, several give lists (multi-answer rows)."""
    def sample(record: dict, key: str) -> dict:
        values = [fn(ts) for ts in options(record, key)]
        if len(values) == 1:
            return values[0]
        return {field: [v[field] for v in values] for field in values[0]}
    return sample


def first_option(fn):
    return lambda record, key: {"score": fn(options(record, key)[0])}


def confidence_ordered(record: dict, key: str) -> dict:
    _field(record, "confidence_ordered_probs", key)  # other models' records: the leaf is skipped
    return per_option(stats.confidence_ordered)(record, key)


@functools.lru_cache(maxsize=1)
def _rouge_scorer():
    from rouge_score import rouge_scorer  # Google's rouge-score; imports nltk (about 2 s)

    return rouge_scorer.RougeScorer(["rouge1", "rougeL"], use_stemmer=True)


def rouge(record: dict, key: str) -> dict:
    """open-unlearning's ROUGE (Google's rouge-score, stemmed) of `pred` against `answers[0]`."""
    for field in ("pred", "answers"):
        if field not in record:
            raise Missing(field)
    if "finish_reason" not in record and record["pred"] == "":  # inference.py's --no-generate
        raise Missing("generation")
    generation, truth = record["pred"], normalize_answers(record["answers"])[0]
    if not isinstance(generation, str):
        raise ValueError("field 'pred' (the generation) must be a string")
    scores = _rouge_scorer().score(target=truth, prediction=generation)
    return {"rouge1_recall": scores["rouge1"].recall, "rougeL_f1": scores["rougeL"].fmeasure,
            "rougeL_recall": scores["rougeL"].recall, "input": str(record.get("input", "")),
            "ground_truth": truth, "generation": generation}


def gradnorm(record: dict, key: str) -> dict:
    score = _field(record, "gradnorm", key)
    return {"score": None if score is None else float(score)}  # null (< 2 labels): left out


def reference(record: dict, key: str) -> dict:
    """Target avg_loss minus the reference model's (saved at inference) on the same answer."""
    target = stats.avg_loss(options(record, key)[0])
    ref = _field(record, "reference_avg_loss", key)
    return {"score": None if ref is None else float(target - float(ref))}


PROB, SCORE = ("prob", "avg_loss"), ("score",)
ROUGE = ("rouge1_recall", "rougeL_f1", "rougeL_recall")
KINDS = {  # kind: (sample function, averaged field, fields of a published entry)
    "probability": (per_option(stats.probability), "prob", PROB),
    "confidence_ordered": (confidence_ordered, "prob", PROB),
    "rougeL_recall": (rouge, "rougeL_recall", ROUGE),   # TOFU's ROUGE
    "rougeL_f1": (rouge, "rougeL_f1", ROUGE),           # MUSE's
    "exact_memorization": (first_option(stats.exact_memorization), "score", SCORE),
    "extraction_strength": (first_option(stats.extraction_strength), "score", SCORE),
    "classifier_prob": (None, "score", SCORE),  # gibberish: a classifier model; from logs only
    "mia_loss": (first_option(stats.avg_loss), "score", SCORE),
    "mia_zlib": (first_option(stats.zlib_score), "score", SCORE),
    "mia_min_k": (first_option(stats.min_k_score), "score", SCORE),  # k = 0.4
    "mia_min_k_plus_plus": (first_option(stats.min_k_plus_plus_score), "score", SCORE),
    "mia_gradnorm": (gradnorm, "score", SCORE),
    "mia_reference": (reference, "score", SCORE),
}
# The scores the reference held, and so averaged, in float32.
FLOAT32 = ("mia_min_k", "mia_min_k_plus_plus", "mia_gradnorm")


def values(value_by_index: dict, field: str) -> list:
    # The reference drops only None values before averaging (NaN stays in and propagates).
    return [e[field] for e in value_by_index.values() if e is not None and e.get(field) is not None]


def leaf_result(kind: str, samples) -> dict:
    """A leaf's result: the mean over samples; an MIA kind's: the AUC of (forget, holdout) samples.

    >>> forget, holdout = {"0": {"score": 0.25}, "1": {"score": 0.5}}, {"0": {"score": 0.5}}
    >>> leaf_result("mia_loss", (forget, holdout))["auc"]
    0.75
    """
    if not kind.startswith("mia_"):
        agg = stats.mean(values(samples, KINDS[kind][1]))
        return {"agg_value": agg, "value_by_index": samples}
    scores, result = [values(side, "score") for side in samples], {}
    for name, side, side_scores in zip(("forget", "holdout"), samples, scores):
        m = stats.float32_mean(side_scores) if kind in FLOAT32 else None
        result[name] = {"agg_value": stats.mean(side_scores) if m is None else m,
                        "value_by_index": side}
    auc = stats.roc_auc(*scores)
    return {**result, "auc": auc, "agg_value": auc}


def explain_leaf(metric: str, sample: dict) -> dict:
    """eval.py explain: the numbers behind a leaf's per-sample entry (a probability, a ROUGE)."""
    if "avg_loss" in sample and "prob" in sample:
        losses = sample["avg_loss"]
        losses = losses if isinstance(losses, list) else [losses]
        probs = [math.exp(-x) for x in losses]
        parts = ", ".join(f"exp(-{x:.4f}) = {p:.4g}" for x, p in zip(losses, probs))
        return {"avg_loss": sample["avg_loss"], "prob": sample["prob"], "recomputed_prob": probs,
                "text": "prob = exp(-avg_loss), avg_loss the mean negative log-probability of the "
                        f"answer tokens: {parts}"}
    scores = {k: v for k, v in sample.items() if k.startswith("rouge")}
    if scores:
        generation, truth = (str(sample.get(k))[:80] for k in ("generation", "ground_truth"))
        text = ", ".join(f"{k} = {v:.4g}" for k, v in scores.items())
        return {**scores, "ground_truth": sample.get("ground_truth"),
                "generation": sample.get("generation"), "text": f"{text} (rouge_score, "
                f"stemmed) of the generation {generation!r} against {truth!r}"}
    return {"text": f"{metric}: no per-sample explanation for this metric yet; its value is "
                    f"{sample}"}
