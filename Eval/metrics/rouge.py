"""ROUGE-L as LongBench scores it (``rouge``, ``rouge_zh``): pltrdy ``rouge`` 1.0.1's ROUGE-L bit
for bit, with bit-parallel LCS rows (Hyyro) as it is 86x faster; why, and the package's one
RecursionError we score, in docs/walkthrough.md. Its ROUGE-L: sentences are non-empty "."-pieces of
whitespace words; each sentence pair's LCS table is walked back once (diagonal on equal words, up
only when T[i-1][j] > T[i][j-1]); llcs counts the distinct words of the union of those LCSs, m and
n count distinct words; F = 2*((P*R)/(P+R+1e-8)). tests/test_rouge.py: the package as oracle.
"""
from __future__ import annotations

import functools

from Eval.metrics.qa import ratio
from Eval.metrics.registry import Zeroed, explains, metric
from Eval.metrics.zh import cut


def _sentences(text: str) -> list[list[str]]:
    """The package's split: non-empty "."-pieces, whitespace collapsed; "   " is the word ""."""
    if not isinstance(text, str):
        raise TypeError(f"ROUGE needs a str, got {type(text).__name__}")
    return [piece.split() or [""] for piece in text.split(".") if piece]


def _lcs_words(ref: list[str], hyp: list[str]) -> set[str]:
    """The distinct words of the one LCS the package rebuilds for this pair (its walk replayed)."""
    masks: dict[str, int] = {}
    for pos, word in enumerate(ref):
        masks[word] = masks.get(word, 0) | (1 << pos)
    # rows[j] is DP row j over the reference positions: T[i][j] = i - popcount(rows[j] & (2**i-1))
    full = row = (1 << len(ref)) - 1
    rows = [row]
    for word in hyp:
        match = row & masks.get(word, 0)
        row = ((row + match) | (row - match)) & full
        rows.append(row)

    def table(i: int, j: int) -> int:
        return i - (rows[j] & ((1 << i) - 1)).bit_count()

    words: set[str] = set()
    i, j = len(ref), len(hyp)
    while i and j:
        if ref[i - 1] == hyp[j - 1]:
            words.add(ref[i - 1])
            i, j = i - 1, j - 1
        elif table(i - 1, j) > table(i, j - 1):  # ties go left, as in the package
            i -= 1
        else:
            j -= 1
    return words


@functools.lru_cache(maxsize=32)
def _rouge_counts(hypothesis: str, reference: str) -> tuple[tuple, tuple, frozenset]:
    """(the reference's distinct words, the hypothesis's, in order: m and n; the LCS union) of a
    pair; cached: the explainer asks again for the best reference."""
    hyps, refs = _sentences(hypothesis), _sentences(reference)
    if not hyps:  # the package checks the hypothesis first (in rouge-1, before rouge-l runs)
        raise ValueError("Hypothesis is empty.")
    if not refs:
        raise ValueError("Reference is empty.")
    union: set[str] = set()
    hyp_sets = [set(hyp) for hyp in hyps]
    for ref in refs:
        ref_set = set(ref)
        for hyp, hyp_set in zip(hyps, hyp_sets):
            # a walk yields shared words only: if all are in the union already, it adds none
            if not (ref_set & hyp_set) <= union:
                union |= _lcs_words(ref, hyp)
    distinct = [tuple(dict.fromkeys(w for s in text for w in s)) for text in (refs, hyps)]
    return distinct[0], distinct[1], frozenset(union)


def f_measure(llcs: int, m: int, n: int) -> tuple[float, float, float]:
    """(P, R, F) with the packages' exact float operations: beta = 1, 1e-8 in the denominator."""
    recall = llcs / m
    precision = llcs / n
    return precision, recall, 2.0 * ((precision * recall) / (precision + recall + 1e-8))


def rouge_l_f(hypothesis: str, reference: str) -> float:
    """pltrdy ``rouge`` 1.0.1's summary-level ROUGE-L F, bit for bit; raises where the package does.

    >>> rouge_l_f("the cat sat. on the mat", "the cat sat on the mat")  # LCS union; 1e-8 in F
    0.999999995
    """
    ref_words, hyp_words, union = _rouge_counts(hypothesis, reference)
    return f_measure(len(union), len(ref_words), len(hyp_words))[2]


ROUGE_BEST = 2.0 * ((1.0 * 1.0) / (1.0 + 1.0 + 1e-8))  # identical texts: 0.999999995


def zeroed_by(exc: Exception) -> Zeroed:
    """The 0.0 a failing ROUGE scores, with why: the exception's type and message."""
    return Zeroed(f"{type(exc).__name__}: {exc}"[:120])


def jieba_text(text: str) -> str:
    """jieba's words joined by spaces: Chinese as LongBench hands it to a ROUGE package."""
    return " ".join(cut(text))


@metric("rouge", best=ROUGE_BEST, version="pltrdy-1.0.1")
def rouge(prediction: str, reference: str, **record) -> float:
    """ROUGE-L F as LongBench's ``rouge_score`` (gov_report, qmsum, multi_news, samsum): pltrdy
    ``rouge`` 1.0.1's ``get_scores([pred], [gt], avg=True)["rouge-l"]["f"]``; an empty or "."-only
    text scores 0.0 (``Zeroed``).

    >>> rouge("The cat sat on the mat.", "The cat lay on the mat.")
    0.8333333283333335
    >>> rouge("...", "The cat").reason
    'ValueError: Hypothesis is empty.'
    """
    try:
        return rouge_l_f(prediction, reference)
    except Exception as exc:  # LongBench's bare except scores every failure 0.0; we keep why
        return zeroed_by(exc)


@explains("rouge")
def explain_rouge(prediction: str, reference: str, **record) -> dict:
    """The distinct words on the LCSs (in the prediction's order), m, n, P, R, F."""
    try:
        ref_words, hyp_words, union = _rouge_counts(prediction, reference)
    except Exception as exc:  # the same failures the metric zeroes
        reason = zeroed_by(exc).reason
        return {"score": 0.0, "zeroed": reason,
                "text": f"scored 0, as LongBench does when the rouge package fails: {reason}"}
    m, n, words = len(ref_words), len(hyp_words), [w for w in hyp_words if w in union]
    precision, recall, score = f_measure(len(union), m, n)
    shown = " ".join(words[:20]) + (f" … ({len(words) - 20} more)" if len(words) > 20 else "")
    text = (f"{len(union)} distinct word{'s' * (len(union) != 1)} on the LCSs ({shown or 'none'}): "
            f"P = {ratio(len(union), n)} of the prediction's distinct words, "
            f"R = {ratio(len(union), m)} of the reference's, F = 2PR/(P+R+1e-8) = {score:.4g} "
            "(beta 1, as the rouge package computes it)")
    return {"prediction_tokens": list(hyp_words), "reference_tokens": list(ref_words),
            "lcs_words": words, "llcs": len(union), "prediction_distinct": n,
            "reference_distinct": m, "precision": precision, "recall": recall, "score": score,
            "text": text}


@metric("rouge_zh", best=ROUGE_BEST, version="pltrdy-1.0.1")
def rouge_zh(prediction: str, reference: str, **record) -> float:
    """``rouge`` on jieba words joined by spaces, as LongBench's ``rouge_zh_score`` (dureader,
    vcsum); a non-str raises TypeError, as jieba runs outside LongBench's try/except.

    >>> rouge_zh("我爱我的家，我的家很大", "我的家很大，我爱它")
    0.6153846104142012
    """
    return rouge(jieba_text(prediction), jieba_text(reference))


explains("rouge_zh", tokens=jieba_text)(explain_rouge)
