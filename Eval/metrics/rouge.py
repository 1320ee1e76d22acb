"""ROUGE-L F exactly as LongBench scores it with the pltrdy ``rouge`` 1.0.1 package, about 50x faster.

Usage:
    from Eval.metrics.rouge import rouge_l_f, rouge, rouge_zh, rouge_chinese_l_f

    rouge_l_f("the cat sat. on the mat", "the cat sat on the mat")   # raises where the package raises
    rouge("the cat sat", "")   # Zeroed == 0.0, .reason == "ValueError: Reference is empty."
    rouge_chinese_l_f("我 爱 它", "我 爱")   # the rouge-chinese 1.0.3 package's ROUGE-L F, bit for bit

``rouge_l_f(h, r)`` returns the same float, bit for bit, as
``Rouge().get_scores([h], [r], avg=True)["rouge-l"]["f"]``. What that number is (none of it is textbook ROUGE-L):

* The text is cut on every "." into pieces, empty pieces dropped; each piece's whitespace is collapsed and its
  words are the space-separated tokens. A whitespace-only piece survives as the single word "".
  No lowercasing and no other punctuation handling, so "news," and "news" are different words.
* For every (reference sentence, hypothesis sentence) pair the package rebuilds ONE longest common
  subsequence by walking its DP table back from the corner: diagonal on equal words, else up (the reference
  index) only when T[i-1][j] > T[i][j-1], else left. The distinct words of all those LCSs form a union; its
  size is llcs. Different LCSs of the same length hold different words, so the walk's tie-break is replayed.
* m and n count DISTINCT words of the reference and hypothesis; R = llcs/m, P = llcs/n and
  F = 2*((P*R)/(P+R+1e-8)), in that order, so identical texts give 0.999999995.
* The package's walk is recursive, one Python frame per step: a long "."-free pair exceeds Python's recursion
  limit and LongBench's try/except turns that RecursionError into 0.0. We raise RecursionError at the step
  count where it does when LongBench's eval.py scores the line (``REFERENCE_FRAMES``, ``_max_steps``): with the
  default limit of 1000, a walk of 991 steps for ``rouge`` (990 for ``rouge_zh``) is already too deep.

Speed: the DP rows come from a bit-parallel LCS (Allison-Dix / Hyyro, Python ints as bit vectors) and the walk
reads T[i][j] as popcounts of those rows. Pairs that cannot add a word to the union (nor raise) are never
walked, repeated sentences are dropped, and an index from words to sentences finds the pairs worth a walk, so
a 100,000-character prediction of tiny "."-pieces scores in milliseconds, not in minutes of all-pairs work.
"""
from __future__ import annotations

import bisect
import functools
import re
import sys

from Eval.metrics.qa import ratio
from Eval.metrics.registry import Zeroed, explains, metric
from Eval.metrics.zh import cut

# Frames on the stack when the package's recursive walk starts as LongBench v1's eval.py scores a line:
# <module> (its __main__ block), scorer() or scorer_e() (the same depth), rouge_score, Rouge.get_scores,
# _get_avg_scores, the metric lambda, rouge_l_summary_level, _union_lcs, _recon_lcs, then the first _recon.
# rouge_zh_score calls rouge_score, one frame more. The reference depends on its caller (a plain script calling
# rouge_score from a loop fails one step later), so we pin LongBench's own path; it calls no comprehension or C
# function between frames, so the count is the same on 3.10 to 3.13 (measured against eval.py itself).
LONGBENCH_CALLER_FRAMES = 3  # <module>, scorer, rouge_score
REFERENCE_FRAMES = LONGBENCH_CALLER_FRAMES + 7
# CPython caches the ints -5..256, so for larger DP indices the package's dict lookup compares two distinct int
# objects, and on 3.11 that comparison counts one more recursion level inside the deepest frame.
_CACHED_INT_MAX = 256


def _max_steps(frames: int, last_lookup_index: int) -> int:
    """Most walk steps the package survives (step s runs in frame ``frames + s - 1``, its last call one deeper).

    Measured against the package under LongBench's call path: on 3.11.7 (the tested interpreter;
    tests/test_rouge.py checks left, diagonal and real-text walks on both sides of the limit) and, for left and
    diagonal walks and the cached-int edge, on 3.10, 3.12 and 3.13 with LongBench's eval.py itself.
    ``last_lookup_index`` is the largest DP index the last unequal-word step looks up (0 when the last step was
    diagonal, which looks nothing up).
    """
    limit = sys.getrecursionlimit()
    if sys.version_info >= (3, 12):  # only Python frames count against the limit
        return limit - frames
    if sys.version_info >= (3, 11):  # C-level comparisons share the counter; small ints short-circuit on identity
        return limit - frames - (last_lookup_index > _CACHED_INT_MAX)
    return limit - frames - 1  # 3.10 and older (no specialising interpreter): the base frame's compare counts


def _sentences(text: str) -> list[list[str]]:
    """The package's split: "."-pieces of len > 0, whitespace collapsed; "   " becomes the word ""."""
    if not isinstance(text, str):
        raise TypeError(f"ROUGE needs a str, got {type(text).__name__}")
    return [piece.split() or [""] for piece in text.split(".") if piece]


def _dp_rows(ref: list[str], hyp: list[str], masks: dict[str, int]) -> list[int]:
    """rows[j] encodes DP row j (the first j hypothesis words) over the reference positions: a 0 bit at i-1
    means T[i][j] = T[i-1][j] + 1, so T[i][j] = i - popcount(rows[j] & (2**i - 1))."""
    full = (1 << len(ref)) - 1
    row = full
    rows = [row]
    for word in hyp:
        match = row & masks.get(word, 0)
        row = ((row + match) | (row - match)) & full
        rows.append(row)
    return rows


def _walk(ref: list[str], hyp: list[str], masks: dict[str, int]) -> tuple[set[str], int, int]:
    """Replay the package's traceback: (distinct LCS words, number of steps, last step's largest DP index)."""
    rows = _dp_rows(ref, hyp, masks)
    i, j = len(ref), len(hyp)
    words: set[str] = set()
    steps = 0
    last_i = last_j = 0  # where the last unequal-word step looked (0, 0 when the last step was diagonal)

    def table(i: int, j: int) -> int:  # T[i][j] from row j's prefix popcount
        return i - (rows[j] & ((1 << i) - 1)).bit_count()

    here, left = table(i, j), table(i, j - 1) if j else 0
    while i and j:
        steps += 1
        if ref[i - 1] == hyp[j - 1]:
            words.add(ref[i - 1])
            i -= 1
            j -= 1
            last_i = last_j = 0
            here = here - 1  # a match cell is its diagonal neighbour + 1
            left = table(i, j - 1) if j else 0
            continue
        last_i, last_j = i, j
        # Going up in a column costs one bit test: T[i-1][j] = T[i][j] - 1 + bit i-1 of row j. The walk is the
        # metric's hot loop, so popcounts are paid only when the walk leaves a column.
        up = here - 1 + ((rows[j] >> (i - 1)) & 1)
        if up > left:  # ties go left, as in the package
            left = left - 1 + ((rows[j - 1] >> (i - 1)) & 1)
            i -= 1
            here = up
        else:
            j -= 1
            here = left
            left = table(i, j - 1) if j else 0
    return words, steps, max(last_i, last_j)


def _too_deep(steps: int) -> RecursionError:
    return RecursionError(f"the rouge package's recursive LCS walk of at least {steps} steps exceeds the recursion limit "
                          f"({sys.getrecursionlimit()})")


def _lcs_union(refs: list[list[str]], hyps: list[list[str]], frames: int) -> set[str]:
    """Union over all sentence pairs of one reconstructed LCS's words, raising RecursionError like the package.

    The package walks every (reference, hypothesis) sentence pair; only pairs that can change the union or
    raise are walked here, in the package's order, so the union and the first error are the same.
    """
    safe_steps = _max_steps(frames, sys.maxsize)  # a bound that holds whatever the walk's last step is
    # A repeated sentence walks exactly as its first copy did: it can neither add a word nor raise where the
    # first copy did not, so it is dropped (a degenerate "a. a. a. ..." prediction becomes one sentence).
    refs = list(dict.fromkeys(map(tuple, refs)))
    hyps = list(dict.fromkeys(map(tuple, hyps)))
    hyp_sets = [set(hyp) for hyp in hyps]
    hyps_with: dict[str, list[int]] = {}  # word -> the hypothesis sentences holding it, in order
    for k, hyp_set in enumerate(hyp_sets):
        for word in hyp_set:
            hyps_with.setdefault(word, []).append(k)
    by_length = sorted(range(len(hyps)), key=lambda k: len(hyps[k]))
    lengths = [len(hyps[k]) for k in by_length]
    union: set[str] = set()
    for ref in refs:
        ref_set = set(ref)
        # A walk never exceeds len(ref) + len(hyp) - 1 steps, so short pairs cannot hit the limit, and a pair
        # whose shared words are all in the union already cannot change it. The union only grows, so the pairs
        # worth a look are the long ones and those sharing a word the union lacks now; the rest stay skipped.
        candidates = set(by_length[bisect.bisect_right(lengths, safe_steps + 1 - len(ref)):])
        for word in ref_set - union:
            candidates.update(hyps_with.get(word, ()))
        masks: dict[str, int] | None = None
        walked: set[tuple[str, ...]] = set()
        for k in sorted(candidates):
            hyp = hyps[k]
            if len(ref) + len(hyp) - 1 <= safe_steps:
                if (ref_set & hyp_sets[k]) <= union:
                    continue
                # At a hypothesis word the reference lacks the walk always goes left, so a short pair's words
                # depend only on the hypothesis' reference words, in order: walk each such sequence once.
                shared = tuple(word for word in hyp if word in ref_set)
                if shared in walked:
                    continue
                walked.add(shared)
            if min(len(ref), len(hyp)) > _max_steps(frames, 0):  # a walk takes at least this many steps
                raise _too_deep(min(len(ref), len(hyp)))
            if masks is None:
                masks = {}
                for pos, word in enumerate(ref):
                    masks[word] = masks.get(word, 0) | (1 << pos)
            words, steps, last_index = _walk(ref, hyp, masks)
            if steps > _max_steps(frames, last_index):
                raise _too_deep(steps)
            union |= words
    return union


@functools.lru_cache(maxsize=32)
def _rouge_counts(hypothesis: str, reference: str, frames: int) -> tuple[int, int, frozenset]:
    """(m, n, the LCS union) of a pair; cached because the explainer asks again for the best reference."""
    hyps, refs = _sentences(hypothesis), _sentences(reference)
    if not hyps:  # the package checks the hypothesis first (in rouge-1, before rouge-l runs)
        raise ValueError("Hypothesis is empty.")
    if not refs:
        raise ValueError("Reference is empty.")
    m = len({word for sentence in refs for word in sentence})
    n = len({word for sentence in hyps for word in sentence})
    return m, n, frozenset(_lcs_union(refs, hyps, frames))


def _f_measure(llcs: int, m: int, n: int) -> tuple[float, float, float]:
    """(P, R, F) with the package's exact float operations: F is its beta = 1 form, 1e-8 in the denominator."""
    recall = llcs / m
    precision = llcs / n
    return precision, recall, 2.0 * ((precision * recall) / (precision + recall + 1e-8))


def _rouge_l_f(hypothesis: str, reference: str, frames: int) -> float:
    m, n, union = _rouge_counts(hypothesis, reference, frames)
    return _f_measure(len(union), m, n)[2]


def _explain_rouge(hypothesis: str, reference: str, frames: int) -> dict:
    """The numbers behind ROUGE-L F: the distinct words on the LCSs (in the prediction's order), m, n, P, R, F."""
    try:
        m, n, union = _rouge_counts(hypothesis, reference, frames)
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


def rouge_l_f(hypothesis: str, reference: str) -> float:
    """pltrdy ``rouge`` 1.0.1 summary-level ROUGE-L F, bit for bit; ValueError / RecursionError where it raises.

    >>> rouge_l_f("the cat sat. on the mat", "the cat sat on the mat")  # union over sentences, 1e-8 in F
    0.999999995
    """
    return _rouge_l_f(hypothesis, reference, REFERENCE_FRAMES)


ROUGE_BEST = 2.0 * ((1.0 * 1.0) / (1.0 + 1.0 + 1e-8))  # identical texts: 0.999999995, the packages' F


def _zeroed(exc: Exception) -> Zeroed:
    return Zeroed(f"{type(exc).__name__}: {exc}"[:120])


@metric("rouge", best=ROUGE_BEST, version="pltrdy-1.0.1")
def rouge(prediction: str, reference: str, **record) -> float:
    """ROUGE-L F as LongBench's ``rouge_score`` (gov_report, qmsum, multi_news, samsum).

    Measures word overlap as the union of longest common subsequences between the "."-split sentences of
    the prediction and the reference, over distinct words, case-sensitive, punctuation other than "." kept.
    Reference: pltrdy ``rouge`` 1.0.1, ``Rouge().get_scores([pred], [gt], avg=True)["rouge-l"]["f"]``, bitwise.
    Quirks: identical texts score 0.999999995 (the 1e-8 in F); an empty or "."-only text, and a pair long
    enough to blow the package's recursion limit (long "."-free sentences), score 0.0 via ``Zeroed``.

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
    return _explain_rouge(prediction, reference, REFERENCE_FRAMES)


@metric("rouge_zh", best=ROUGE_BEST, version="pltrdy-1.0.1")
def rouge_zh(prediction: str, reference: str, **record) -> float:
    """ROUGE-L F on jieba words, as LongBench's ``rouge_zh_score`` (dureader, vcsum).

    Both texts are cut by jieba (precise mode) and re-joined with spaces, then scored like ``rouge``.
    Reference: LongBench ``rouge_zh_score`` over pltrdy ``rouge`` 1.0.1, bitwise (jieba 0.42.1).
    Quirks: Chinese has few ".", so a whole answer is usually one sentence; long dissimilar answers exceed
    the package's recursion limit and score 0.0 (``Zeroed``). Full-width punctuation stays a word.
    A non-str prediction raises TypeError, as jieba runs outside LongBench's try/except.

    >>> rouge_zh("我爱我的家，我的家很大", "我的家很大，我爱它")
    0.6153846104142012
    """
    hypothesis, gold = " ".join(cut(prediction)), " ".join(cut(reference))
    try:
        # rouge_zh_score calls rouge_score, one frame deeper than rouge, so its walk limit is one step lower
        return _rouge_l_f(hypothesis, gold, REFERENCE_FRAMES + 1)
    except Exception as exc:
        return _zeroed(exc)


@explains("rouge_zh")
def explain_rouge_zh(prediction: str, reference: str, **record) -> dict:
    """rouge_zh's numbers, over the jieba words.

    >>> explain_rouge_zh("人一年天四桂花红。", "臣妾是甄嬛，家父是大理寺少卿。")["lcs_words"]
    ['。']
    """
    return _explain_rouge(" ".join(cut(prediction)), " ".join(cut(reference)), REFERENCE_FRAMES + 1)


# rouge-chinese's sentence split, rule for rule: a break after Chinese or ASCII end punctuation, after six dots
# and after two "…", unless a closing quote follows (then after the quote), applied in this order.
_CHINESE_BREAKS = tuple((re.compile(pattern), r"\1\n\2") for pattern in (
    "([。！？\\?])([^”’])", "(\\.{6})([^”’])", "(\\…{2})([^”’])", "([。！？\\?][”’])([^，。！？\\?])"))


def _chinese_words(text: str) -> tuple[list[str], list[str]]:
    """rouge-chinese's (sentences, words): its split, each piece's whitespace collapsed, then every word."""
    for pattern, replacement in _CHINESE_BREAKS:
        text = pattern.sub(replacement, text)
    sentences = [" ".join(piece.split()) for piece in text.rstrip().split("\n") if piece]
    return sentences, [word for sentence in sentences for word in sentence.split(" ")]


def lcs_length(x: list[str], y: list[str]) -> int:
    """Length of a longest common subsequence of two word lists (bit-parallel: one big-int row over the
    longer list, one loop step per word of the shorter).

    >>> lcs_length("a b c d".split(), "b d a".split())
    2
    """
    if len(x) < len(y):
        x, y = y, x
    masks: dict[str, int] = {}
    for pos, word in enumerate(x):
        masks[word] = masks.get(word, 0) | (1 << pos)
    full = row = (1 << len(x)) - 1
    for word in y:
        match = row & masks.get(word, 0)
        row = ((row + match) | (row - match)) & full
    return len(x) - row.bit_count()


def rouge_chinese_l_f(hypothesis: str, reference: str) -> float:
    """``rouge_chinese.Rouge().get_scores(h, r, avg=True)["rouge-l"]["f"]`` (1.0.3) bit for bit, in
    O(n * m / 64) instead of its O(n * m) dict table; ValueError where the package raises.

    >>> rouge_chinese_l_f("a a b", "a a")  # one LCS over all words, repeats counted: P = 2/3, R = 2/2
    0.7999999952000001
    """
    hyp_sentences, hyp_words = _chinese_words(hypothesis)
    ref_sentences, ref_words = _chinese_words(reference)
    if not hyp_sentences:  # the package checks these in its rouge-1 step, hypothesis first
        raise ValueError("Hypothesis is empty.")
    if not ref_sentences:
        raise ValueError("Reference is empty.")
    return _f_measure(lcs_length(ref_words, hyp_words), len(ref_words), len(hyp_words))[2]


@metric("rouge_chinese", best=ROUGE_BEST, version="rouge-chinese-1.0.3")
def rouge_chinese(prediction: str, reference: str, **record) -> float:
    """ROUGE-L F of the ``rouge-chinese`` package on jieba words: a named variant, not LongBench's figure.

    rouge-chinese splits sentences on Chinese end punctuation and takes one LCS over all words with repeats
    (no distinct-word union), so it differs from ``rouge_zh``; use it only to compare with work that used it.
    Reference: ``rouge_chinese.Rouge().get_scores(pred, gt, avg=True)["rouge-l"]["f"]`` (1.0.3), bitwise,
    computed by ``rouge_chinese_l_f`` (the package's dict table is quadratic: over 10 s on 100,000 characters).
    Quirks: any exception scores 0.0 (``Zeroed``), an empty text included.

    >>> rouge_chinese("我爱我的家，我的家很大", "我的家很大，我爱它")  # rouge_zh gives 0.615...
    0.555555550617284
    """
    try:
        return rouge_chinese_l_f(" ".join(cut(prediction)), " ".join(cut(reference)))
    except Exception as exc:
        return _zeroed(exc)


@explains("rouge_chinese")
def explain_rouge_chinese(prediction: str, reference: str, **record) -> dict:
    """rouge_chinese's numbers: one LCS over all words, repeats counted (its length, not its words)."""
    hypothesis, gold = " ".join(cut(prediction)), " ".join(cut(reference))
    try:
        rouge_chinese_l_f(hypothesis, gold)  # raises where the metric zeroes
    except Exception as exc:
        reason = _zeroed(exc).reason
        return {"score": 0.0, "zeroed": reason, "text": f"scored 0: {reason}"}
    hyp_words, ref_words = _chinese_words(hypothesis)[1], _chinese_words(gold)[1]
    llcs = lcs_length(ref_words, hyp_words)
    precision, recall, score = _f_measure(llcs, len(ref_words), len(hyp_words))
    text = (f"LCS of {llcs} words: P = {ratio(llcs, len(hyp_words))} of the prediction's words, "
            f"R = {ratio(llcs, len(ref_words))} of the reference's, F = 2PR/(P+R+1e-8) = {score:.4g}")
    return {"llcs": llcs, "prediction_words": len(hyp_words), "reference_words": len(ref_words),
            "precision": precision, "recall": recall, "score": score, "text": text}
