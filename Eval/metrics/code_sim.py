"""Code similarity: LongBench's code_sim (lcc / repobench-p), fuzzywuzzy's ratio on the first code line.

Usage:
    from Eval.metrics.code_sim import code_sim, first_code_line
    code_sim("```\\nreturn x + 1", "return x+1")   # 0.91

The score is what LongBench's code_sim_score computes: ``fuzzywuzzy.fuzz.ratio(line, reference) / 100``, called
here (imported on first use). fuzz.ratio is difflib's SequenceMatcher ratio rounded to an integer, pure Python,
as long as python-Levenshtein is not installed: with it, fuzzywuzzy switches algorithm and the values change
(a warning says so). rapidfuzz is no substitute either: its ratio differs on most code lines.
"""
from __future__ import annotations

import functools
import warnings

from Eval.metrics.registry import explains, metric


@functools.lru_cache(maxsize=1)
def _fuzz():
    import difflib

    with warnings.catch_warnings():  # fuzzywuzzy warns that difflib is slow: it is the backend we pin
        warnings.filterwarnings("ignore", message="Using slow pure-python SequenceMatcher")
        from fuzzywuzzy import fuzz
    if fuzz.SequenceMatcher is not difflib.SequenceMatcher:
        warnings.warn("fuzzywuzzy uses python-Levenshtein here: code_sim values differ from the difflib-based "
                      "ones its version (longbench-fuzzywuzzy-0.18) names; uninstall python-Levenshtein")
    return fuzz


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

    Quantised to 0.01 because fuzz.ratio rounds to an integer (100 for equal strings, 0 if one is empty).

    >>> code_sim("```\\nreturn x + 1", "return x+1")
    0.91
    """
    return _fuzz().ratio(first_code_line(prediction), reference) / 100


@explains("code_sim")
def explain_code_sim(prediction: str, reference: str, **record) -> dict:
    """code_sim's numbers: the code line it picked and fuzz.ratio against the reference.

    >>> explain_code_sim("```\\nreturn x + 1", "return x+1")["text"]
    "first code line 'return x + 1' against 'return x+1': fuzz.ratio 91 / 100 = 0.91"
    """
    line = first_code_line(prediction)
    similarity = _fuzz().ratio(line, reference)
    text = f"first code line {line!r} against {reference!r}: fuzz.ratio {similarity} / 100 = {similarity / 100:g}"
    return {"code_line": line, "ratio": similarity, "score": similarity / 100, "text": text}
