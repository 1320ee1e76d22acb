"""Chinese words for the zh metrics: LongBench's ``jieba.cut(text, cut_all=False)`` (jieba 0.42.1,
pinned), imported when a zh metric first runs (its dictionary takes 1-2 s to load)."""
from __future__ import annotations

import functools


@functools.lru_cache(maxsize=1)
def _jieba():
    import logging

    import jieba

    jieba.setLogLevel(logging.INFO)  # no "Building prefix dict" lines in eval.py's output
    jieba.initialize()
    return jieba


@functools.lru_cache(maxsize=65536)  # references repeat
def _cut_cached(text: str) -> tuple[str, ...]:
    return tuple(_jieba().cut(text, cut_all=False))


def cut(text: str) -> list[str]:
    """``text`` in words (jieba precise mode).

    >>> cut("人民币57081.86元")
    ['人民币', '57081.86', '元']
    """
    return list(_cut_cached(text))
