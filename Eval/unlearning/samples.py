"""Per-record sample functions: one saved score record -> one `value_by_index` entry.

Usage:
    from Eval.unlearning.samples import probability_sample
    probability_sample({"index": 0, "logprobs": {"answer": [{"logprobs": [-0.1, -0.2]}]}}, "answer")
    # {"prob": 0.8607..., "avg_loss": 0.15000000000000002}

Each function takes (record, key, **args), reads only the fields named in its handler's `reads` (see
Eval/unlearning/handlers.py and the record layout in Eval/unlearning/suites.py) and raises ValueError naming
the field when the record does not hold what it needs; the caller adds the file and line.
"""
from __future__ import annotations

import numbers

from Eval.records import normalize_answers
from Eval.unlearning import stats
from Eval.unlearning.rouge import rouge_scores


def options(record: dict, key: str) -> list[dict]:
    """The record's TokenStats list for answer `key` (one per answer option), each checked."""
    saved = record.get("logprobs")
    if not isinstance(saved, dict) or key not in saved:
        raise ValueError(f"no logprobs[{key!r}] in this record")
    opts = saved[key]
    if not isinstance(opts, list) or not opts:
        raise ValueError(f"logprobs[{key!r}] must be a non-empty list of TokenStats, one per answer option")
    try:
        return [stats.check_token_stats(ts) for ts in opts]
    except ValueError as err:
        raise ValueError(f"logprobs[{key!r}]: {err}") from None


def first_option(record: dict, key: str) -> dict:
    # Token-wise and MIA metrics read a single answer ("answer" has one option in every TOFU / MUSE split).
    return options(record, key)[0]


def per_option(record: dict, key: str, fn) -> dict:
    """fn over every option; one option gives scalars, several give lists (the reference's multi-answer rows)."""
    values = [fn(ts) for ts in options(record, key)]
    if len(values) == 1:
        return values[0]
    return {field: [v[field] for v in values] for field in values[0]}


def _number(record: dict, field: str, key: str) -> float | None:
    """record[field][key] as a float; null stays None (the inference stage writes null where the number does
    not exist, e.g. GradNorm of an answer with fewer than two labels): that sample is left out of the MIA."""
    saved = record.get(field)
    value = saved.get(key) if isinstance(saved, dict) else None
    if value is None and isinstance(saved, dict) and key in saved:
        return None
    if not isinstance(value, numbers.Real) or isinstance(value, bool):
        raise ValueError(f"{field}[{key!r}] must be a number (or null)")
    return float(value)


def probability_sample(record: dict, key: str) -> dict:
    return per_option(record, key, stats.probability)


def confidence_ordered_sample(record: dict, key: str) -> dict:
    empty = {"prob": None, "avg_loss": None, "confidence_ordered_probs": []}
    return per_option(record, key, lambda ts: stats.confidence_ordered(ts) or empty)


def rouge_sample(record: dict, key: str) -> dict:
    """ROUGE of `pred` against the first of `answers`; `input` (the prompt, optional) is kept for reading."""
    generation, answers = record.get("pred"), record.get("answers")
    if not isinstance(generation, str):
        raise ValueError("field 'pred' (the generation) must be a string")
    answers = normalize_answers(answers) if isinstance(answers, (str, list)) else []
    if not answers or not isinstance(answers[0], str):
        raise ValueError("field 'answers' must hold the ground-truth string (a list or one string)")
    ground_truth = answers[0]
    return {**rouge_scores(generation, ground_truth), "input": str(record.get("input", "")),
            "ground_truth": ground_truth, "generation": generation}


def exact_memorization_sample(record: dict, key: str) -> dict:
    return {"score": stats.exact_memorization(first_option(record, key))}


def extraction_strength_sample(record: dict, key: str) -> dict:
    return {"score": stats.extraction_strength(first_option(record, key))}


def loss_sample(record: dict, key: str) -> dict:
    return {"score": float(stats.avg_loss(first_option(record, key)))}


def zlib_sample(record: dict, key: str) -> dict:
    return {"score": float(stats.zlib_score(first_option(record, key)))}


def min_k_sample(record: dict, key: str, k: float = 0.4) -> dict:
    return {"score": stats.min_k_score(first_option(record, key), k)}


def min_k_plus_plus_sample(record: dict, key: str, k: float = 0.4) -> dict:
    return {"score": stats.min_k_plus_plus_score(first_option(record, key), k)}


def gradnorm_sample(record: dict, key: str) -> dict:
    # Needs gradients, so the inference stage computes it and saves the number; we only read it.
    return {"score": _number(record, "gradnorm", key)}


def reference_sample(record: dict, key: str) -> dict:
    # The reference model's avg_loss on the same answer is saved by the inference stage (a second model).
    target = stats.avg_loss(first_option(record, key))
    reference = _number(record, "reference_avg_loss", key)
    return {"score": None if reference is None else float(target - reference)}
