"""Token-overlap metrics for short answers: LongBench's F1 (en / zh) and the SQuAD-normalised family.

Every function scores one prediction against ONE reference; the scorer takes the max over references.
"""
from __future__ import annotations

import re
import string
from collections import Counter

from Eval.metrics.registry import metric
from Eval.metrics.zh import cut

_ARTICLES = re.compile(r"\b(a|an|the)\b")
_ASCII_PUNCT = str.maketrans("", "", string.punctuation)
# LongBench's Chinese punctuation set, character for character (note: it has "》" but not "《").
_ZH_PUNCT = ("！？｡。＂＃＄％＆＇（）＊＋，－／：；＜＝＞＠［＼］＾＿｀｛｜｝～｟｠｢｣､、〃》「」『』【】〔〕〖〗〘〙〚〛〜〝〞〟〰〾〿"
             "–—‘’‛“”„‟…‧﹏.")
_ALL_PUNCT = str.maketrans("", "", string.punctuation + _ZH_PUNCT)  # built once: 2x faster than a set scan


def normalize_en(text: str) -> str:
    """SQuAD normalisation: lowercase, drop ASCII punctuation, drop a/an/the, collapse whitespace.

    >>> normalize_en("The  Cat's hat, a red one!")
    'cats hat red one'
    """
    return " ".join(_ARTICLES.sub(" ", text.lower().translate(_ASCII_PUNCT)).split())


def normalize_zh_token(token: str) -> str:
    """LongBench's per-token zh normalisation: lowercase, drop ASCII + CJK punctuation, drop all whitespace.

    >>> normalize_zh_token("57081.86")
    '5708186'
    """
    return "".join(token.lower().translate(_ALL_PUNCT).split())


def token_f1(prediction: list[str], reference: list[str]) -> float:
    """F1 of two token lists by multiset overlap; 0 when nothing overlaps.

    >>> token_f1(["a", "b", "b"], ["b", "c"])
    0.4
    """
    same = sum((Counter(prediction) & Counter(reference)).values())
    if same == 0:
        return 0.0
    precision = 1.0 * same / len(prediction)
    recall = 1.0 * same / len(reference)
    return (2 * precision * recall) / (precision + recall)


@metric("qa_f1", version="longbench-1")
def qa_f1(prediction: str, reference: str, **record) -> float:
    """LongBench qa_f1_score: word F1 after SQuAD normalisation (narrativeqa, hotpotqa, ...).

    >>> qa_f1("The Eiffel Tower, Paris", "Paris")
    0.5
    """
    return token_f1(normalize_en(prediction).split(), normalize_en(reference).split())


def zh_tokens(text: str) -> list[str]:
    tokens = (normalize_zh_token(t) for t in cut(text))
    return [t for t in tokens if t]


@metric("qa_f1_zh", version="longbench-1")
def qa_f1_zh(prediction: str, reference: str, **record) -> float:
    """LongBench qa_f1_zh_score: F1 over jieba words, punctuation removed per word after the cut.

    Because punctuation is removed after segmentation, "57081.86" becomes the single token "5708186":
    the prediction gives ['5708186', '元'], the reference ['人民币', '5708186', '元'], so P = 1, R = 2/3.

    >>> round(qa_f1_zh("57081.86元", "人民币57081.86元。"), 4)
    0.8
    """
    return token_f1(zh_tokens(prediction), zh_tokens(reference))


@metric("exact_match", version="squad-1")
def exact_match(prediction: str, reference: str, **record) -> float:
    """1 if the SQuAD-normalised prediction equals the normalised reference (BERGEN's EM).

    >>> exact_match("The Paris.", "paris"), exact_match("Paris, France", "Paris")
    (1.0, 0.0)
    """
    return float(normalize_en(prediction) == normalize_en(reference))


@metric("match", version="squad-1")
def match(prediction: str, reference: str, **record) -> float:
    """1 if the normalised reference occurs inside the normalised prediction (BERGEN's M).

    A substring test on characters, so "paris" also matches "parisian".

    >>> match("It is Paris, France.", "paris"), match("London", "Paris")
    (1.0, 0.0)
    """
    return float(normalize_en(reference) in normalize_en(prediction))


def _recall(prediction: list[str], reference: list[str]) -> float:
    same = sum((Counter(prediction) & Counter(reference)).values())
    return 0.0 if same == 0 else 1.0 * same / len(reference)


@metric("recall", version="squad-1")
def recall(prediction: str, reference: str, **record) -> float:
    """Share of the reference's normalised words found in the prediction (multiset overlap; BERGEN's Recall).

    >>> recall("Paris is the capital", "capital of France")
    0.3333333333333333
    """
    return _recall(normalize_en(prediction).split(), normalize_en(reference).split())


def char3grams(text: str) -> list[str]:
    """Character 3-grams of each word; words shorter than 3 characters are kept whole.

    >>> char3grams("paris is")
    ['par', 'ari', 'ris', 'is']
    """
    grams: list[str] = []
    for word in text.split():
        grams.extend([word[i:i + 3] for i in range(len(word) - 2)] if len(word) >= 3 else [word])
    return grams


@metric("recall_char3gram", version="squad-1")
def recall_char3gram(prediction: str, reference: str, **record) -> float:
    """Recall over character 3-grams of the normalised words: partial credit for near-miss spellings.

    >>> recall_char3gram("Pariss", "Paris")
    1.0
    """
    return _recall(char3grams(normalize_en(prediction)), char3grams(normalize_en(reference)))
