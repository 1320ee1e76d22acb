"""BERGEN's answer metrics with BERGEN's normalisation: match (M), exact_match (EM), f1, precision,
recall and recall_char3gram, each maximised over the references on its own (docs/rag.md).
BERGEN drops a/an/the with the `regex` package, not Python's `re`: their word boundaries differ
next to combining marks, so BERGEN's metrics use BERGEN's module and LongBench's use LongBench's.

Usage:
    python eval.py --pred-dir DIR --metrics exact_match,match    # on any prediction files
"""
from __future__ import annotations

import functools

from Eval.metrics.qa import (explain_overlap, normalize_en, overlap_fields, ratio, shared_count,
                             token_f1)
from Eval.metrics.registry import explains, metric


@functools.cache
def _bergen_articles():
    import regex  # BERGEN's own module (a dependency of nltk)

    return regex.compile(r"\b(a|an|the)\b")


def normalize_bergen(text: str) -> str:
    """BERGEN's normalize(): normalize_en with the `regex` package's word boundary."""
    return normalize_en(text, _bergen_articles())


def bergen_words(text: str) -> list[str]:
    return normalize_bergen(text).split()


def share_found(tokens: list[str], other: list[str]) -> float:
    """The share of `tokens` also in `other` (multisets): recall, or precision."""
    same = shared_count(tokens, other)
    return 0.0 if same == 0 else 1.0 * same / len(tokens)


@metric("exact_match", version="bergen-1")
def exact_match(prediction: str, reference: str, **record) -> float:
    """1 if the normalised prediction equals the normalised reference (BERGEN's EM).

    >>> exact_match("The Paris.", "paris"), exact_match("Paris, France", "Paris")
    (1.0, 0.0)
    """
    return float(normalize_bergen(prediction) == normalize_bergen(reference))


@metric("match", version="bergen-1")
def match(prediction: str, reference: str, **record) -> float:
    """1 if the normalised reference occurs inside the normalised prediction (BERGEN's M), so
    "paris" also matches "parisian".

    >>> match("It is Paris, France.", "paris"), match("London", "Paris")
    (1.0, 0.0)
    """
    return float(normalize_bergen(reference) in normalize_bergen(prediction))


def _explain_normalised(prediction: str, reference: str, *, inside: bool, **record) -> dict:
    """exact_match's (not `inside`) or match's comparison of the two normalised texts."""
    pred, ref = normalize_bergen(prediction), normalize_bergen(reference)
    score = float(ref in pred if inside else pred == ref)
    if inside:
        where = "is inside" if score else "is not inside"
        text = f"normalised reference {ref!r} {where} the normalised prediction: {score:g}"
    else:
        text = f"normalised {pred!r} {'equals' if score else 'differs from'} {ref!r}: {score:g}"
    return {"prediction_normalised": pred, "reference_normalised": ref, "score": score,
            "text": text}


@metric("recall", version="bergen-1")
def recall(prediction: str, reference: str, **record) -> float:
    """Share of the reference's normalised words found in the prediction (multiset overlap;
    BERGEN's Recall).

    >>> recall("Paris is the capital", "capital of France")
    0.3333333333333333
    """
    return share_found(bergen_words(reference), bergen_words(prediction))


def explain_recall(prediction: list[str], reference: list[str], *, unit: str) -> dict:
    """recall's or recall_char3gram's numbers (`unit`: what a token is): the overlap, then R."""
    out, listed = overlap_fields(prediction, reference)
    same = out["shared_count"]
    score = share_found(reference, prediction)
    text = (f"no {unit} of the reference in the prediction: R = 0" if same == 0 else
            f"{same} of the reference's {unit}s found ({listed}): "
            f"R = {ratio(same, len(reference))}")
    return {**out, "recall": score, "score": score, "text": text, "unit": unit}


@metric("f1", version="bergen-1")
def f1(prediction: str, reference: str, **record) -> float:
    """BERGEN's F1: word F1 after BERGEN's normalisation (LongBench's is qa_f1).

    >>> f1("The Eiffel Tower, Paris", "Paris")
    0.5
    """
    return token_f1(bergen_words(prediction), bergen_words(reference))


@metric("precision", version="bergen-1")
def precision(prediction: str, reference: str, **record) -> float:
    """BERGEN's Precision: the share of the prediction's normalised words found in the reference.

    >>> precision("Paris is the capital", "capital of France")
    0.3333333333333333
    """
    return share_found(bergen_words(prediction), bergen_words(reference))


@explains("precision", tokens=bergen_words)
def explain_precision(prediction: list[str], reference: list[str]) -> dict:
    """The overlap, then P alone."""
    out = explain_overlap(prediction, reference)
    same, words = out["shared_count"], len(prediction)
    text = f"{same} of the prediction's words are in the reference: P = {ratio(same, words)}"
    return {**out, "score": share_found(prediction, reference), "text": text}


def char3grams(text: str) -> list[str]:
    """Character 3-grams of each word; words shorter than 3 characters are kept whole."""
    grams: list[str] = []
    for word in text.split():
        grams.extend([word[i:i + 3] for i in range(len(word) - 2)] if len(word) >= 3 else [word])
    return grams


def bergen_char3grams(text: str) -> list[str]:
    return char3grams(normalize_bergen(text))


@metric("recall_char3gram", version="bergen-1")
def recall_char3gram(prediction: str, reference: str, **record) -> float:
    """Recall over character 3-grams of the normalised words: partial credit for near-misses.

    >>> recall_char3gram("Pariss", "Paris")
    1.0
    """
    return share_found(bergen_char3grams(reference), bergen_char3grams(prediction))


explains("exact_match")(functools.partial(_explain_normalised, inside=False))
explains("match")(functools.partial(_explain_normalised, inside=True))
explains("f1", tokens=bergen_words)(explain_overlap)
explains("recall", tokens=bergen_words)(functools.partial(explain_recall, unit="word"))
explains("recall_char3gram", tokens=bergen_char3grams)(
    functools.partial(explain_recall, unit="3-gram"))
