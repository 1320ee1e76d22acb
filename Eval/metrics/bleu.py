"""Sentence BLEU-4 (nltk, smoothing method 1) on whitespace words, and on jieba words for Chinese.

nltk is imported on first use only, so importing the metrics package stays cheap. Each metric has an explainer
(@explains): the clipped n-gram matches over the prediction's n-grams for n = 1..4, method1's smoothing, the
brevity penalty, and the score recomputed from them with nltk's own float operations.
"""
from __future__ import annotations

import math
from fractions import Fraction

from Eval.metrics.registry import explains, metric
from Eval.metrics.zh import cut


def _bleu4(prediction: list[str], reference: list[str]) -> float:
    from nltk.translate.bleu_score import SmoothingFunction, sentence_bleu

    if not prediction or not reference:
        return 0.0
    return float(sentence_bleu([reference], prediction, weights=(0.25, 0.25, 0.25, 0.25),
                               smoothing_function=SmoothingFunction().method1))


def _explain_bleu4(prediction: list[str], reference: list[str]) -> dict:
    """corpus_bleu's path for one pair: modified precisions, method1 (epsilon 0.1 on a zero count), BP, score."""
    from nltk.translate.bleu_score import brevity_penalty, closest_ref_length, modified_precision

    out = {"prediction_tokens": len(prediction), "reference_tokens": len(reference)}
    if not prediction or not reference:
        return {**out, "score": 0.0, "text": "an empty side scores 0"}
    fractions = [modified_precision([reference], prediction, n) for n in range(1, 5)]
    counts = [[f.numerator, f.denominator] for f in fractions]  # nltk keeps them unnormalised: raw counts
    closest = closest_ref_length([reference], len(prediction))
    bp = brevity_penalty(closest, len(prediction))
    out = {**out, "ngram_matches": counts, "brevity_penalty": float(bp)}
    if counts[0][0] == 0:  # nltk returns 0 before smoothing when no word matches
        return {**out, "precisions": [0.0] * 4, "score": 0.0, "text": "no word of the prediction is in the reference: 0"}
    smoothed = [(m + 0.1) / t if m == 0 else Fraction(m, t) for m, t in counts]
    score = float(bp * math.exp(math.fsum(0.25 * math.log(p) for p in smoothed if p > 0)))
    shown = ", ".join(f"{n}-grams {m}/{t}" + (" (0.1 smoothing)" if m == 0 else "")
                      for n, (m, t) in enumerate(counts, 1))
    penalty = "1 (prediction not shorter)" if bp == 1 else f"exp(1 - {closest}/{len(prediction)}) = {bp:.4g}"
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
    return _bleu4(prediction.split(), reference.split())


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
    return _bleu4([t for t in cut(prediction) if t.strip()], [t for t in cut(reference) if t.strip()])


@explains("bleu_zh")
def explain_bleu_zh(prediction: str, reference: str, **record) -> dict:
    return _explain_bleu4([t for t in cut(prediction) if t.strip()], [t for t in cut(reference) if t.strip()])
