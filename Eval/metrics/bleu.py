"""Sentence BLEU-4: nltk's ``sentence_bleu([reference], prediction, smoothing_function=method1)``
on whitespace words, or jieba words for Chinese (nltk imported on first use: 1.8 s); the explainers
use nltk's own pieces (modified_precision, method1, brevity_penalty)."""
from __future__ import annotations

import math

from Eval.metrics.registry import explains, metric
from Eval.metrics.zh import cut


def sentence_bleu4(prediction: list[str], reference: list[str]) -> float:
    """nltk's sentence BLEU-4 (method1) on token lists; 0.0 for an empty side."""
    if not prediction or not reference:
        return 0.0
    from nltk.translate import bleu_score as nltk_bleu

    return float(nltk_bleu.sentence_bleu([reference], prediction,
                                         smoothing_function=nltk_bleu.SmoothingFunction().method1))


def _zh_words(text: str) -> list[str]:
    return [t for t in cut(text) if t.strip()]


@explains("bleu", tokens=str.split)
def explain_bleu4(prediction: list[str], reference: list[str]) -> dict:
    """sentence_bleu4's numbers: modified precisions, method1 (0.1 on a zero count), BP."""
    out = {"prediction_tokens": len(prediction), "reference_tokens": len(reference)}
    if not prediction or not reference:
        return {**out, "score": 0.0, "text": "an empty side scores 0"}
    from nltk.translate import bleu_score as nltk_bleu

    fractions = [nltk_bleu.modified_precision([reference], prediction, n) for n in range(1, 5)]
    counts = [[f.numerator, f.denominator] for f in fractions]  # unnormalised: matches / n-grams
    closest = nltk_bleu.closest_ref_length([reference], len(prediction))
    bp = nltk_bleu.brevity_penalty(closest, len(prediction))
    out = {**out, "ngram_matches": counts, "brevity_penalty": float(bp)}
    if counts[0][0] == 0:  # sentence_bleu returns 0 before smoothing then
        return {**out, "precisions": [0.0] * 4, "score": 0.0,
                "text": "no word of the prediction is in the reference: 0"}
    smoothed = nltk_bleu.SmoothingFunction().method1(fractions)
    # fsum, as corpus_bleu sums them
    score = float(bp * math.exp(math.fsum(0.25 * math.log(p) for p in smoothed)))
    shown = ", ".join(f"{n}-grams {m}/{t}" + (" (0.1 smoothing)" if m == 0 else "")
                      for n, (m, t) in enumerate(counts, 1))
    penalty = ("1 (prediction not shorter)" if bp == 1 else
               f"exp(1 - {len(reference)}/{len(prediction)}) = {bp:.4g}")
    text = f"{shown}; brevity penalty {penalty}; BLEU = BP x geometric mean = {score:.4g}"
    return {**out, "precisions": [float(p) for p in smoothed], "score": score, "text": text}


@metric("bleu", version="nltk-sentence-bleu4-method1")
def bleu(prediction: str, reference: str, **record) -> float:
    """Sentence BLEU-4 (nltk, uniform weights) on whitespace words, case kept; method1 (0.1 for a
    zero n-gram count) gives a short answer a small positive score; an empty side 0.

    >>> round(bleu("the cat sat on the mat", "the cat sat on a mat"), 4)
    0.5373
    """
    return sentence_bleu4(prediction.split(), reference.split())


@metric("bleu_zh", version="nltk-sentence-bleu4-method1-jieba")
def bleu_zh(prediction: str, reference: str, **record) -> float:
    """`bleu` on jieba words (whitespace tokens dropped), for Chinese.

    >>> round(bleu_zh("臣妾是甄嬛", "臣妾是甄嬛，家父是大理寺少卿。"), 4)
    0.2231
    """
    return sentence_bleu4(_zh_words(prediction), _zh_words(reference))


explains("bleu_zh", tokens=_zh_words)(explain_bleu4)
