"""Metrics over labels, ids and choice letters: classification, retrieval, count, GAOKAO choice, choice match.

Each scores one prediction against ONE reference; `all_classes` arrives from the record.
"""
from __future__ import annotations

import re

from Eval.metrics.registry import metric

_PARAGRAPH_EN = re.compile(r"Paragraph (\d+)")
_PARAGRAPH_ZH = re.compile(r"段落(\d+)")
_NUMBER = re.compile(r"\d+")


@metric("classification", version="longbench-1")
def classification(prediction: str, reference: str, *, all_classes=None, **record) -> float:
    """LongBench classification_score (trec, lsht), quirk included.

    Matches are the classes that occur (case-sensitive substring) in the prediction. Matches that are a
    substring of the reference but not equal to it are then dropped, but LongBench removes them from the
    list while iterating over it, so the element after each removal is skipped. Score = 1/len(matches) if
    the reference is among the matches, else 0. The strict variant below filters properly.

    >>> classes = ["Other location", "location", "Other"]
    >>> classification("Other location", "Other location", all_classes=classes)
    0.5
    >>> classification("It is a Human being", "Human", all_classes=["Human", "Entity"])
    1.0
    """
    matches = [c for c in all_classes or [] if c in prediction]
    _remove_while_iterating(matches, reference)
    return 1.0 / len(matches) if reference in matches else 0.0


def _remove_while_iterating(matches: list[str], reference: str) -> None:
    # Reproduces `for t in lst: if ...: lst.remove(t)`: list.remove drops the FIRST equal element and the
    # iterator index then moves past the element that slid into the removed slot.
    i = 0
    while i < len(matches):
        term = matches[i]
        if term in reference and term != reference:
            matches.remove(term)
        i += 1


@metric("classification_strict", version="1")
def classification_strict(prediction: str, reference: str, *, all_classes=None, **record) -> float:
    """classification without the remove-while-iterating quirk: every match that is a proper substring
    of the reference is dropped.

    >>> classification_strict("Other location", "Other location",
    ...                       all_classes=["Other location", "location", "Other"])
    1.0
    """
    matches = [c for c in all_classes or [] if c in prediction]
    matches = [c for c in matches if not (c in reference and c != reference)]
    return 1.0 / len(matches) if reference in matches else 0.0


def _share_equal(prediction: str, target: str) -> float:
    numbers = _NUMBER.findall(prediction)
    if not numbers:
        return 0.0
    return 1.0 * sum(1 for n in numbers if n == target) / len(numbers)


def _paragraph_share(pattern: re.Pattern, prediction: str, reference: str) -> float:
    found = pattern.findall(reference)
    return _share_equal(prediction, found[0]) if found else 0.0


@metric("retrieval", version="longbench-1")
def retrieval(prediction: str, reference: str, **record) -> float:
    """LongBench retrieval_score (passage_retrieval_en): the id in the reference's first "Paragraph N",
    scored as the share of numbers in the prediction equal to it (as strings).

    >>> retrieval("Paragraph 3, or maybe 12", "Paragraph 3")
    0.5
    """
    return _paragraph_share(_PARAGRAPH_EN, prediction, reference)


@metric("retrieval_zh", version="longbench-1")
def retrieval_zh(prediction: str, reference: str, **record) -> float:
    """retrieval with the Chinese pattern "段落N" (passage_retrieval_zh).

    >>> retrieval_zh("答案是段落7", "段落7")
    1.0
    """
    return _paragraph_share(_PARAGRAPH_ZH, prediction, reference)


@metric("count", version="longbench-1")
def count(prediction: str, reference: str, **record) -> float:
    """LongBench count_score (passage_count): share of numbers in the prediction equal to the reference,
    compared as strings, so "07" is not "7".

    >>> count("There are 7 unique paragraphs", "7"), count("07", "7")
    (1.0, 0.0)
    """
    return _share_equal(prediction, reference)


@metric("gaokao_choice", version="tinyeval-1")
def gaokao_choice(prediction: str, reference: str, **record) -> float:
    """TinyEval's GAOKAO_math rule on letters already picked by the `choice_letters` extraction.

    Single choice (one-letter reference): 1 if equal. Multiple choice: 1 if the letter sets are equal,
    0.5 if the prediction is a proper subset of the reference (including the empty string, which TinyEval's
    picker returns when it finds exactly one letter), else 0.

    >>> gaokao_choice("C", "C"), gaokao_choice("AB", "ABD"), gaokao_choice("AE", "ABD")
    (1.0, 0.5, 0.0)
    """
    if prediction == reference:
        return 1.0
    if len(reference) > 1 and len(prediction) < len(reference) and all(c in reference for c in prediction):
        return 0.5
    return 0.0


@metric("choice_match", version="longbench-v2-1")
def choice_match(prediction: str, reference: str, **record) -> float:
    """LongBench v2's judge (pred == answer) on the letter(s) an extraction step picked, e.g.
    `longbench_v2_answer` or `choice_answer`: 1.0 when they equal the reference exactly, else 0.0. An output
    with no letter never reaches the metric (the extraction gave None: it scores 0, counted as unparsed).

    >>> choice_match("B", "B"), choice_match("C", "B"), choice_match("AC", "AC")
    (1.0, 0.0, 1.0)
    """
    return 1.0 if prediction == reference else 0.0
