"""Answer extraction: the named steps a task lists, run at scoring time (the raw output can always
be rescored). A step returns None when it finds no answer: the record scores 0.

Usage:
    text = run_extraction(("strip_think", "first_line"), record["pred"], record)
"""
from __future__ import annotations

import re
from typing import Optional

from Eval.choice_answer import choice_answer
from Eval.registry import Registry
from Eval.thinking import think_state, think_tags

EXTRACTORS = Registry("extraction step",
                      hint="Add one: a function decorated with @extractor in Eval/extract.py.")
extractor = EXTRACTORS.register


@extractor("first_line")
def first_line(pred: str, record: dict) -> str:
    """LongBench's trec / triviaqa / samsum / lsht: the first line after leading newlines.

    >>> first_line("\\n\\n Location\\nExplanation: ...", {})
    ' Location'
    """
    return pred.lstrip("\n").split("\n")[0]


@extractor("strip_think")
def strip_think(pred: str, record: dict) -> Optional[str]:
    """The text after the record's last closing thinking tag; None for a block that never closes.

    >>> strip_think("<think>2+2... is 4</think>\\n4", {})
    '\\n4'
    >>> strip_think("<think>still thinking", {}) is None
    True
    >>> strip_think("[R]hmm[/R] B", {"thinking": {"tags": ["[R]", "[/R]"]}})
    ' B'
    >>> strip_think("so it is B", {"thinking": {"opened_in_prompt": True}}) is None
    True
    >>> strip_think(" B", {"thinking": {"opened_in_prompt": True, "stripped": True}})
    ' B'
    """
    if think_state(pred, record) == "unclosed":
        return None
    return pred.rsplit(think_tags(record)[1], 1)[-1]


_CHOICE = re.compile(r"[A-D]")


@extractor("choice_letters")
def choice_letters(pred: str, record: dict) -> Optional[str]:
    """TinyEval's GAOKAO_math pick (None: no letter A-D). Single choice: the last capital A-D;
    multiple: the letters from the first on, up to one more than 5 characters from the previous
    (their last occurrences), sorted; TinyEval walks only from two letters, so one letter gives "".

    >>> choice_letters("答案是 B", {"answers": ["B"]})
    'B'
    >>> choice_letters("故选 A、C", {"answers": ["AC"]})
    'AC'
    """
    matches = _CHOICE.findall(pred)
    if not matches:
        return None
    if all(len(a) <= 1 for a in record.get("answers", [])):
        return matches[-1]
    if len(matches) == 1:
        return ""
    reversed_pred = pred[::-1]
    picked = matches[0]
    for previous, letter in zip(matches, matches[1:]):
        if reversed_pred.find(previous) - reversed_pred.find(letter) - 1 > 5:
            break
        picked += letter
    return "".join(sorted(set(picked)))


_V2_PAREN = re.compile(r"The correct answer is \(([A-D])\)")
_V2_BARE = re.compile(r"The correct answer is ([A-D])")


@extractor("longbench_v2_answer")
def longbench_v2_answer(pred: str, record: dict) -> Optional[str]:
    """LongBench v2's pick: with every "*" dropped, the X (A-D) of the first "The correct answer
    is (X)", else of the first "The correct answer is X" (so "... is Apple" gives "A").

    >>> longbench_v2_answer("**The correct answer is (B)**", {})
    'B'
    >>> longbench_v2_answer("The correct answer is C. Hence The correct answer is (D)", {})
    'D'
    >>> longbench_v2_answer("the correct answer is (A)", {}) is None
    True
    """
    text = pred.replace("*", "")
    match = _V2_PAREN.search(text) or _V2_BARE.search(text)
    return match.group(1) if match else None


extractor("choice_answer")(choice_answer)  # free-form choice letters: Eval/choice_answer.py


def run_extraction(steps: tuple[str, ...], pred: str, record: dict) -> Optional[str]:
    """Apply the named steps in order; None as soon as one finds no answer."""
    for step in steps:
        pred = EXTRACTORS[step](pred, record)
        if pred is None:
            break
    return pred
