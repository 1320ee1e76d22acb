"""ROUGE from the packages as they are: ``rouge_chinese`` (the ``rouge-chinese`` package's ROUGE-L
on jieba words) and BERGEN's ``rouge_1`` / ``rouge_2`` (pltrdy ``rouge``'s ROUGE-1 / -2 F), each
package imported on first use; a failure (an empty text) scores 0.0 as a ``Zeroed`` saying why.

Usage:
    python eval.py --pred-dir DIR --metrics rouge_chinese,rouge_1   # on any prediction files
    python eval.py --pred-root experiments           # BERGEN's folders: rouge_1, rouge_2 among them
    rouge_1("the cat sat on the mat", "the cat lay on the mat")     # 0.7999999950000002
"""
from __future__ import annotations

import functools

from Eval.metrics.qa import ratio
from Eval.metrics.registry import Zeroed, explains, metric
from Eval.metrics.rouge import ROUGE_BEST, f_measure, jieba_text, zeroed_by


@functools.lru_cache(maxsize=2)
def _chinese_rouge(raw: bool = False):
    from rouge_chinese import Rouge  # only this metric needs it

    return Rouge(metrics=["rouge-l"], raw_results=True) if raw else Rouge()


@metric("rouge_chinese", best=ROUGE_BEST, version="rouge-chinese-1.0.3")
def rouge_chinese(prediction: str, reference: str, **record) -> float:
    """ROUGE-L F of the ``rouge-chinese`` package on jieba words: not LongBench's figure (it splits
    on Chinese end punctuation and takes one LCS over all words), for comparing with work that used
    it (rouge_zh gives 0.615 here). Quadratic (see ``--sample-time-limit``); any exception scores
    0.0 (``Zeroed``).

    >>> rouge_chinese("我爱我的家，我的家很大", "我的家很大，我爱它")
    0.555555550617284
    """
    try:
        return _chinese_f(jieba_text(prediction), jieba_text(reference))
    except Exception as exc:
        return zeroed_by(exc)


@functools.lru_cache(maxsize=32)
def _chinese_f(hypothesis: str, gold: str) -> float:  # cached: the explainer asks again
    return _chinese_rouge().get_scores(hypothesis, gold, avg=True)["rouge-l"]["f"]


@explains("rouge_chinese")
def explain_rouge_chinese(prediction: str, reference: str, **record) -> dict:
    """The package's own counts: the length of one LCS over all words."""
    value = rouge_chinese(prediction, reference)  # the package's F (cached), or why it failed
    if isinstance(value, Zeroed):
        return {"score": 0.0, "zeroed": value.reason, "text": f"scored 0: {value.reason}"}
    hypothesis, gold = jieba_text(prediction), jieba_text(reference)
    counts = _chinese_rouge(raw=True).get_scores(hypothesis, gold)[0]["rouge-l"]
    llcs, hyp_words, ref_words = counts["overlap"], counts["hyp"], counts["ref"]
    precision, recall, score = f_measure(llcs, ref_words, hyp_words)
    text = (f"LCS of {llcs} words: P = {ratio(llcs, hyp_words)} of the prediction's words, "
            f"R = {ratio(llcs, ref_words)} of the reference's, F = 2PR/(P+R+1e-8) = {score:.4g}")
    return {"llcs": llcs, "prediction_words": hyp_words, "reference_words": ref_words,
            "precision": precision, "recall": recall, "score": score, "text": text}


@functools.cache
def _package_rouge():
    from rouge import Rouge  # the pltrdy package: its ROUGE-1 / ROUGE-2 as they are

    return Rouge(metrics=["rouge-1", "rouge-2"])


def _package_scores(prediction: str, reference: str, which: str) -> dict:
    """The `rouge` package's P, R, F of ROUGE-N as BERGEN calls it (a failure: F = 0.0)."""
    try:
        return _package_rouge().get_scores(prediction, reference, avg=True)[which]
    except Exception as exc:
        return {"f": zeroed_by(exc)}


def _explain_package(prediction: str, reference: str, *, which: str, **record) -> dict:
    scores = _package_scores(prediction, reference, which)
    value = scores["f"]
    if isinstance(value, Zeroed):
        return {"score": 0.0, "zeroed": value.reason,
                "text": f"scored 0, as BERGEN does: {value.reason}"}
    text = (f"{which} of the rouge package: P = {scores['p']:.4g}, R = {scores['r']:.4g}, "
            f"F = 2PR/(P+R+1e-8) = {value:.4g}")
    return {"precision": scores["p"], "recall": scores["r"], "score": value, "text": text}


@metric("rouge_1", best=ROUGE_BEST, version="pltrdy-1.0.1")
def rouge_1(prediction: str, reference: str, **record) -> float:
    """BERGEN's Rouge-1: the `rouge` package's ROUGE-1 F (distinct-word overlap).

    >>> rouge_1("the cat sat on the mat", "the cat lay on the mat")
    0.7999999950000002
    """
    return _package_scores(prediction, reference, "rouge-1")["f"]


@metric("rouge_2", best=ROUGE_BEST, version="pltrdy-1.0.1")
def rouge_2(prediction: str, reference: str, **record) -> float:
    """BERGEN's Rouge-2: the `rouge` package's ROUGE-2 F (bigram overlap).

    >>> rouge_2("the cat sat on the mat", "the cat lay on the mat")
    0.5999999950000001
    """
    return _package_scores(prediction, reference, "rouge-2")["f"]


explains("rouge_1")(functools.partial(_explain_package, which="rouge-1"))
explains("rouge_2")(functools.partial(_explain_package, which="rouge-2"))
