"""Sentence BLEU-4 with nltk's smoothing method 1, on whitespace words, and on jieba words for Chinese.

Usage:
    from Eval.metrics.bleu import bleu, bleu_zh, explain_bleu
    bleu("the cat sat on the mat", "the cat sat on a mat")   # 0.5373...

The score is nltk's own ``sentence_bleu([reference], prediction, smoothing_function=SmoothingFunction().method1)``
(weights 0.25 each). nltk is imported on first use: its package imports scipy.stats, about 1.8 s, paid only by a
run that scores a BLEU dataset. Each metric has an explainer (@explains) built from nltk's own pieces: the clipped
n-gram matches over the prediction's n-grams for n = 1..4 (modified_precision), method1's smoothing, the brevity
penalty, and the score recomputed from them as sentence_bleu computes it.
"""
from __future__ import annotations

import functools
import math

from Eval.metrics.registry import explains, metric
from Eval.metrics.zh import cut


@functools.lru_cache(maxsize=1)
def _nltk():
    from nltk.translate import bleu_score

    return bleu_score


def sentence_bleu4(prediction: list[str], reference: list[str]) -> float:
    """nltk's sentence_bleu([reference], prediction, smoothing_function=method1) on token lists; 0.0 for an empty
    side."""
    if not prediction or not reference:
        return 0.0
    nltk_bleu = _nltk()
    return float(nltk_bleu.sentence_bleu([reference], prediction,
                                         smoothing_function=nltk_bleu.SmoothingFunction().method1))


def _explain_bleu4(prediction: list[str], reference: list[str]) -> dict:
    """The numbers of sentence_bleu4: modified precisions, method1 (epsilon 0.1 on a zero count), BP, score."""
    out = {"prediction_tokens": len(prediction), "reference_tokens": len(reference)}
    if not prediction or not reference:
        return {**out, "score": 0.0, "text": "an empty side scores 0"}
    nltk_bleu = _nltk()
    fractions = [nltk_bleu.modified_precision([reference], prediction, n) for n in range(1, 5)]
    counts = [(f.numerator, f.denominator) for f in fractions]  # unnormalised: matches / n-grams
    bp = nltk_bleu.brevity_penalty(nltk_bleu.closest_ref_length([reference], len(prediction)), len(prediction))
    out = {**out, "ngram_matches": [list(c) for c in counts], "brevity_penalty": float(bp)}
    if counts[0][0] == 0:  # sentence_bleu returns 0 before smoothing then
        return {**out, "precisions": [0.0] * 4, "score": 0.0,
                "text": "no word of the prediction is in the reference: 0"}
    smoothed = nltk_bleu.SmoothingFunction().method1(fractions)
    score = float(bp * math.exp(math.fsum(0.25 * math.log(p) for p in smoothed)))  # as corpus_bleu sums them
    shown = ", ".join(f"{n}-grams {m}/{t}" + (" (0.1 smoothing)" if m == 0 else "")
                      for n, (m, t) in enumerate(counts, 1))
    penalty = "1 (prediction not shorter)" if bp == 1 else f"exp(1 - {len(reference)}/{len(prediction)}) = {bp:.4g}"
    text = f"{shown}; brevity penalty {penalty}; BLEU = BP x geometric mean = {score:.4g}"
    return {**out, "precisions": [float(p) for p in smoothed], "score": score, "text": text}


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
