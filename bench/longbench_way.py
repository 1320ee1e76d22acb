"""LongBench's way of scoring a prediction folder: its eval.py loop and metrics, for bench/bench_eval.py to time.

Usage:
    python bench/longbench_way.py PRED_DIR OUT.json

Written from ../shared/spec/scoring.md (no LongBench code is copied): the metrics call what LongBench's
metrics.py calls, imported at start as it imports them: ``rouge``'s ``Rouge().get_scores`` (any exception is 0.0),
``jieba.cut(x, cut_all=False)``, ``fuzzywuzzy.fuzz.ratio``. The loop is eval.py's: per file, ``all_classes`` from
the last line, trec / triviaqa / samsum / lsht predictions cut to their first line, per line the max over
``answers`` starting from 0, and round(100 * total / n, 2) per dataset. custom_zh is TinyEval's rouge_zh, plus
nltk's sentence_bleu on jieba words (the bleu_zh our eval.py scores too, so both sides do the same work).
Writes {dataset: {"score": figure, "seconds": scoring time, "scores": {our metric name: [per-line value]}}}.
"""
import json
import re
import string
import sys
import time
import warnings
from collections import Counter
from pathlib import Path

import jieba
from rouge import Rouge

with warnings.catch_warnings():
    warnings.simplefilter("ignore")  # fuzzywuzzy's "slow pure-python SequenceMatcher": the backend LongBench used
    from fuzzywuzzy import fuzz

ZH_PUNCTUATION = ("！？｡。＂＃＄％＆＇（）＊＋，－／：；＜＝＞＠［＼］＾＿｀｛｜｝～｟｠｢｣､、〃》「」『』【】〔〕〖〗〘〙〚〛〜〝〞〟〰"
                  "〾〿–—‘’‛“”„‟…‧﹏.")


def normalize_en(text):
    exclude = set(string.punctuation)
    text = "".join(ch for ch in text.lower() if ch not in exclude)
    return " ".join(re.sub(r"\b(a|an|the)\b", " ", text).split())


def normalize_zh(text):
    drop = set(string.punctuation + ZH_PUNCTUATION)
    return "".join("".join(ch for ch in text.lower() if ch not in drop).split())


def f1(prediction, ground_truth):
    same = sum((Counter(prediction) & Counter(ground_truth)).values())
    if same == 0:
        return 0
    precision, recall = 1.0 * same / len(prediction), 1.0 * same / len(ground_truth)
    return (2 * precision * recall) / (precision + recall)


def qa_f1(prediction, ground_truth, **kwargs):
    return f1(normalize_en(prediction).split(), normalize_en(ground_truth).split())


def qa_f1_zh(prediction, ground_truth, **kwargs):
    def words(text):
        return [w for w in (normalize_zh(t) for t in jieba.cut(text, cut_all=False)) if len(w) > 0]
    return f1(words(prediction), words(ground_truth))


def rouge(prediction, ground_truth, **kwargs):
    try:
        scores = Rouge().get_scores([prediction], [ground_truth], avg=True)
    except Exception:
        return 0.0
    return scores["rouge-l"]["f"]


def rouge_zh(prediction, ground_truth, **kwargs):
    return rouge(" ".join(jieba.cut(prediction, cut_all=False)), " ".join(jieba.cut(ground_truth, cut_all=False)))


def classification(prediction, ground_truth, all_classes, **kwargs):
    matches = [name for name in all_classes if name in prediction]
    for term in matches:  # removing while iterating skips the next element: LongBench's figures count on it
        if term in ground_truth and term != ground_truth:
            matches.remove(term)
    return 1.0 / len(matches) if ground_truth in matches else 0.0


def numbers_equal(prediction, wanted):
    numbers = re.findall(r"\d+", prediction)
    return 0.0 if not numbers else sum(str(n) == str(wanted) for n in numbers) / len(numbers)


def retrieval(prediction, ground_truth, **kwargs):
    return numbers_equal(prediction, re.findall(r"Paragraph (\d+)", ground_truth)[0])


def retrieval_zh(prediction, ground_truth, **kwargs):
    return numbers_equal(prediction, re.findall(r"段落(\d+)", ground_truth)[0])


def count(prediction, ground_truth, **kwargs):
    return numbers_equal(prediction, ground_truth)


def code_sim(prediction, ground_truth, **kwargs):
    line = next((x for x in prediction.lstrip("\n").split("\n") if "`" not in x and "#" not in x and "//" not in x), "")
    return fuzz.ratio(line, ground_truth) / 100


def bleu_zh(prediction, ground_truth, **kwargs):
    from nltk.translate.bleu_score import SmoothingFunction, sentence_bleu  # what our bleu_zh names

    hyp = [t for t in jieba.cut(prediction, cut_all=False) if t.strip()]
    ref = [t for t in jieba.cut(ground_truth, cut_all=False) if t.strip()]
    if not hyp or not ref:
        return 0.0
    return float(sentence_bleu([ref], hyp, smoothing_function=SmoothingFunction().method1))


METRICS = {"qa_f1": ("narrativeqa", "qasper", "multifieldqa_en", "hotpotqa", "2wikimqa", "musique", "triviaqa"),
           "qa_f1_zh": ("multifieldqa_zh",), "rouge_zh": ("dureader", "vcsum", "custom_zh"),
           "rouge": ("gov_report", "qmsum", "multi_news", "samsum"), "classification": ("trec", "lsht"),
           "retrieval": ("passage_retrieval_en",), "retrieval_zh": ("passage_retrieval_zh",),
           "count": ("passage_count",), "code_sim": ("lcc", "repobench-p")}
DATASET_METRICS = {dataset: [name] for name, datasets in METRICS.items() for dataset in datasets}
DATASET_METRICS["custom_zh"].append("bleu_zh")
FIRST_LINE = ("trec", "triviaqa", "samsum", "lsht")


def score_file(path):
    dataset = path.stem
    rows = [json.loads(line) for line in path.open(encoding="utf-8")]
    all_classes = rows[-1].get("all_classes")
    out = {}
    for name in DATASET_METRICS[dataset]:
        fn, values, total = globals()[name], [], 0.0
        for row in rows:
            prediction = row["pred"]
            if dataset in FIRST_LINE:
                prediction = prediction.lstrip("\n").split("\n")[0]
            score = 0.0
            for ground_truth in row["answers"]:
                score = max(score, fn(prediction, ground_truth, all_classes=all_classes))
            values.append(score)
            total += score
        out[name] = (round(100 * total / len(rows), 2), values)
    return out


def main(folder, out_path):
    results = {}
    for path in sorted(Path(folder).glob("*.jsonl")):
        start = time.perf_counter()
        scored = score_file(path)
        results[path.stem] = {"score": scored[DATASET_METRICS[path.stem][0]][0],
                              "seconds": time.perf_counter() - start,
                              "scores": {name: values for name, (_, values) in scored.items()}}
    Path(out_path).write_text(json.dumps(results), encoding="utf-8")


if __name__ == "__main__":
    jieba.setLogLevel(20)  # quiet, as our eval.py is
    main(*sys.argv[1:])
