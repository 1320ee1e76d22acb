"""Token-overlap F1: LongBench's qa_f1 (SQuAD's normalisation) and qa_f1_zh (jieba words); the
token F1 and its explanation are shared with BERGEN's answer metrics (bergen_qa.py)."""
from __future__ import annotations

import re
import string
from collections import Counter

from Eval.metrics.registry import explains, metric
from Eval.metrics.zh import cut

_ARTICLES = re.compile(r"\b(a|an|the)\b")
_ASCII_PUNCT = str.maketrans("", "", string.punctuation)
# LongBench's Chinese punctuation set, character for character (note: it has "》" but not "《").
_ZH_PUNCT = ("！？｡。＂＃＄％＆＇（）＊＋，－／：；＜＝＞＠［＼］＾＿"
             "｀｛｜｝～｟｠｢｣､、〃》「」『』【】〔〕〖〗〘〙〚〛〜"
             "〝〞〟〰〾〿–—‘’‛“”„‟…‧﹏.")
_ALL_PUNCT = str.maketrans("", "", string.punctuation + _ZH_PUNCT)


def normalize_en(text: str, articles: re.Pattern = _ARTICLES) -> str:
    """SQuAD normalisation: lowercase, no ASCII punctuation nor a/an/the, whitespace collapsed
    (BERGEN passes its `regex` package's `articles`)."""
    return " ".join(articles.sub(" ", text.lower().translate(_ASCII_PUNCT)).split())


def en_words(text: str) -> list[str]:
    return normalize_en(text).split()


def normalize_zh_token(token: str) -> str:
    """LongBench's zh token normalisation: lowercase, no ASCII / CJK punctuation, no whitespace."""
    return "".join(token.lower().translate(_ALL_PUNCT).split())


def zh_tokens(text: str) -> list[str]:
    tokens = (normalize_zh_token(t) for t in cut(text))
    return [t for t in tokens if t]


def shared_count(prediction: list[str], reference: list[str]) -> int:
    return sum((Counter(prediction) & Counter(reference)).values())


def _f1(same: int, prediction: list[str], reference: list[str]) -> tuple[float, float, float]:
    precision = 1.0 * same / len(prediction)
    recall = 1.0 * same / len(reference)
    return precision, recall, (2 * precision * recall) / (precision + recall)


def token_f1(prediction: list[str], reference: list[str]) -> float:
    """F1 of two token lists by multiset overlap; 0 when nothing overlaps."""
    same = shared_count(prediction, reference)
    return _f1(same, prediction, reference)[2] if same else 0.0


def ratio(part: int, whole: int) -> str:
    """A fraction and its value for an explanation's text: "2/3 = 0.6667"."""
    return f"{part}/{whole} = {part / whole:.4g}" if whole else f"{part}/0"


def overlap_fields(prediction: list[str], reference: list[str]) -> tuple[dict, str]:
    """Both token lists, the shared tokens with their counts and total; the first 12 listed."""
    common = Counter(prediction) & Counter(reference)
    shared = {t: common[t] for t in dict.fromkeys(prediction) if t in common}
    words = [f"{t} ×{c}" for t, c in shared.items()]
    listed = ", ".join(words[:12]) + (f", … ({len(words) - 12} more)" if len(words) > 12 else "")
    out = {"prediction_tokens": prediction, "reference_tokens": reference, "shared": shared,
           "shared_count": sum(shared.values())}
    return out, listed


def explain_overlap(prediction: list[str], reference: list[str]) -> dict:
    """token_f1's numbers: the overlap_fields, then P, R and F1 computed the metric's way."""
    out, listed = overlap_fields(prediction, reference)
    same = out["shared_count"]
    if same == 0:
        side = "the prediction has no words" if not prediction else "no word in common"
        return {**out, "precision": 0.0, "recall": 0.0, "score": 0.0, "text": f"{side}: F1 = 0"}
    precision, recall, score = _f1(same, prediction, reference)
    text = (f"shared {same} word{'s' * (same > 1)} ({listed}): P = {ratio(same, len(prediction))}, "
            f"R = {ratio(same, len(reference))}, F1 = 2PR/(P+R) = {score:.4g}")
    return {**out, "precision": precision, "recall": recall, "score": score, "text": text}


@metric("qa_f1", version="longbench-1")
def qa_f1(prediction: str, reference: str, **record) -> float:
    """LongBench qa_f1_score: word F1 after SQuAD normalisation (narrativeqa, hotpotqa, ...).

    >>> qa_f1("The Eiffel Tower, Paris", "Paris")
    0.5
    """
    return token_f1(en_words(prediction), en_words(reference))


@metric("qa_f1_zh", version="longbench-1")
def qa_f1_zh(prediction: str, reference: str, **record) -> float:
    """LongBench qa_f1_zh_score: F1 over jieba words, punctuation removed per word after the cut,
    so "57081.86" is the token "5708186": P = 1, R = 2/3 here.

    >>> round(qa_f1_zh("57081.86元", "人民币57081.86元。"), 4)
    0.8
    """
    return token_f1(zh_tokens(prediction), zh_tokens(reference))


explains("qa_f1", tokens=en_words)(explain_overlap)
explains("qa_f1_zh", tokens=zh_tokens)(explain_overlap)
