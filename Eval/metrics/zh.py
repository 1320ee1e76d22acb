"""Chinese word segmentation for the zh metrics: jieba's precise mode, imported on first use.

Usage:
    from Eval.metrics.zh import cut
    cut("人民币57081.86元")   # ['人民币', '57081.86', '元']

This is the call LongBench's qa_f1_zh / rouge_zh make, ``jieba.cut(text, cut_all=False)`` (HMM on), so words
follow the installed jieba (0.42.1, pinned in requirements.txt). Loading jieba's dictionary costs 1-2 s, more
than scoring an English dataset, so nothing imports jieba until a zh metric runs.
"""
from __future__ import annotations

import functools


@functools.lru_cache(maxsize=1)
def _jieba():
    import logging

    import jieba

    jieba.setLogLevel(logging.INFO)  # its "Building prefix dict" lines would land in eval.py's output
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
