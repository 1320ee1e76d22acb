"""Chinese word segmentation shared by the zh metrics; jieba is imported on first use only.

Loading jieba's dictionary costs 1-2 s, more than scoring any English dataset, so nothing imports jieba until
a zh metric actually runs. Segmentation uses precise mode with the HMM on (``jieba.cut(text, cut_all=False)``),
which is what LongBench's qa_f1_zh / rouge_zh use; results depend on the jieba version (0.42.1 tested).
"""
from __future__ import annotations

import functools


@functools.lru_cache(maxsize=1)
def _jieba():
    import logging

    import jieba

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


def jieba_version() -> str:
    return getattr(_jieba(), "__version__", "unknown")
