"""Sentence BLEU-4 with nltk's smoothing method 1, on whitespace words, and on jieba words for Chinese.

The arithmetic is nltk's `sentence_bleu` (weights 0.25 each, `SmoothingFunction().method1`) written out here,
float operation for float operation, because importing nltk costs about 1.3 s (its package imports scipy.stats),
more than eval.py spends scoring the whole demo; tests/test_metrics.py checks every score equals nltk's own,
bit for bit, on thousands of random pairs. Each metric has an explainer (@explains): the clipped n-gram matches
over the prediction's n-grams for n = 1..4, method1's smoothing, the brevity penalty, and the score.
"""
from __future__ import annotations

import math
from collections import Counter

from Eval.metrics.registry import explains, metric
from Eval.metrics.zh import cut

EPSILON = 0.1  # method1: the count given to an n-gram order with no match


def ngram_matches(prediction: list[str], reference: list[str], n: int) -> tuple[int, int]:
    """(the prediction's n-grams found in the reference, each counted at most as often as the reference has it;
    the prediction's n-grams, at least 1): nltk's `modified_precision` numerator and denominator."""
    grams = Counter(tuple(prediction[i:i + n]) for i in range(len(prediction) - n + 1))
    available = Counter(tuple(reference[i:i + n]) for i in range(len(reference) - n + 1))
    return sum(min(count, available[gram]) for gram, count in grams.items()), max(1, sum(grams.values()))


def brevity_penalty(prediction_len: int, reference_len: int) -> float:
    """1 for a prediction longer than the reference, else exp(1 - r/c) (0 for an empty prediction)."""
    if prediction_len > reference_len:
        return 1
    return 0 if prediction_len == 0 else math.exp(1 - reference_len / prediction_len)


def _smoothed(counts: list[tuple[int, int]]) -> list[float]:
    """Each order's precision m / t (int / int is correctly rounded, as float(Fraction(m, t)) is in nltk), and
    method1's (0 + epsilon) / t where nothing matched."""
    return [m / t if m else (m + EPSILON) / t for m, t in counts]


def _score(counts: list[tuple[int, int]], bp: float) -> float:
    """BP x the geometric mean of the smoothed precisions, summed as nltk sums them; 0.0 when no word matches
    (nltk returns before smoothing then)."""
    if counts[0][0] == 0:
        return 0.0
    return float(bp * math.exp(math.fsum(0.25 * math.log(p) for p in _smoothed(counts))))


def sentence_bleu4(prediction: list[str], reference: list[str]) -> float:
    """nltk's sentence_bleu([reference], prediction, smoothing_function=method1) on token lists; 0.0 for an empty
    side."""
    if not prediction or not reference:
        return 0.0
    counts = [ngram_matches(prediction, reference, n) for n in range(1, 5)]
    return _score(counts, brevity_penalty(len(prediction), len(reference)))


def _explain_bleu4(prediction: list[str], reference: list[str]) -> dict:
    """The numbers of sentence_bleu4: modified precisions, method1 (epsilon 0.1 on a zero count), BP, score."""
    out = {"prediction_tokens": len(prediction), "reference_tokens": len(reference)}
    if not prediction or not reference:
        return {**out, "score": 0.0, "text": "an empty side scores 0"}
    counts = [ngram_matches(prediction, reference, n) for n in range(1, 5)]
    bp = brevity_penalty(len(prediction), len(reference))
    out = {**out, "ngram_matches": [list(c) for c in counts], "brevity_penalty": float(bp)}
    if counts[0][0] == 0:
        return {**out, "precisions": [0.0] * 4, "score": 0.0, "text": "no word of the prediction is in the reference: 0"}
    score = _score(counts, bp)
    shown = ", ".join(f"{n}-grams {m}/{t}" + (" (0.1 smoothing)" if m == 0 else "")
                      for n, (m, t) in enumerate(counts, 1))
    penalty = "1 (prediction not shorter)" if bp == 1 else f"exp(1 - {len(reference)}/{len(prediction)}) = {bp:.4g}"
    text = f"{shown}; brevity penalty {penalty}; BLEU = BP x geometric mean = {score:.4g}"
    return {**out, "precisions": _smoothed(counts), "score": score, "text": text}


@metric("bleu", version="nltk-sentence-bleu4-method1")
def bleu(prediction: str, reference: str, **record) -> float:
    """Sentence BLEU-4 (nltk `sentence_bleu`, uniform weights) on whitespace words, case kept.

    Smoothing: nltk's `SmoothingFunction().method1` (an epsilon of 0.1 added to zero n-gram counts), so a
    short answer with no 4-gram match gets a small positive score instead of 0. An empty side scores 0.

    >>> round(bleu("the cat sat on the mat", "the cat sat on a mat"), 4)
    0.5373
    """
    return sentence_bleu4(prediction.split(), reference.split())


@explains("bleu")
def explain_bleu(prediction: str, reference: str, **record) -> dict:
    """bleu's numbers.

    >>> explain_bleu("the cat sat on the mat", "the cat sat on a mat")["ngram_matches"]
    [[5, 6], [3, 5], [2, 4], [1, 3]]
    """
    return _explain_bleu4(prediction.split(), reference.split())


@metric("bleu_zh", version="nltk-sentence-bleu4-method1-jieba")
def bleu_zh(prediction: str, reference: str, **record) -> float:
    """`bleu` on jieba words (whitespace tokens dropped), for Chinese.

    >>> round(bleu_zh("臣妾是甄嬛", "臣妾是甄嬛，家父是大理寺少卿。"), 4)
    0.2231
    """
    return sentence_bleu4([t for t in cut(prediction) if t.strip()], [t for t in cut(reference) if t.strip()])


@explains("bleu_zh")
def explain_bleu_zh(prediction: str, reference: str, **record) -> dict:
    return _explain_bleu4([t for t in cut(prediction) if t.strip()], [t for t in cut(reference) if t.strip()])
