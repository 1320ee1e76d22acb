"""Chinese word segmentation shared by the zh metrics; jieba is imported on first use only.

Loading jieba's dictionary costs 1-2 s, more than scoring any English dataset, so nothing imports jieba until
a zh metric actually runs. Segmentation uses precise mode with the HMM on (``jieba.cut(text, cut_all=False)``),
which is what LongBench's qa_f1_zh / rouge_zh use; results depend on the jieba version (0.42.1 tested).

Speed: jieba's HMM (``jieba.finalseg.viterbi``) copies every state's whole path list at every character, so a
run of characters the dictionary cannot join (a degenerate prediction such as "词" * 100000) costs quadratic
time: about 40 s for 100,000 characters (bench/bench_degenerate.py). When jieba is loaded here, ``viterbi``
below replaces it inside ``jieba.finalseg``: the same tables, additions and ``max`` over ``(prob, state)``
tuples (so the same tie-breaks), but with back-pointers, linear. tests/test_metrics.py checks it against
``jieba_viterbi`` (jieba's own function, kept) path for path, and jieba's cut with either, word for word.
"""
from __future__ import annotations

import functools

jieba_viterbi = None  # jieba's own finalseg.viterbi, set when jieba is loaded (the tests compare against it)


def viterbi(obs, states, start_p, trans_p, emit_p):
    """jieba.finalseg.viterbi's result, (log-probability, list of BMES states), in linear time.

    Same float operations in the same order (previous + transition + emission), the same ``max`` over
    ``(prob, previous state)`` tuples, so equal probabilities break ties exactly as jieba does.
    """
    from jieba.finalseg import MIN_FLOAT, PrevStatus

    into = {y: [(y0, trans_p[y0].get(y, MIN_FLOAT)) for y0 in PrevStatus[y]] for y in states}
    probs = {y: start_p[y] + emit_p[y].get(obs[0], MIN_FLOAT) for y in states}
    came_from_at = []  # came_from_at[t - 1][y]: the best state at t - 1 for state y at t
    for char in obs[1:]:
        new_probs, came_from = {}, {}
        for y in states:
            em_p = emit_p[y].get(char, MIN_FLOAT)
            prob, state = max([(probs[y0] + trans + em_p, y0) for y0, trans in into[y]])
            new_probs[y] = prob
            came_from[y] = state
        probs = new_probs
        came_from_at.append(came_from)
    prob, state = max((probs[y], y) for y in "ES")
    path = [state]
    for came_from in reversed(came_from_at):
        state = came_from[state]
        path.append(state)
    path.reverse()
    return prob, path


@functools.lru_cache(maxsize=1)
def _jieba():
    import logging

    import jieba
    import jieba.finalseg

    global jieba_viterbi
    installed = jieba.finalseg.viterbi
    if getattr(installed, "__module__", None) != __name__:  # keep jieba's own function for the parity tests
        jieba_viterbi = installed
        jieba.finalseg.viterbi = viterbi  # finalseg.__cut looks the name up in its module at every call
    jieba.setLogLevel(logging.INFO)  # silence the "Building prefix dict" chatter on stderr
    jieba.initialize()
    return jieba


@functools.lru_cache(maxsize=65536)
def _cut_cached(text: str) -> tuple[str, ...]:
    return tuple(_jieba().cut(text, cut_all=False))


def cut(text: str) -> list[str]:
    """Segment ``text`` into words (jieba precise mode). A non-string is a caller bug, not data to cut.

    >>> cut("人民币57081.86元")
    ['人民币', '57081.86', '元']
    """
    if not isinstance(text, str):
        raise TypeError(f"jieba segmentation needs a str, got {type(text).__name__}")
    # References repeat across samples (and predictions across metrics), so segment each text once.
    return list(_cut_cached(text))
