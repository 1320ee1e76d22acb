"""Code similarity (LongBench lcc / repobench-p) and sentence BLEU-4.

code_sim reproduces fuzzywuzzy's pure-Python `fuzz.ratio` (difflib, no python-Levenshtein) without the
dependency: with python-Levenshtein or rapidfuzz installed the numbers change, so we pin the semantics here.
Where an upper bound on the matched characters already proves the rounded ratio is 0 (a long line against a
short reference), the SequenceMatcher is skipped: same value, linear time.
"""
from __future__ import annotations

import difflib
from collections import Counter

from Eval.metrics.registry import metric
from Eval.metrics.zh import cut


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


def _bleu4(prediction: list[str], reference: list[str]) -> float:
    from nltk.translate.bleu_score import SmoothingFunction, sentence_bleu

    if not prediction or not reference:
        return 0.0
    return float(sentence_bleu([reference], prediction, weights=(0.25, 0.25, 0.25, 0.25),
                               smoothing_function=SmoothingFunction().method1))


@metric("bleu", version="nltk-sentence-bleu4-method1")
def bleu(prediction: str, reference: str, **record) -> float:
    """Sentence BLEU-4 (nltk `sentence_bleu`, uniform weights) on whitespace words, case kept.

    Smoothing: nltk's `SmoothingFunction().method1` (an epsilon of 0.1 added to zero n-gram counts), so a
    short answer with no 4-gram match gets a small positive score instead of 0. An empty side scores 0.

    >>> round(bleu("the cat sat on the mat", "the cat sat on a mat"), 4)
    0.5373
    """
    return _bleu4(prediction.split(), reference.split())


@metric("bleu_zh", version="nltk-sentence-bleu4-method1-jieba", needs_jieba=True)
def bleu_zh(prediction: str, reference: str, **record) -> float:
    """`bleu` on jieba words (whitespace tokens dropped), for Chinese.

    >>> round(bleu_zh("臣妾是甄嬛", "臣妾是甄嬛，家父是大理寺少卿。"), 4)
    0.2231
    """
    return _bleu4([t for t in cut(prediction) if t.strip()], [t for t in cut(reference) if t.strip()])
