"""Code similarity: LongBench's code_sim (lcc / repobench-p), fuzzywuzzy's ratio on the first code line.

code_sim reproduces fuzzywuzzy's pure-Python `fuzz.ratio` (difflib, no python-Levenshtein) without the
dependency: with python-Levenshtein or rapidfuzz installed the numbers change, so we pin the semantics here.
Where an upper bound on the matched characters already proves the rounded ratio is 0 (a long line against a
short reference), the SequenceMatcher is skipped: same value, linear time.
"""
from __future__ import annotations

import difflib
from collections import Counter

from Eval.metrics.registry import explains, metric


def fuzz_ratio(a: str, b: str) -> int:
    """fuzzywuzzy.fuzz.ratio semantics: 100 if equal, 0 if either is empty, else
    int(round(100 * SequenceMatcher(None, a, b).ratio())) (difflib's autojunk on, as fuzzywuzzy leaves it).

    >>> fuzz_ratio("return x + 1", "return x+1"), fuzz_ratio("", ""), fuzz_ratio("a", "")
    (91, 100, 0)
    """
    if a == b:
        return 100
    if not a or not b:
        return 0
    # The ratio is 2 * M / (len(a) + len(b)) with M the matched characters, rounded after * 100, and every step
    # of that float computation is monotone in M. So when an upper bound on M already rounds to 0, M does too,
    # and the SequenceMatcher, cubic on some long repetitive lines (minutes on 100,000 characters), is skipped.
    total = len(a) + len(b)
    if _percent(min(len(a), len(b)), total) == 0:  # M <= the shorter length (difflib's real_quick_ratio)
        return 0
    if _percent(sum((Counter(a) & Counter(b)).values()), total) == 0:  # M <= shared characters (quick_ratio)
        return 0
    return int(round(100 * difflib.SequenceMatcher(None, a, b).ratio()))


def _percent(matches: int, total: int) -> int:
    # fuzz.ratio's number for `matches` matched characters: difflib's ratio 2.0 * M / total, then * 100, rounded
    return int(round(100 * (2.0 * matches / total)))


def first_code_line(prediction: str) -> str:
    """LongBench's line pick: the first line (after leading newlines) with no '`', '#' or '//'; else ''.

    >>> first_code_line("\\n```python\\n# add one\\nx = y + 1\\n```")
    'x = y + 1'
    """
    for line in prediction.lstrip("\n").split("\n"):
        if "`" not in line and "#" not in line and "//" not in line:
            return line
    return ""


@metric("code_sim", version="longbench-fuzzywuzzy-0.18")
def code_sim(prediction: str, reference: str, **record) -> float:
    """LongBench code_sim_score: fuzz.ratio of the first real code line and the reference, / 100.

    Quantised to 0.01 because fuzz.ratio rounds to an integer.

    >>> code_sim("```\\nreturn x + 1", "return x+1")
    0.91
    """
    return fuzz_ratio(first_code_line(prediction), reference) / 100


@explains("code_sim")
def explain_code_sim(prediction: str, reference: str, **record) -> dict:
    """code_sim's numbers: the code line it picked and fuzz.ratio against the reference.

    >>> explain_code_sim("```\\nreturn x + 1", "return x+1")["text"]
    "first code line 'return x + 1' against 'return x+1': fuzz.ratio 91 / 100 = 0.91"
    """
    line = first_code_line(prediction)
    similarity = fuzz_ratio(line, reference)
    return {"code_line": line, "ratio": similarity, "score": similarity / 100,
            "text": f"first code line {line!r} against {reference!r}: fuzz.ratio {similarity} / 100 = {similarity / 100:g}"}
