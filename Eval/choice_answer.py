"""The `choice_answer` extraction step (registered in Eval/extract.py): the choice letters of a
free-form answer, as a reasoning model writes it.

Usage:
    text = run_extraction(("strip_think", "choice_answer"), record["pred"], record)
"""
from __future__ import annotations

import re
from typing import Optional

# cues after which the chosen letters are written; English ones ignore case, letters never do
_CUES = re.compile(r"答案是|答案为|答案：|答案:|故选|应选|选项"
                   r"|(?i:the answer is|answer:)")
# Between a cue and the letters: spaces, punctuation, brackets, markdown, "是" / "为",
# "option", "\boxed{".
_FILL = r"""[\s:：,，*_"'“”‘’(（\[【{$]*"""
_LETTERS_AFTER_CUE = re.compile(
    _FILL + r"(?:(?:是|为|(?i:options?)|\\boxed\{)" + _FILL + r")?"
    r"([A-J](?:(?:[ \t、,，/&和]|\band\b)*[A-J])*)(?![A-Za-z])")  # a line break ends the run
_LONE_LETTER = re.compile(r"(?<![A-Za-z])[A-J](?![A-Za-z])")


def choice_answer(pred: str, record: dict) -> Optional[str]:
    """Choice letters A-J, sorted, each once: those right after the LAST answer cue that has
    letters not running into a word ("the answer is Apple" has none); else the last capital A-J no
    Latin letter touches.

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
