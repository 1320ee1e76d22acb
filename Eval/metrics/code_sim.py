"""Code similarity: LongBench's code_sim (lcc / repobench-p), fuzzywuzzy's ``fuzz.ratio(line,
reference) / 100`` on the first code line, on difflib (python-Levenshtein changes the values)."""
from __future__ import annotations

import functools
import warnings

from Eval.metrics.registry import explains, metric


@functools.lru_cache(maxsize=1)
def _fuzz():
    import difflib

    with warnings.catch_warnings():  # "difflib is slow": it is the backend we pin
        warnings.filterwarnings("ignore", message="Using slow pure-python SequenceMatcher")
        from fuzzywuzzy import fuzz
    if fuzz.SequenceMatcher is not difflib.SequenceMatcher:
        warnings.warn("fuzzywuzzy uses python-Levenshtein here: code_sim values differ from the "
                      "difflib-based ones its version (longbench-fuzzywuzzy-0.18) names; uninstall "
                      "python-Levenshtein")
    return fuzz


def first_code_line(prediction: str) -> str:
    """LongBench's pick: the first line (after leading newlines) with no '`', '#' or '//', or ''."""
    for line in prediction.lstrip("\n").split("\n"):
        if "`" not in line and "#" not in line and "//" not in line:
            return line
    return ""


@metric("code_sim", version="longbench-fuzzywuzzy-0.18")
def code_sim(prediction: str, reference: str, **record) -> float:
    """LongBench code_sim_score: fuzz.ratio of the first code line and the reference / 100.

    >>> code_sim("```\\nreturn x + 1", "return x+1")
    0.91
    """
    return _fuzz().ratio(first_code_line(prediction), reference) / 100


@explains("code_sim")
def explain_code_sim(prediction: str, reference: str, **record) -> dict:
    line = first_code_line(prediction)
    similarity = _fuzz().ratio(line, reference)
    text = (f"first code line {line!r} against {reference!r}: fuzz.ratio {similarity} / 100 = "
            f"{similarity / 100:g}")
    return {"code_line": line, "ratio": similarity, "score": similarity / 100, "text": text}
