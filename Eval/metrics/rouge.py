"""ROUGE-L: LongBench's ``rouge`` / ``rouge_zh`` (a hand-written replacement of the pltrdy ``rouge`` 1.0.1
package's ROUGE-L) and ``rouge_chinese`` (which calls the ``rouge-chinese`` package).

Usage:
    from Eval.metrics.rouge import rouge_l_f, rouge, rouge_zh, rouge_chinese

    rouge_l_f("the cat sat. on the mat", "the cat sat on the mat")   # 0.999999995; raises where the package raises
    rouge("the cat sat", "")   # Zeroed == 0.0, .reason == "ValueError: Reference is empty."

``rouge_l_f(h, r)`` returns the same float, bit for bit, as
``Rouge().get_scores([h], [r], avg=True)["rouge-l"]["f"]`` (tests/test_rouge.py checks it against the package).
What that number is (none of it is textbook ROUGE-L):

* The text is cut on every "." into pieces, empty pieces dropped; each piece's whitespace is collapsed and its
  words are the space-separated tokens. A whitespace-only piece survives as the single word "".
  No lowercasing and no other punctuation handling, so "news," and "news" are different words.
* For every (reference sentence, hypothesis sentence) pair the package rebuilds ONE longest common
  subsequence by walking its DP table back from the corner: diagonal on equal words, else up (the reference
  index) only when T[i-1][j] > T[i][j-1], else left. The distinct words of all those LCSs form a union; its
  size is llcs. Different LCSs of the same length hold different words, so the walk's tie-break is replayed.
* m and n count DISTINCT words of the reference and hypothesis; R = llcs/m, P = llcs/n and
  F = 2*((P*R)/(P+R+1e-8)), in that order, so identical texts give 0.999999995.

Why not call the package: it fills a dict-based DP table for every sentence pair and walks it back by recursion,
pure Python. On LongBench-size data (bench/bench_eval.py: 200 records of each of LongBench's six ROUGE datasets,
real lengths) it took 31 s where this module takes 0.37 s, and 41 s against 1.0 s on 10,000 Chinese answers.
Here the DP rows are bit vectors (Allison-Dix / Hyyro's bit-parallel LCS on Python ints), the walk reads T[i][j]
as popcounts of them, and a pair is walked only if it shares a word the union lacks (no other pair can change it).

Where we differ from the package: its walk recurses once per step, so a pair of "."-free sentences long enough to
exceed Python's recursion limit (about 990 steps, a walk takes at most len(ref) + len(hyp) - 1; the exact point
depends on the caller's stack and the Python version) raises RecursionError, which LongBench scores 0.0. We score
such a pair like any other. Real outputs never get there: LongBench's generation lengths keep the longest walk on
bench/bench_eval.py's data at 577 steps (vcsum); only degenerate predictions (hundreds of words without a ".")
can score differently.
"""
from __future__ import annotations

import functools

from Eval.metrics.qa import ratio
from Eval.metrics.registry import Zeroed, explains, metric
from Eval.metrics.zh import cut


def _sentences(text: str) -> list[list[str]]:
    """The package's split: "."-pieces of len > 0, whitespace collapsed; "   " becomes the word ""."""
    if not isinstance(text, str):
        raise TypeError(f"ROUGE needs a str, got {type(text).__name__}")
    return [piece.split() or [""] for piece in text.split(".") if piece]


def _lcs_words(ref: list[str], hyp: list[str]) -> set[str]:
    """The distinct words of the one LCS the package rebuilds for this pair, by replaying its walk."""
    masks: dict[str, int] = {}
    for pos, word in enumerate(ref):
        masks[word] = masks.get(word, 0) | (1 << pos)
    # rows[j] is DP row j (the first j hypothesis words) over the reference positions: a 0 bit at i-1 means
    # T[i][j] = T[i-1][j] + 1, so T[i][j] = i - popcount(rows[j] & (2**i - 1)).
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
def _rouge_counts(hypothesis: str, reference: str) -> tuple[int, int, frozenset]:
    """(m, n, the LCS union) of a pair; cached because the explainer asks again for the best reference."""
    hyps, refs = _sentences(hypothesis), _sentences(reference)
    if not hyps:  # the package checks the hypothesis first (in rouge-1, before rouge-l runs)
        raise ValueError("Hypothesis is empty.")
    if not refs:
        raise ValueError("Reference is empty.")
    m = len({word for sentence in refs for word in sentence})
    n = len({word for sentence in hyps for word in sentence})
    union: set[str] = set()
    hyp_sets = [set(hyp) for hyp in hyps]
    for ref in refs:
        ref_set = set(ref)
        for hyp, hyp_set in zip(hyps, hyp_sets):
            # A walk yields shared words only, so a pair whose shared words are all in the union cannot change it;
            # skipping those takes gov_report-size pairs from 1.2 s to 0.17 s (200 records).
            if not (ref_set & hyp_set) <= union:
                union |= _lcs_words(ref, hyp)
    return m, n, frozenset(union)


def _f_measure(llcs: int, m: int, n: int) -> tuple[float, float, float]:
    """(P, R, F) with the packages' exact float operations: F is their beta = 1 form, 1e-8 in the denominator."""
    recall = llcs / m
    precision = llcs / n
    return precision, recall, 2.0 * ((precision * recall) / (precision + recall + 1e-8))


def rouge_l_f(hypothesis: str, reference: str) -> float:
    """pltrdy ``rouge`` 1.0.1 summary-level ROUGE-L F, bit for bit; ValueError / TypeError where it raises.

    >>> rouge_l_f("the cat sat. on the mat", "the cat sat on the mat")  # union over sentences, 1e-8 in F
    0.999999995
    """
    m, n, union = _rouge_counts(hypothesis, reference)
    return _f_measure(len(union), m, n)[2]


ROUGE_BEST = 2.0 * ((1.0 * 1.0) / (1.0 + 1.0 + 1e-8))  # identical texts: 0.999999995, the packages' F


def _zeroed(exc: Exception) -> Zeroed:
    return Zeroed(f"{type(exc).__name__}: {exc}"[:120])


def _explain_rouge(hypothesis: str, reference: str) -> dict:
    """The numbers behind ROUGE-L F: the distinct words on the LCSs (in the prediction's order), m, n, P, R, F."""
    try:
        m, n, union = _rouge_counts(hypothesis, reference)
    except Exception as exc:  # the same failures the metric zeroes
        reason = _zeroed(exc).reason
        return {"score": 0.0, "zeroed": reason, "text": f"scored 0, as LongBench does when the rouge package fails: "
                                                        f"{reason}"}
    distinct_hyp = list(dict.fromkeys(w for sentence in _sentences(hypothesis) for w in sentence))
    distinct_ref = list(dict.fromkeys(w for sentence in _sentences(reference) for w in sentence))
    words = [w for w in distinct_hyp if w in union]
    precision, recall, score = _f_measure(len(union), m, n)
    shown = " ".join(words[:20]) + (f" … ({len(words) - 20} more)" if len(words) > 20 else "")
    text = (f"{len(union)} distinct word{'s' * (len(union) != 1)} on the LCSs ({shown or 'none'}): "
            f"P = {ratio(len(union), n)} of the prediction's distinct words, R = {ratio(len(union), m)} of the "
            f"reference's, F = 2PR/(P+R+1e-8) = {score:.4g} (beta 1, as the rouge package computes it)")
    return {"prediction_tokens": distinct_hyp, "reference_tokens": distinct_ref, "lcs_words": words,
            "llcs": len(union), "prediction_distinct": n, "reference_distinct": m,
            "precision": precision, "recall": recall, "score": score, "text": text}


@metric("rouge", best=ROUGE_BEST, version="pltrdy-1.0.1")
def rouge(prediction: str, reference: str, **record) -> float:
    """ROUGE-L F as LongBench's ``rouge_score`` (gov_report, qmsum, multi_news, samsum).

    Measures word overlap as the union of longest common subsequences between the "."-split sentences of
    the prediction and the reference, over distinct words, case-sensitive, punctuation other than "." kept.
    Reference: pltrdy ``rouge`` 1.0.1, ``Rouge().get_scores([pred], [gt], avg=True)["rouge-l"]["f"]``, bitwise.
    Quirks: identical texts score 0.999999995 (the 1e-8 in F); an empty or "."-only text scores 0.0 via
    ``Zeroed``. A pair long enough to blow the package's recursion limit is scored, not zeroed (module docstring).

    >>> rouge("The cat sat on the mat.", "The cat lay on the mat.")
    0.8333333283333335
    >>> rouge("...", "The cat").reason
    'ValueError: Hypothesis is empty.'
    """
    try:
        return rouge_l_f(prediction, reference)
    except Exception as exc:  # LongBench's bare except scores every failure 0.0; we keep why
        return _zeroed(exc)


@explains("rouge")
def explain_rouge(prediction: str, reference: str, **record) -> dict:
    """rouge's numbers.

    >>> explain_rouge("The cat sat on the mat.", "The cat lay on the mat.")["text"].split(":")[0]
    '5 distinct words on the LCSs (The cat on the mat)'
    """
    return _explain_rouge(prediction, reference)


@metric("rouge_zh", best=ROUGE_BEST, version="pltrdy-1.0.1")
def rouge_zh(prediction: str, reference: str, **record) -> float:
    """ROUGE-L F on jieba words, as LongBench's ``rouge_zh_score`` (dureader, vcsum).

    Both texts are cut by jieba (precise mode) and re-joined with spaces, then scored like ``rouge``.
    Reference: LongBench ``rouge_zh_score`` over pltrdy ``rouge`` 1.0.1, bitwise (jieba 0.42.1).
    Quirks: Chinese has few ".", so a whole answer is usually one sentence. Full-width punctuation stays a word.
    A non-str prediction raises TypeError, as jieba runs outside LongBench's try/except.

    >>> rouge_zh("我爱我的家，我的家很大", "我的家很大，我爱它")
    0.6153846104142012
    """
    hypothesis, gold = " ".join(cut(prediction)), " ".join(cut(reference))
    try:
        return rouge_l_f(hypothesis, gold)
    except Exception as exc:
        return _zeroed(exc)


@explains("rouge_zh")
def explain_rouge_zh(prediction: str, reference: str, **record) -> dict:
    """rouge_zh's numbers, over the jieba words.

    >>> explain_rouge_zh("人一年天四桂花红。", "臣妾是甄嬛，家父是大理寺少卿。")["lcs_words"]
    ['。']
    """
    return _explain_rouge(" ".join(cut(prediction)), " ".join(cut(reference)))


@functools.lru_cache(maxsize=2)
def _chinese_rouge(raw: bool = False):
    from rouge_chinese import Rouge  # imported on first use: only this metric needs it

    return Rouge(metrics=["rouge-l"], raw_results=True) if raw else Rouge()


@metric("rouge_chinese", best=ROUGE_BEST, version="rouge-chinese-1.0.3")
def rouge_chinese(prediction: str, reference: str, **record) -> float:
    """ROUGE-L F of the ``rouge-chinese`` package on jieba words: a named variant, not LongBench's figure.

    rouge-chinese splits sentences on Chinese end punctuation and takes one LCS over all words with repeats
    (no distinct-word union), so it differs from ``rouge_zh``; use it only to compare with work that used it.
    Computed by the package: ``rouge_chinese.Rouge().get_scores(pred, gt, avg=True)["rouge-l"]["f"]`` (1.0.3),
    on the jieba words joined by spaces. Its dict table is quadratic (seconds on 100,000 characters: see
    ``--sample-time-limit``). Quirks: any exception scores 0.0 (``Zeroed``), an empty text included.

    >>> rouge_chinese("我爱我的家，我的家很大", "我的家很大，我爱它")  # rouge_zh gives 0.615...
    0.555555550617284
    """
    try:
        return _chinese_f(" ".join(cut(prediction)), " ".join(cut(reference)))
    except Exception as exc:
        return _zeroed(exc)


@functools.lru_cache(maxsize=32)
def _chinese_f(hypothesis: str, gold: str) -> float:
    """The package's F; cached because the explainer asks again for the best reference."""
    return _chinese_rouge().get_scores(hypothesis, gold, avg=True)["rouge-l"]["f"]


@explains("rouge_chinese")
def explain_rouge_chinese(prediction: str, reference: str, **record) -> dict:
    """rouge_chinese's numbers, as the package counts them: one LCS over all words (its length, not its words).

    >>> explain_rouge_chinese("我爱我的家，我的家很大", "我的家很大，我爱它")["llcs"]
    5
    """
    value = rouge_chinese(prediction, reference)  # the package's F (cached), or why it failed
    if isinstance(value, Zeroed):
        return {"score": 0.0, "zeroed": value.reason, "text": f"scored 0: {value.reason}"}
    hypothesis, gold = " ".join(cut(prediction)), " ".join(cut(reference))
    counts = _chinese_rouge(raw=True).get_scores(hypothesis, gold)[0]["rouge-l"]
    llcs, hyp_words, ref_words = counts["overlap"], counts["hyp"], counts["ref"]
    precision, recall, score = _f_measure(llcs, ref_words, hyp_words)
    text = (f"LCS of {llcs} words: P = {ratio(llcs, hyp_words)} of the prediction's words, "
            f"R = {ratio(llcs, ref_words)} of the reference's, F = 2PR/(P+R+1e-8) = {score:.4g}")
    return {"llcs": llcs, "prediction_words": hyp_words, "reference_words": ref_words,
            "precision": precision, "recall": recall, "score": score, "text": text}
