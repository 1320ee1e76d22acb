"""Answer extraction: named steps that turn a raw prediction into the text a metric scores.

Each task lists its steps (see Eval/tasks.py); they run in order at scoring time, never at inference, so the
saved raw output can always be rescored. A step returns the new text, or None when it cannot find an answer:
the record then scores 0 and is counted under `extraction_failed` for its dataset.

Usage:
    from Eval.extract import run_extraction
    text = run_extraction(("strip_think", "first_line"), record["pred"], record)
"""
from __future__ import annotations

import re
from typing import Callable, Optional

from Eval.registry import Registry

Extractor = Callable[[str, dict], Optional[str]]
EXTRACTORS = Registry("extraction step", hint="Add one: a function decorated with @extractor in Eval/extract.py.")
extractor = EXTRACTORS.register


@extractor("first_line")
def first_line(pred: str, record: dict) -> str:
    """LongBench's post-processing for trec, triviaqa, samsum, lsht: strip leading newlines only, keep the
    text before the next newline (spaces kept).

    >>> first_line("\\n\\n Location\\nExplanation: ...", {})
    ' Location'
    """
    return pred.lstrip("\n").split("\n")[0]


DEFAULT_THINK_TAGS = ("<think>", "</think>")


def think_tags(record: dict) -> tuple[str, str]:
    """The record's thinking tag pair (the adapter writes it under record["thinking"]["tags"] for models with
    their own tags); <think> </think> for records without one (older runs, files from other tools)."""
    thinking = record.get("thinking")
    tags = thinking.get("tags") if isinstance(thinking, dict) else None
    if isinstance(tags, (list, tuple)) and len(tags) == 2 and all(isinstance(t, str) and t for t in tags):
        return tags[0], tags[1]
    return DEFAULT_THINK_TAGS


def opened_in_prompt(record: dict) -> bool:
    thinking = record.get("thinking")
    return isinstance(thinking, dict) and thinking.get("opened_in_prompt") is True


def think_state(pred: str, record: dict) -> str | None:
    """The output's thinking block: "closed", "unclosed" (opened in the output or by the prompt, never closed), or
    None when there is none. A closing tag anywhere counts as closed, as strip_think reads it."""
    open_tag, close_tag = think_tags(record)
    thinking = record.get("thinking")
    if close_tag in pred or (isinstance(thinking, dict) and thinking.get("stripped") is True):
        return "closed"  # "stripped": -M strip_think=true already removed a closed block; pred is the answer
    if open_tag in pred or opened_in_prompt(record):
        return "unclosed"
    return None


@extractor("strip_think")
def strip_think(pred: str, record: dict) -> Optional[str]:
    """Remove reasoning blocks. Text after the last closing tag is the answer (chat templates that open the
    block in the prompt leave only the closing tag in the output). A block that never closes, opened in the
    output or by the prompt (record["thinking"]["opened_in_prompt"]), means the answer was never written: None.
    The tags are the record's record["thinking"]["tags"], else <think> </think>.

    >>> strip_think("<think>2+2... is 4</think>\\n4", {})
    '\\n4'
    >>> strip_think("<think>still thinking", {}) is None
    True
    >>> strip_think("[R]hmm[/R] B", {"thinking": {"tags": ["[R]", "[/R]"]}})
    ' B'
    >>> strip_think("so it is B", {"thinking": {"tags": ["<think>", "</think>"], "opened_in_prompt": True}}) is None
    True
    >>> strip_think(" B", {"thinking": {"opened_in_prompt": True, "closed": True, "stripped": True}})
    ' B'
    """
    state = think_state(pred, record)
    if state == "closed":
        close_tag = think_tags(record)[1]
        return pred.rsplit(close_tag, 1)[1] if close_tag in pred else pred
    return None if state == "unclosed" else pred


_CHOICE = re.compile(r"[A-D]")


@extractor("choice_letters")
def choice_letters(pred: str, record: dict) -> Optional[str]:
    """TinyEval's GAOKAO_math letter pick; None when the text has no letter A-D at all.

    Single choice (every reference is one letter): the last capital A-D in the text. Multiple choice: walk
    the capital A-D letters from the first one on, stopping at the first whose gap to the previous one,
    measured between their last occurrences in the text, exceeds 5 characters; the result is the sorted set
    of letters taken. TinyEval applies that walk only when at least two letters occur, so a single letter
    yields "" (which gaokao_choice scores 0.5 against a multi-letter reference): reproduced as is.

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


# LongBench v2's pred.py extract_answer: the parenthesised form is searched in the whole text before the bare one.
_V2_PAREN = re.compile(r"The correct answer is \(([A-D])\)")
_V2_BARE = re.compile(r"The correct answer is ([A-D])")


@extractor("longbench_v2_answer")
def longbench_v2_answer(pred: str, record: dict) -> Optional[str]:
    """LongBench v2's answer pick, exactly: drop every "*" (markdown bold), then the letter of the first
    "The correct answer is (X)" with X in A-D; else the first "The correct answer is X" (no word boundary, so
    "The correct answer is Apple" gives "A", as the original does); else None. Case and spacing are literal.

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


# choice_answer: cues after which the chosen letters are written. English ones ignore case, letters never do.
_CUES = re.compile(r"答案是|答案为|答案：|答案:|故选|应选|选项|(?i:the answer is|answer:)")
# Between a cue and the letters: spaces, punctuation, brackets, markdown, "是" / "为", "option", "\boxed{".
_FILL = r"""[\s:：,，*_"'“”‘’(（\[【{$]*"""
_LETTERS_AFTER_CUE = re.compile(
    _FILL + r"(?:(?:是|为|(?i:options?)|\\boxed\{)" + _FILL + r")?"
    r"([A-J](?:(?:[ \t、,，/&和]|\band\b)*[A-J])*)(?![A-Za-z])")  # a line break ends the run
_LONE_LETTER = re.compile(r"(?<![A-Za-z])[A-J](?![A-Za-z])")


@extractor("choice_answer")
def choice_answer(pred: str, record: dict) -> Optional[str]:
    """Choice letters A-J from a free-form (reasoning) answer; sorted, each once ("CA" and "A、C" both give "AC").

    The letters come right after the LAST answer cue that is followed by letters; the cues are 答案是, 答案为,
    答案：(or 答案:), 故选, 应选, 选项, "the answer is" and "answer:" (these two in any case). Between the cue and
    the letters may stand spaces, punctuation, brackets, "*", 是 / 为, "option" or "\\boxed{"; letters may be
    joined by nothing, spaces (not line breaks), 、 , ， / & 和 or "and". The letter run must not run into a
    word ("the answer is Apple" has no letter there). With no cue followed by letters: the last capital A-J
    standing alone (no Latin letter touching it). None when there is no letter at all.

    >>> choice_answer("分析……故选 A、C", {})
    'AC'
    >>> choice_answer("Option B looks right, but the answer is **(G)**.", {})
    'G'
    >>> choice_answer("I pick E over Apple", {}), choice_answer("no idea", {})
    ('E', None)
    """
    for cue in reversed(list(_CUES.finditer(pred))):
        found = _LETTERS_AFTER_CUE.match(pred, cue.end())
        if found:
            return "".join(sorted(set(re.findall(r"[A-J]", found.group(1)))))
    letters = _LONE_LETTER.findall(pred)
    return letters[-1] if letters else None


def run_extraction(steps: tuple[str, ...], pred: str, record: dict) -> Optional[str]:
    """Apply the named steps in order; None as soon as one finds no answer."""
    text: Optional[str] = pred
    for step in steps:
        text = EXTRACTORS[step](text, record)
        if text is None:
            return None
    return text
