"""Metrics over labels, ids and choice letters: classification, retrieval, count, GAOKAO choice, choice match.

Each scores one prediction against ONE reference; `all_classes` arrives from the record. Each has an explainer
beside it (@explains): the classes matched and dropped, the numbers compared, the letters and the rule applied.
"""
from __future__ import annotations

import re

from Eval.metrics.registry import explains, metric

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


def _explain_classes(prediction: str, reference: str, all_classes, quirk: bool) -> dict:
    matched = [c for c in all_classes or [] if c in prediction]
    if quirk:
        kept = list(matched)
        _remove_while_iterating(kept, reference)
    else:
        kept = [c for c in matched if not (c in reference and c != reference)]
    dropped = list(matched)
    for c in kept:  # the matches minus the kept ones, as a multiset, in order
        dropped.remove(c)
    spared = [c for c in kept if c in reference and c != reference]  # left in by the remove-while-iterating skip
    score = 1.0 / len(kept) if reference in kept else 0.0
    out = {"matched": matched, "dropped": dropped, "kept_by_quirk": spared, "counted": kept, "score": score}
    if not all_classes:
        return {**out, "text": "no class list (all_classes): 0"}
    words = [f"classes found in the prediction: {matched or 'none'}"]
    if dropped:
        words.append(f"dropped as part of the reference: {dropped}")
    if spared:
        words.append(f"kept by LongBench's remove-while-iterating skip: {spared}")
    words.append(f"{reference!r} is one of {len(kept)} matches: 1/{len(kept)} = {score:.4g}" if score else
                 f"{reference!r} is not among them: 0")
    return {**out, "text": "; ".join(words)}


@explains("classification")
def explain_classification(prediction: str, reference: str, *, all_classes=None, **record) -> dict:
    """classification's numbers, the quirk shown.

    >>> explain_classification("Other location", "Other location",
    ...                         all_classes=["Other location", "location", "Other"])["kept_by_quirk"]
    ['Other']
    """
    return _explain_classes(prediction, reference, all_classes, quirk=True)


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


@explains("classification_strict")
def explain_classification_strict(prediction: str, reference: str, *, all_classes=None, **record) -> dict:
    return _explain_classes(prediction, reference, all_classes, quirk=False)


def _explain_share(prediction: str, target: str | None, what: str) -> dict:
    numbers = _NUMBER.findall(prediction)
    if target is None:
        return {"numbers": numbers, "target": None, "score": 0.0, "text": f"the reference has no {what}: 0"}
    equal = sum(1 for n in numbers if n == target)
    score = 1.0 * equal / len(numbers) if numbers else 0.0
    text = (f"the prediction has no number (looking for {target}): 0" if not numbers else
            f"{equal} of the prediction's {len(numbers)} numbers {numbers[:12]} equal {target}: {score:.4g}")
    return {"numbers": numbers, "target": target, "equal": equal, "score": score, "text": text}


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


@explains("retrieval")
def explain_retrieval(prediction: str, reference: str, **record) -> dict:
    """retrieval's numbers: those in the prediction and the paragraph id they are compared with.

    >>> explain_retrieval("Paragraph 3, or maybe 12", "Paragraph 3")["text"]
    "1 of the prediction's 2 numbers ['3', '12'] equal 3: 0.5"
    """
    found = _PARAGRAPH_EN.findall(reference)
    return _explain_share(prediction, found[0] if found else None, '"Paragraph N"')


@metric("retrieval_zh", version="longbench-1")
def retrieval_zh(prediction: str, reference: str, **record) -> float:
    """retrieval with the Chinese pattern "段落N" (passage_retrieval_zh).

    >>> retrieval_zh("答案是段落7", "段落7")
    1.0
    """
    return _paragraph_share(_PARAGRAPH_ZH, prediction, reference)


@explains("retrieval_zh")
def explain_retrieval_zh(prediction: str, reference: str, **record) -> dict:
    found = _PARAGRAPH_ZH.findall(reference)
    return _explain_share(prediction, found[0] if found else None, '"段落N"')


@metric("count", version="longbench-1")
def count(prediction: str, reference: str, **record) -> float:
    """LongBench count_score (passage_count): share of numbers in the prediction equal to the reference,
    compared as strings, so "07" is not "7".

    >>> count("There are 7 unique paragraphs", "7"), count("07", "7")
    (1.0, 0.0)
    """
    return _share_equal(prediction, reference)


@explains("count")
def explain_count(prediction: str, reference: str, **record) -> dict:
    return _explain_share(prediction, reference, "count")


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


@explains("gaokao_choice")
def explain_gaokao_choice(prediction: str, reference: str, **record) -> dict:
    """gaokao_choice's letters and the rule that decided.

    >>> explain_gaokao_choice("AB", "ABD")["text"]
    "letters 'AB' against 'ABD': a proper subset of a multiple-choice answer, half credit: 0.5"
    """
    score = gaokao_choice(prediction, reference)  # three plain comparisons: the rule is named, not re-derived
    if score == 1.0:
        rule = "the same letters"
    elif score == 0.5:
        rule = "a proper subset of a multiple-choice answer, half credit"
        if not prediction:  # TinyEval's picker returns "" for a lone letter, and "" is a subset of anything
            rule += " (no letters: the choice_letters step gives '' when exactly one letter occurs)"
    elif len(reference) > 1:
        rule = "a letter the answer lacks, or not fewer letters than it"
    else:
        rule = "single choice, a different letter"
    return {"letters": prediction, "reference": reference, "rule": rule, "score": score,
            "text": f"letters {prediction!r} against {reference!r}: {rule}: {score:g}"}


@metric("choice_match", version="longbench-v2-1")
def choice_match(prediction: str, reference: str, **record) -> float:
    """LongBench v2's judge (pred == answer) on the letter(s) an extraction step picked, e.g.
    `longbench_v2_answer` or `choice_answer`: 1.0 when they equal the reference exactly, else 0.0. An output
    with no letter never reaches the metric (the extraction gave None: it scores 0, counted as unparsed).

    >>> choice_match("B", "B"), choice_match("C", "B"), choice_match("AC", "AC")
    (1.0, 0.0, 1.0)
    """
    return 1.0 if prediction == reference else 0.0


@explains("choice_match")
def explain_choice_match(prediction: str, reference: str, **record) -> dict:
    score = choice_match(prediction, reference)
    verb = "equal" if score else "differ from"
    return {"letters": prediction, "reference": reference, "rule": "exact match", "score": score,
            "text": f"extracted {prediction!r} {verb} the answer {reference!r}: {score:g}"}
