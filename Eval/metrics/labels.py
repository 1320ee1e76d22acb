"""Metrics over labels, ids and choice letters: classification, retrieval, count, GAOKAO choice,
choice match; the explainers show the classes matched and dropped, the numbers, the letters."""
from __future__ import annotations

import re
from functools import partial

from Eval.metrics.registry import explains, metric

_PARAGRAPH_EN = re.compile(r"Paragraph (\d+)")
_PARAGRAPH_ZH = re.compile(r"段落(\d+)")
_NUMBER = re.compile(r"\d+")


def _counted(prediction: str, reference: str, all_classes, quirk: bool) -> tuple[list, list, float]:
    """(the classes in the prediction, those counted: parts of the reference dropped, the score)."""
    matched = [c for c in all_classes or [] if c in prediction]
    kept = list(matched)
    for c in kept if quirk else matched:  # LongBench iterates over the list it removes from,
        if c in reference and c != reference:  # skipping the element after each removal
            kept.remove(c)
    return matched, kept, 1.0 / len(kept) if reference in kept else 0.0


@metric("classification", version="longbench-1")
def classification(prediction: str, reference: str, *, all_classes=None, **record) -> float:
    """LongBench classification_score (trec, lsht): the classes in the prediction (case-sensitive)
    minus those that are a proper substring of the reference, removed while iterating over the list
    (so the element after each removal is skipped); 1/len(matches) if the reference is one.

    >>> classes = ["Other location", "location", "Other"]
    >>> classification("Other location", "Other location", all_classes=classes)
    0.5
    >>> classification("It is a Human being", "Human", all_classes=["Human", "Entity"])
    1.0
    """
    return _counted(prediction, reference, all_classes, quirk=True)[2]


def _explain_classes(prediction: str, reference: str, *, all_classes=None, quirk: bool,
                     **record) -> dict:
    matched, kept, score = _counted(prediction, reference, all_classes, quirk)
    dropped = list(matched)
    for c in kept:  # the matches minus the kept ones, as a multiset, in order
        dropped.remove(c)
    spared = [c for c in kept if c in reference and c != reference]  # left in by the skip
    out = {"matched": matched, "dropped": dropped, "kept_by_quirk": spared, "counted": kept,
           "score": score}
    if not all_classes:
        return {**out, "text": "no class list (all_classes): 0"}
    words = [f"classes found in the prediction: {matched or 'none'}"]
    if dropped:
        words.append(f"dropped as part of the reference: {dropped}")
    if spared:
        words.append(f"kept by LongBench's remove-while-iterating skip: {spared}")
    words.append(f"{reference!r} is one of {len(kept)} matches: 1/{len(kept)} = {score:.4g}"
                 if score else f"{reference!r} is not among them: 0")
    return {**out, "text": "; ".join(words)}


@metric("classification_strict", version="1")
def classification_strict(prediction: str, reference: str, *, all_classes=None, **record) -> float:
    """classification without the remove-while-iterating quirk: every match that is a proper
    substring of the reference is dropped.

    >>> classification_strict("Other location", "Other location",
    ...                       all_classes=["Other location", "location", "Other"])
    1.0
    """
    return _counted(prediction, reference, all_classes, quirk=False)[2]


def _share_equal(prediction: str, reference: str, pattern: re.Pattern | None = None) -> tuple:
    """(the prediction's numbers, the reference or the id `pattern` finds in it, how many of the
    numbers equal it, their share)."""
    target = reference
    if pattern is not None:
        found = pattern.search(reference)
        target = found.group(1) if found else None
    numbers = _NUMBER.findall(prediction)
    equal = numbers.count(target)
    return numbers, target, equal, 1.0 * equal / len(numbers) if numbers else 0.0


def _explain_share(prediction: str, reference: str, *, what: str, pattern: re.Pattern | None = None,
                   **record) -> dict:
    numbers, target, equal, score = _share_equal(prediction, reference, pattern)
    if target is None:
        return {"numbers": numbers, "target": None, "score": 0.0,
                "text": f"the reference has no {what}: 0"}
    text = (f"the prediction has no number (looking for {target}): 0" if not numbers else
            f"{equal} of the prediction's {len(numbers)} numbers {numbers[:12]} equal {target}: "
            f"{score:.4g}")
    return {"numbers": numbers, "target": target, "equal": equal, "score": score, "text": text}


@metric("retrieval", version="longbench-1")
def retrieval(prediction: str, reference: str, **record) -> float:
    """LongBench retrieval_score (passage_retrieval_en): the id in the reference's first
    "Paragraph N", scored as the share of numbers in the prediction equal to it (as strings).

    >>> retrieval("Paragraph 3, or maybe 12", "Paragraph 3")
    0.5
    """
    return _share_equal(prediction, reference, _PARAGRAPH_EN)[3]


@metric("retrieval_zh", version="longbench-1")
def retrieval_zh(prediction: str, reference: str, **record) -> float:
    """retrieval with the Chinese pattern "段落N" (passage_retrieval_zh).

    >>> retrieval_zh("答案是段落7", "段落7")
    1.0
    """
    return _share_equal(prediction, reference, _PARAGRAPH_ZH)[3]


@metric("count", version="longbench-1")
def count(prediction: str, reference: str, **record) -> float:
    """LongBench count_score (passage_count): share of numbers in the prediction equal to the
    reference, compared as strings, so "07" is not "7".

    >>> count("There are 7 unique paragraphs", "7"), count("07", "7")
    (1.0, 0.0)
    """
    return _share_equal(prediction, reference)[3]


@metric("gaokao_choice", version="tinyeval-1")
def gaokao_choice(prediction: str, reference: str, **record) -> float:
    """TinyEval's GAOKAO_math rule on the letters `choice_letters` picked: 1 if equal; multiple
    choice: 0.5 if the prediction is a proper subset of the reference ("" too), else 0.

    >>> gaokao_choice("C", "C"), gaokao_choice("AB", "ABD"), gaokao_choice("AE", "ABD")
    (1.0, 0.5, 0.0)
    """
    if prediction == reference:
        return 1.0
    if (len(reference) > 1 and len(prediction) < len(reference)
            and all(c in reference for c in prediction)):
        return 0.5
    return 0.0


@explains("gaokao_choice")
def explain_gaokao_choice(prediction: str, reference: str, **record) -> dict:
    score = gaokao_choice(prediction, reference)  # the rule is named, not re-derived
    if score == 1.0:
        rule = "the same letters"
    elif score == 0.5:
        rule = "a proper subset of a multiple-choice answer, half credit"
        if not prediction:  # "" (a lone letter, for TinyEval's picker) is a subset of anything
            rule += " (no letters: the choice_letters step gives '' when exactly one letter occurs)"
    elif len(reference) > 1:
        rule = "a letter the answer lacks, or not fewer letters than it"
    else:
        rule = "single choice, a different letter"
    return {"letters": prediction, "reference": reference, "rule": rule, "score": score,
            "text": f"letters {prediction!r} against {reference!r}: {rule}: {score:g}"}


@metric("choice_match", version="longbench-v2-1")
def choice_match(prediction: str, reference: str, **record) -> float:
    """LongBench v2's judge (pred == answer) on the letters an extraction step picked
    (`longbench_v2_answer`, `choice_answer`).

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


explains("classification")(partial(_explain_classes, quirk=True))
explains("classification_strict")(partial(_explain_classes, quirk=False))
explains("retrieval")(partial(_explain_share, what='"Paragraph N"', pattern=_PARAGRAPH_EN))
explains("retrieval_zh")(partial(_explain_share, what='"段落N"', pattern=_PARAGRAPH_ZH))
explains("count")(partial(_explain_share, what="count"))
