"""Metrics: every card's example runs; per-sample values equal the reference tools'."""
import doctest
import importlib
import random
import string
from collections import Counter

import pytest

from conftest import TINYEVAL
from Eval.extract import EXTRACTORS, run_extraction
from Eval.metrics import METRICS
from Eval.metrics.code_bleu import fuzz_ratio
from Eval.records import read_records
from Eval.scoring import score_dataset
from Eval.tasks import TASKS, get_task

METRIC_MODULES = sorted({m.fn.__module__ for m in METRICS.values()}
                        | {"Eval.extract", "Eval.metrics.zh", "Eval.judge", "Eval.models.base"})


@pytest.mark.parametrize("module", METRIC_MODULES)
def test_docstring_examples_run(module):
    result = doctest.testmod(importlib.import_module(module), optionflags=doctest.NORMALIZE_WHITESPACE)
    assert result.attempted > 0 and result.failed == 0


@pytest.mark.parametrize("name", sorted(METRICS) + sorted(EXTRACTORS))
def test_every_metric_and_extractor_has_a_card_with_an_example(name):
    fn = METRICS[name].fn if name in METRICS else EXTRACTORS[name]
    assert fn.__doc__ and ">>>" in fn.__doc__


def test_every_task_uses_registered_metrics_and_extractors():
    for task in TASKS.values():
        assert task.metrics and all(m in METRICS for m in task.metrics), task.name
        assert all(e in EXTRACTORS for e in task.extract), task.name


def test_unknown_dataset_suggests_close_names():
    with pytest.raises(KeyError, match="Did you mean: multifieldqa_zh") as err:
        get_task("multifieldqa-zh")
    assert "Known datasets" in str(err.value)


def _oracle_zh_f1(pred, gt):
    # Written from the spec's wording: cut, normalise each word, drop empties, multiset F1.
    import jieba
    punct = set(string.punctuation) | set("！？｡。＂＃＄％＆＇（）＊＋，－／：；＜＝＞＠［＼］＾＿｀｛｜｝～｟｠｢｣､、〃》"
                                          "「」『』【】〔〕〖〗〘〙〚〛〜〝〞〟〰〾〿–—‘’‛“”„‟…‧﹏.")
    def words(text):
        out = []
        for w in jieba.cut(text, cut_all=False):
            w = "".join(c for c in w.lower() if c not in punct and not c.isspace())
            if w:
                out.append(w)
        return out
    p, g = words(pred), words(gt)
    same = sum((Counter(p) & Counter(g)).values())
    return 0.0 if same == 0 else 2 * (same / len(p)) * (same / len(g)) / (same / len(p) + same / len(g))


@pytest.mark.parametrize("folder, expected", [("internlm", 34.96894252964911), ("internlm2", 48.972085372119444)])
def test_qa_f1_zh_matches_longbench_per_sample(folder, expected):
    records = read_records(TINYEVAL / "pred" / folder / "multifieldqa_zh.jsonl")
    result = score_dataset(get_task("multifieldqa_zh"), records)
    # unrounded mean computed by LongBench's own scorer on this machine
    assert result["metrics"]["qa_f1_zh"]["score_unrounded"] == expected
    for rec, ex in zip(records, result["per_example"]):
        oracle = max([0.0] + [_oracle_zh_f1(rec["pred"], a) for a in rec["answers"]])
        assert ex["scores"]["qa_f1_zh"] == pytest.approx(oracle, abs=1e-15)


def _oracle_classification(pred, gt, classes):
    matches = [c for c in classes if c in pred]
    for term in matches:  # the reference's remove-while-iterating, on purpose
        if term in gt and term != gt:
            matches.remove(term)
    return 1.0 / len(matches) if gt in matches else 0.0


def test_classification_matches_reference_on_trec_and_random_cases():
    records = read_records(TINYEVAL / "pred" / "internlm" / "trec.jsonl")
    result = score_dataset(get_task("trec"), records)
    assert result["metrics"]["classification"]["score"] == 52.0
    classes = records[-1]["all_classes"]
    for rec, ex in zip(records, result["per_example"]):
        pred = rec["pred"].lstrip("\n").split("\n")[0]
        assert ex["scores"]["classification"] == _oracle_classification(pred, rec["answers"][0], classes)
    rng = random.Random(7)
    vocab = ["Other location", "location", "Other", "Human", "Human being", "being", "Entity", "Other entity"]
    for _ in range(3000):
        pred = " ".join(rng.sample(vocab, rng.randint(0, 4)))
        gt = rng.choice(vocab)
        assert METRICS["classification"](pred, gt, all_classes=vocab) == _oracle_classification(pred, gt, vocab)


def test_classification_strict_drops_every_proper_substring():
    classes = ["Other location", "location", "Other"]
    assert METRICS["classification"]("Other location", "Other location", all_classes=classes) == 0.5
    assert METRICS["classification_strict"]("Other location", "Other location", all_classes=classes) == 1.0


def test_code_sim_equals_fuzzywuzzy_pure_python():
    fuzz = pytest.importorskip("fuzzywuzzy.fuzz", reason="test dependency from tests/requirements.txt")
    rng = random.Random(3)
    pairs = [("", ""), ("", "x"), ("abc", "abc"), ("int a = 1;", "int a=1;")]
    for _ in range(2000):
        n, m = rng.randint(0, 40), rng.randint(0, 40)
        pairs.append(("".join(rng.choice("ab c=;(") for _ in range(n)), "".join(rng.choice("ab c=;(") for _ in range(m))))
    for _ in range(50):  # 200+ characters: difflib's autojunk heuristic kicks in
        pairs.append(("".join(rng.choice("abcdef ") for _ in range(rng.randint(200, 400))),
                      "".join(rng.choice("abcdef ") for _ in range(rng.randint(200, 400)))))
    for a, b in pairs:
        assert fuzz_ratio(a, b) == fuzz.ratio(a, b), (a, b)


def test_gaokao_choice_matches_tinyeval_on_qwen2_predictions():
    records = read_records(TINYEVAL / "pred" / "Qwen2" / "GAOKAO_math.jsonl")
    result = score_dataset(get_task("GAOKAO_math"), records)
    # per-sample values of TinyEval's GAOKAO_math function on these 10 lines
    assert [e["scores"]["gaokao_choice"] for e in result["per_example"]] == [1, 0, 0, 0, 0, 0, 0, 0, 0, 0.5]
    assert result["metrics"]["gaokao_choice"]["score"] == 15.0
    assert result["metrics"]["gaokao_choice"]["length_missing"] == 10  # `length: null` is not a crash


@pytest.mark.parametrize("pred, answers, expected", [
    ("答案是 A、C", ["AC"], 1.0),   # two letters close together
    ("只有 A", ["AC"], 0.5),        # one letter against a multi-letter answer: TinyEval scores 0.5
    ("无法确定", ["AC"], 0.0),       # no letter at all: counted as unparsed, scores 0
    ("A 不对，B 也不对，最后选 D", ["D"], 1.0),  # single choice: the last letter
])
def test_gaokao_choice_edge_cases(pred, answers, expected):
    extracted = run_extraction(get_task("GAOKAO_math").extract, pred, {"answers": answers})
    score = 0.0 if extracted is None else METRICS["gaokao_choice"](extracted, answers[0])
    assert score == expected


def test_bleu_uses_nltk_method1_smoothing():
    from nltk.translate.bleu_score import SmoothingFunction, sentence_bleu
    pred, ref = "a quick brown fox", "the quick brown fox jumps"
    assert METRICS["bleu"](pred, ref) == sentence_bleu([ref.split()], pred.split(),
                                                        smoothing_function=SmoothingFunction().method1)
    assert METRICS["bleu"]("", ref) == 0.0


def test_squad_family_takes_max_over_references_separately():
    task_like = {"answers": ["Paris", "the city of Paris France"]}
    scores = {m: max(METRICS[m]("paris france", a) for a in task_like["answers"])
              for m in ("exact_match", "match", "recall", "recall_char3gram")}
    assert scores == {"exact_match": 0.0, "match": 1.0, "recall": 1.0, "recall_char3gram": 1.0}
