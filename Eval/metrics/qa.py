"""Token-overlap metrics for short answers: LongBench's F1 (en / zh) and BERGEN's family (M, EM,
F1, Precision, Recall, Recall_char3gram), each maximised over the references on its own.

The two normalise alike (SQuAD's recipe) but for one rule: LongBench drops a/an/the with Python's
`re` and BERGEN with the `regex` package, whose word boundary differs next to combining marks and
other non-NFC text (never on realistic answers), so each family uses its reference's module."""
from __future__ import annotations

import functools
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
    """SQuAD normalisation: lowercase, drop ASCII punctuation and a/an/the, collapse whitespace."""
    return " ".join(articles.sub(" ", text.lower().translate(_ASCII_PUNCT)).split())


@functools.cache
def _bergen_articles():
    import regex  # BERGEN's own module (a dependency of nltk)

    return regex.compile(r"\b(a|an|the)\b")


def normalize_bergen(text: str) -> str:
    """BERGEN's normalize(): normalize_en with the `regex` package's word boundary."""
    return normalize_en(text, _bergen_articles())


def bergen_words(text: str) -> list[str]:
    return normalize_bergen(text).split()


def en_words(text: str) -> list[str]:
    return normalize_en(text).split()


def normalize_zh_token(token: str) -> str:
    """LongBench's zh token normalisation: lowercase, no ASCII / CJK punctuation, no whitespace."""
    return "".join(token.lower().translate(_ALL_PUNCT).split())


def zh_tokens(text: str) -> list[str]:
    tokens = (normalize_zh_token(t) for t in cut(text))
    return [t for t in tokens if t]


def _shared_count(prediction: list[str], reference: list[str]) -> int:
    return sum((Counter(prediction) & Counter(reference)).values())


def _f1(same: int, prediction: list[str], reference: list[str]) -> tuple[float, float, float]:
    precision = 1.0 * same / len(prediction)
    recall = 1.0 * same / len(reference)
    return precision, recall, (2 * precision * recall) / (precision + recall)


def token_f1(prediction: list[str], reference: list[str]) -> float:
    """F1 of two token lists by multiset overlap; 0 when nothing overlaps."""
    same = _shared_count(prediction, reference)
    return _f1(same, prediction, reference)[2] if same else 0.0


def _share_found(tokens: list[str], other: list[str]) -> float:
    """The share of `tokens` also in `other` (multisets): a reference's recall, a prediction's
    precision."""
    same = _shared_count(tokens, other)
    return 0.0 if same == 0 else 1.0 * same / len(tokens)


def ratio(part: int, whole: int) -> str:
    """A fraction and its value for an explanation's text: "2/3 = 0.6667"."""
    return f"{part}/{whole} = {part / whole:.4g}" if whole else f"{part}/0"


def explain_overlap(prediction: list[str], reference: list[str], recall_of: str = "") -> dict:
    """token_f1's numbers, or the recall's (`recall_of` names the unit): both token lists, the
    shared tokens with their counts, P, R and F1 with the metric's own float operations."""
    common = Counter(prediction) & Counter(reference)
    shared = {t: common[t] for t in dict.fromkeys(prediction) if t in common}
    same = sum(shared.values())
    words = [f"{t} ×{c}" for t, c in shared.items()]
    listed = ", ".join(words[:12]) + (f", … ({len(words) - 12} more)" if len(words) > 12 else "")
    out = {"prediction_tokens": prediction, "reference_tokens": reference, "shared": shared,
           "shared_count": same}
    if recall_of:
        score = _share_found(reference, prediction)
        text = (f"no {recall_of} of the reference in the prediction: R = 0" if same == 0 else
                f"{same} of the reference's {recall_of}s found ({listed}): "
                f"R = {ratio(same, len(reference))}")
        return {**out, "recall": score, "score": score, "text": text}
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


@metric("exact_match", version="bergen-1")
def exact_match(prediction: str, reference: str, **record) -> float:
    """1 if the normalised prediction equals the normalised reference (BERGEN's EM).

    >>> exact_match("The Paris.", "paris"), exact_match("Paris, France", "Paris")
    (1.0, 0.0)
    """
    return float(normalize_bergen(prediction) == normalize_bergen(reference))


@metric("match", version="bergen-1")
def match(prediction: str, reference: str, **record) -> float:
    """1 if the normalised reference occurs inside the normalised prediction (BERGEN's M), so
    "paris" also matches "parisian".

    >>> match("It is Paris, France.", "paris"), match("London", "Paris")
    (1.0, 0.0)
    """
    return float(normalize_bergen(reference) in normalize_bergen(prediction))


def _explain_normalised(prediction: str, reference: str, *, inside: bool, **record) -> dict:
    """exact_match's (`inside` False) or match's comparison of the two normalised texts."""
    pred, ref = normalize_bergen(prediction), normalize_bergen(reference)
    score = float(ref in pred if inside else pred == ref)
    if inside:
        where = "is inside" if score else "is not inside"
        text = f"normalised reference {ref!r} {where} the normalised prediction: {score:g}"
    else:
        text = f"normalised {pred!r} {'equals' if score else 'differs from'} {ref!r}: {score:g}"
    return {"prediction_normalised": pred, "reference_normalised": ref, "score": score,
            "text": text}


@metric("recall", version="bergen-1")
def recall(prediction: str, reference: str, **record) -> float:
    """Share of the reference's normalised words found in the prediction (multiset overlap;
    BERGEN's Recall).

    >>> recall("Paris is the capital", "capital of France")
    0.3333333333333333
    """
    return _share_found(bergen_words(reference), bergen_words(prediction))


@metric("f1", version="bergen-1")
def f1(prediction: str, reference: str, **record) -> float:
    """BERGEN's F1: word F1 after BERGEN's normalisation (LongBench's is qa_f1).

    >>> f1("The Eiffel Tower, Paris", "Paris")
    0.5
    """
    return token_f1(bergen_words(prediction), bergen_words(reference))


@metric("precision", version="bergen-1")
def precision(prediction: str, reference: str, **record) -> float:
    """BERGEN's Precision: the share of the prediction's normalised words found in the reference.

    >>> precision("Paris is the capital", "capital of France")
    0.3333333333333333
    """
    return _share_found(bergen_words(prediction), bergen_words(reference))


@explains("precision", tokens=bergen_words)
def explain_precision(prediction: list[str], reference: list[str]) -> dict:
    """The overlap, then P alone."""
    out = explain_overlap(prediction, reference)
    same, words = out["shared_count"], len(prediction)
    text = f"{same} of the prediction's words are in the reference: P = {ratio(same, words)}"
    return {**out, "score": _share_found(prediction, reference), "text": text}


def char3grams(text: str) -> list[str]:
    """Character 3-grams of each word; words shorter than 3 characters are kept whole."""
    grams: list[str] = []
    for word in text.split():
        grams.extend([word[i:i + 3] for i in range(len(word) - 2)] if len(word) >= 3 else [word])
    return grams


def bergen_char3grams(text: str) -> list[str]:
    return char3grams(normalize_bergen(text))


@metric("recall_char3gram", version="bergen-1")
def recall_char3gram(prediction: str, reference: str, **record) -> float:
    """Recall over character 3-grams of the normalised words: partial credit for near-misses.

    >>> recall_char3gram("Pariss", "Paris")
    1.0
    """
    return _share_found(bergen_char3grams(reference), bergen_char3grams(prediction))


explains("exact_match")(functools.partial(_explain_normalised, inside=False))
explains("match")(functools.partial(_explain_normalised, inside=True))
explains("qa_f1", tokens=en_words)(explain_overlap)
explains("qa_f1_zh", tokens=zh_tokens)(explain_overlap)
explains("f1", tokens=bergen_words)(explain_overlap)
explains("recall", tokens=bergen_words)(functools.partial(explain_overlap, recall_of="word"))
explains("recall_char3gram", tokens=bergen_char3grams)(
    functools.partial(explain_overlap, recall_of="3-gram"))
