"""LongBench-size prediction files for bench/bench_eval.py: every LongBench v1 dataset, real-length texts.

Usage:
    from longbench_data import write_longbench, write_chinese
    write_longbench(folder, records=200)      # folder/<dataset>.jsonl for the 21 LongBench v1 datasets
    write_chinese(folder, records=10_000)     # folder/custom_zh.jsonl (rouge_zh, bleu_zh)

Deterministic (one seeded random.Random per file), no model involved. The words are real: English sentences from
TinyEval's multi_news articles and summaries and the repo's demo_qa_en / demo_summ_en contexts, Chinese from
TinyEval's multifieldqa_zh and the repo's demo_qa_zh contexts, code lines from the interpreter's own difflib and
argparse sources. Lengths are LongBench's: a prediction runs to 75-100% of its dataset's max_new_tokens
(Eval/tasks.py, LongBench's dataset2maxlen) at about 0.75 English words or 1.4 Chinese characters a token, and
references have realistic lengths (REFERENCE below: gov_report ~600 words, multi_news ~250, qmsum ~70,
samsum ~20, vcsum ~200 characters). A summary-like prediction mixes sentences of its reference (some words
dropped) with sentences of the same document, so ROUGE sees real overlap; few-shot datasets (trec, triviaqa,
samsum, lsht) continue past the answer on further lines, as LongBench's completion-mode outputs do.
"""
from __future__ import annotations

import argparse
import difflib
import inspect
import json
import random
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
TINYEVAL = ROOT.parent / "shared" / "reference" / "tinyeval"

from Eval.tasks import TASKS  # noqa: E402

LONGBENCH = ("narrativeqa", "qasper", "multifieldqa_en", "multifieldqa_zh", "hotpotqa", "2wikimqa", "musique",
             "dureader", "gov_report", "qmsum", "multi_news", "vcsum", "trec", "triviaqa", "samsum", "lsht",
             "passage_count", "passage_retrieval_en", "passage_retrieval_zh", "lcc", "repobench-p")
EN_PER_TOKEN, ZH_PER_TOKEN = 0.75, 1.4  # words (en) / characters (zh) per generated token
# (low, high) reference length: words for English, characters for Chinese; a few words for the QA answers.
REFERENCE = {"gov_report": (450, 750), "multi_news": (180, 320), "qmsum": (40, 100), "samsum": (12, 30),
             "vcsum": (140, 260), "dureader": (60, 220), "narrativeqa": (2, 12), "qasper": (3, 25),
             "multifieldqa_en": (3, 25), "hotpotqa": (1, 4), "2wikimqa": (1, 4), "musique": (1, 4),
             "triviaqa": (1, 4), "multifieldqa_zh": (4, 30)}
SUMMARIES = ("gov_report", "multi_news", "qmsum", "samsum", "vcsum")
LSHT_CLASSES = ("农业、农村", "军事", "教育", "文化、休闲娱乐", "经济", "体育", "医药、卫生", "科技", "政治", "法律、司法",
                "交通", "环境、气象", "劳动、人事", "社会、劳动", "外交、国际关系", "灾难、事故", "宗教", "能源、水务、水利",
                "城乡建设", "工业", "商业、外贸、海关", "财税、金融", "文体", "港澳台")


def _en_documents() -> list[str]:
    texts = []
    for path in (TINYEVAL / "dataset" / "multi_news.jsonl", ROOT / "dataset" / "demo_summ_en.jsonl",
                 ROOT / "dataset" / "demo_qa_en.jsonl"):
        for line in path.read_text(encoding="utf-8").splitlines():
            row = json.loads(line)
            texts += [row["context"].replace("NEWLINE_CHAR", " "), *row["answers"]]
    return texts


def _zh_documents() -> list[str]:
    texts = []
    for path in (TINYEVAL / "dataset" / "multifieldqa_zh.jsonl", ROOT / "dataset" / "demo_qa_zh.jsonl"):
        texts += [json.loads(line)["context"] for line in path.read_text(encoding="utf-8").splitlines()]
    return texts


class Corpus:
    """Sentences of real documents, and passages of a given length cut from them."""

    def __init__(self, documents: list[str], chinese: bool):
        split = r"(?<=[。！？])" if chinese else r"(?<=[.!?])\s+"
        self.docs = [sentences for doc in documents
                     if len(sentences := [s.strip() for s in re.split(split, doc) if s.strip()]) >= 8]
        self.chinese = chinese

    def size(self, text: str) -> int:
        return len(text) if self.chinese else len(text.split())

    def join(self, sentences: list[str]) -> str:
        return ("" if self.chinese else " ").join(sentences)

    def cut(self, text: str, n: int) -> str:
        """The first n characters (zh) or words (en): where max_new_tokens stops a generation."""
        return text[:n] if self.chinese else " ".join(text.split()[:n])

    def passage(self, rng: random.Random, n: int, doc: list[str] | None = None) -> tuple[list[str], list[str]]:
        """(whole sentences from one document, about n units long; the document)."""
        doc = doc or rng.choice(self.docs)
        start, out = rng.randrange(len(doc)), []
        while sum(map(self.size, out)) < n:
            out.append(doc[(start + len(out)) % len(doc)])
        return out, doc

    def summary(self, rng: random.Random, reference: list[str], doc: list[str], n: int) -> str:
        """A model-like summary of n units: reference sentences in order, some words dropped, interleaved with
        other sentences of the same document, cut at n as the generation length cuts it."""
        out, ref = [], iter(reference)
        while sum(map(self.size, out)) < n:
            sentence = next(ref, None) if rng.random() < 0.5 else None
            if sentence is None:
                out.append(rng.choice(doc))
                continue
            units = list(sentence) if self.chinese else sentence.split()
            kept = [u for u in units if rng.random() > 0.15]
            out.append(("" if self.chinese else " ").join(kept))
        return self.cut(self.join(out), n)


def _cap(dataset: str, rng: random.Random, per_token: float) -> int:
    return max(1, int(TASKS[dataset].max_new_tokens * per_token * rng.uniform(0.75, 1.0)))


def _code_lines() -> list[str]:
    lines = []
    for module in (difflib, argparse):
        lines += [line for line in inspect.getsource(module).splitlines() if line.strip()]
    return lines


def _record(dataset, k, rng, en, zh, code, classes):
    """One LongBench-form record of `dataset` (pred, answers, all_classes, length, _id)."""
    chinese = TASKS[dataset].language == "zh"
    corpus = zh if chinese else en
    cap = _cap(dataset, rng, ZH_PER_TOKEN if chinese else EN_PER_TOKEN)
    all_classes = None
    if dataset in REFERENCE:
        low, high = REFERENCE[dataset]
        reference, doc = corpus.passage(rng, rng.randint(low, high))
        answer = corpus.cut(corpus.join(reference), rng.randint(low, high))
        answers = [answer]
        if dataset == "triviaqa":  # aliases
            answers += [corpus.cut(corpus.join(corpus.passage(rng, 3)[0]), rng.randint(1, 4)) for _ in range(4)]
        pred = corpus.summary(rng, reference, doc, cap)
        if dataset not in SUMMARIES and rng.random() < 0.3:  # a short answer, as QA models often give
            pred = corpus.cut(answer + ("" if chinese else " ") + corpus.join(corpus.passage(rng, 8)[0]),
                              rng.randint(1, cap))
        if dataset in ("triviaqa", "samsum"):  # completion mode: the model goes on with the next shot
            pred = corpus.cut(pred, max(1, cap // 2)) + "\n" + corpus.join(corpus.passage(rng, cap)[0])
    elif dataset in ("trec", "lsht"):
        all_classes = list(classes if dataset == "trec" else LSHT_CLASSES)
        answers = [rng.choice(all_classes)]
        guess = answers[0] if rng.random() < 0.5 else rng.choice(all_classes)
        pred = " " + guess + "\n" + corpus.cut(corpus.join(corpus.passage(rng, cap)[0]), cap)
    elif dataset == "passage_count":
        answers = [str(rng.randint(1, 30))]
        pred = rng.choice(["{}", "There are {} unique paragraphs.", "The final answer is: {}"]).format(
            rng.randint(1, 30))
    elif dataset.startswith("passage_retrieval"):
        name = "段落{}" if chinese else "Paragraph {}"
        answers = [name.format(rng.randint(1, 30))]
        pred = (name.format(rng.randint(1, 30)) if rng.random() < 0.7 else
                corpus.cut(corpus.join(corpus.passage(rng, cap)[0]), cap) + " " + name.format(rng.randint(1, 30)))
    else:  # lcc, repobench-p: the next line of code, and a completion of about 64 tokens
        start = rng.randrange(len(code) - 40)
        answers = [code[start].strip()]
        lines, chars = [code[start] if rng.random() < 0.6 else code[rng.randrange(len(code))]], cap * 4
        while sum(map(len, lines)) < chars:
            lines.append(code[start + len(lines)])
        pred = "\n".join(lines)[:chars]
    length = rng.randint(1_500, 16_000) if chinese else rng.randint(1_000, 12_000)
    return {"pred": pred, "answers": answers, "all_classes": all_classes, "length": length,
            "_id": f"{dataset}-{k}"}


def _trec_classes() -> list[str]:
    first = (TINYEVAL / "pred" / "internlm" / "trec.jsonl").read_text(encoding="utf-8").splitlines()[0]
    return json.loads(first)["all_classes"]


def write_longbench(folder: Path, records: int) -> dict[str, int]:
    """folder/<dataset>.jsonl for each LongBench v1 dataset, `records` lines each; {dataset: records}."""
    en, zh = Corpus(_en_documents(), False), Corpus(_zh_documents(), True)
    code, classes = _code_lines(), _trec_classes()
    folder.mkdir(parents=True, exist_ok=True)
    for number, dataset in enumerate(LONGBENCH):
        rng = random.Random(f"longbench-{number}")
        rows = [_record(dataset, k, rng, en, zh, code, classes) for k in range(records)]
        (folder / f"{dataset}.jsonl").write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows),
                                                 encoding="utf-8")
    return {dataset: records for dataset in LONGBENCH}


def write_chinese(folder: Path, records: int) -> dict[str, int]:
    """folder/custom_zh.jsonl: `records` SFT-style Chinese answers (20-300 characters) and model answers of
    half to twice their length, at most 512 tokens."""
    zh, rng, rows = Corpus(_zh_documents(), True), random.Random("custom_zh"), []
    for k in range(records):
        reference, doc = zh.passage(rng, rng.randint(20, 300))
        answer = zh.cut(zh.join(reference), rng.randint(20, 300))
        n = min(int(512 * ZH_PER_TOKEN), max(5, int(len(answer) * rng.uniform(0.5, 2.0))))
        rows.append({"pred": zh.summary(rng, reference, doc, n), "answers": [answer], "all_classes": None,
                     "length": len(answer) + rng.randint(20, 200), "_id": f"custom_zh-{k}"})
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "custom_zh.jsonl").write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows),
                                            encoding="utf-8")
    return {"custom_zh": records}
