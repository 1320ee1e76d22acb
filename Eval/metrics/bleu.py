"""Sentence BLEU-4 (nltk, smoothing method 1) on whitespace words, and on jieba words for Chinese.

nltk is imported on first use only, so importing the metrics package stays cheap.
"""
from __future__ import annotations

from Eval.metrics.registry import metric
from Eval.metrics.zh import cut


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


@metric("bleu_zh", version="nltk-sentence-bleu4-method1-jieba")
def bleu_zh(prediction: str, reference: str, **record) -> float:
    """`bleu` on jieba words (whitespace tokens dropped), for Chinese.

    >>> round(bleu_zh("臣妾是甄嬛", "臣妾是甄嬛，家父是大理寺少卿。"), 4)
    0.2231
    """
    return _bleu4([t for t in cut(prediction) if t.strip()], [t for t in cut(reference) if t.strip()])
