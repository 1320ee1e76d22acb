"""Metrics: every card's example runs; per-sample values equal the reference tools'."""
import doctest
import importlib
import json
import os
import random
import shutil
import signal
import string
import subprocess
import sys
import threading
import time
from collections import Counter

import pytest

from conftest import ROOT, TINYEVAL, needs_shared, needs_package
from Eval.extract import EXTRACTORS, run_extraction
from Eval.metrics import METRICS, metric
from Eval.metrics.zh import cut
from Eval.records import read_records
from Eval.scoring.scorer import score_dataset
from Eval.tasks import TASKS
from Eval.scoring.timelimit import SampleTimeLimit, call_with_limit, limits_available

METRIC_MODULES = sorted({m.fn.__module__ for m in METRICS.values()}
                        | {"Eval.extract", "Eval.choice_answer", "Eval.metrics.zh", "Eval.scoring.judge", "Eval.models.base", "Eval.scoring.timelimit"})


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


def test_metric_helpers():
    from Eval.metrics.code_sim import first_code_line
    from Eval.metrics.bergen_qa import char3grams
    from Eval.metrics.qa import normalize_en, normalize_zh_token, token_f1

    assert normalize_en("The  Cat's hat, a red one!") == "cats hat red one"
    assert normalize_zh_token("57081.86") == "5708186"
    assert token_f1(["a", "b", "b"], ["b", "c"]) == 0.4
    assert char3grams("paris is") == ["par", "ari", "ris", "is"]
    assert first_code_line("\n```python\n# add one\nx = y + 1\n```") == "x = y + 1"


def test_unknown_dataset_suggests_close_names():
    with pytest.raises(KeyError) as err:
        TASKS["multifieldqa-zh"]
    message = err.value.args[0]
    assert message.startswith("unknown dataset 'multifieldqa-zh'. Did you mean: multifieldqa_zh, multifieldqa_en? "
                              "Known: 2wikimqa, GAOKAO_math, ")
    assert message.endswith("To add one: dataset/NAME.jsonl, prompts/NAME.txt and a row in TASKS in Eval/tasks.py.")


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


@needs_shared
@pytest.mark.parametrize("folder, expected", [("internlm", 34.96894252964911), ("internlm2", 48.972085372119444)])
def test_qa_f1_zh_matches_longbench_per_sample(folder, expected):
    records = read_records(TINYEVAL / "pred" / folder / "multifieldqa_zh.jsonl")
    result = score_dataset(TASKS["multifieldqa_zh"], records)
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


@needs_shared
def test_classification_matches_reference_on_trec_and_random_cases():
    records = read_records(TINYEVAL / "pred" / "internlm" / "trec.jsonl")
    result = score_dataset(TASKS["trec"], records)
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


def test_code_sim_is_fuzzywuzzy_on_difflib_and_imports_it_quietly():
    """code_sim calls fuzz.ratio; its values are the pinned ones only on fuzzywuzzy's difflib backend (not
    python-Levenshtein, which requirements.txt leaves out), where fuzz.ratio is difflib's ratio rounded to an
    integer. Loading it prints no "slow pure-python SequenceMatcher" warning."""
    import difflib

    fuzz = needs_package("fuzzywuzzy.fuzz")
    assert fuzz.SequenceMatcher is difflib.SequenceMatcher
    rng = random.Random(3)
    for _ in range(300):
        a, b = ("".join(rng.choice("ab c=;(") for _ in range(rng.randint(1, 40))) for _ in range(2))
        expected = 100 if a == b else int(round(100 * difflib.SequenceMatcher(None, a, b).ratio()))
        assert METRICS["code_sim"](a, b) == expected / 100, (a, b)
    run = subprocess.run([sys.executable, "-W", "error", "-c", "from Eval.metrics.code_sim import code_sim; "
                          "print(code_sim('x = 1', 'x = 2'))"], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert (run.returncode, run.stdout, run.stderr) == (0, "0.8\n", "")


@needs_shared
def test_gaokao_choice_matches_tinyeval_on_qwen2_predictions():
    records = read_records(TINYEVAL / "pred" / "Qwen2" / "GAOKAO_math.jsonl")
    result = score_dataset(TASKS["GAOKAO_math"], records)
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
    extracted = run_extraction(TASKS["GAOKAO_math"].extract, pred, {"answers": answers})
    score = 0.0 if extracted is None else METRICS["gaokao_choice"](extracted, answers[0])
    assert score == expected


def test_bleu_and_its_explanation_are_nltks_sentence_bleu():
    """bleu calls nltk's sentence_bleu; its explainer rebuilds the score from nltk's pieces: every score and every
    explained number equals nltk's own, on random pairs over a small vocabulary (so that matches of every
    order, repeats that clipping must cap, and every length relation occur) and on jieba-cut Chinese."""
    from nltk.translate.bleu_score import SmoothingFunction, brevity_penalty, modified_precision, sentence_bleu

    def nltk_bleu(pred, ref):
        if not pred or not ref:
            return 0.0
        return float(sentence_bleu([ref], pred, smoothing_function=SmoothingFunction().method1))

    rng = random.Random(7)
    vocab = ["a", "b", "c", "d", "the", "cat", "."]
    pairs = [([rng.choice(vocab[:k]) for _ in range(rng.randrange(0, 30))],
              [rng.choice(vocab[:k]) for _ in range(rng.randrange(0, 30))])
             for k in (2, 4, 7) for _ in range(1000)]
    pairs += [(pred, pred) for pred, _ in pairs[:20]]
    pairs += [("a quick brown fox".split(), "the quick brown fox jumps".split()), (["x"] * 500, ["x"] * 3)]
    seen = Counter()
    for pred, ref in pairs:
        expected = nltk_bleu(pred, ref)
        assert METRICS["bleu"](" ".join(pred), " ".join(ref)) == expected, (pred, ref)
        found = METRICS["bleu"].explain(" ".join(pred), " ".join(ref))
        assert found["score"] == expected
        if pred and ref:
            assert found["ngram_matches"] == [[(f := modified_precision([ref], pred, n)).numerator, f.denominator]
                                              for n in range(1, 5)]
            assert found["brevity_penalty"] == brevity_penalty(len(ref), len(pred))
            seen.update({"no word matches": found["ngram_matches"][0][0] == 0, "1.0": expected == 1.0,
                         "smoothed": 0 in [m for m, _ in found["ngram_matches"][1:]] and expected > 0,
                         "brevity penalty < 1": 0 < found["brevity_penalty"] < 1})
    assert min(seen[case] for case in ("no word matches", "1.0", "smoothed", "brevity penalty < 1")) >= 15, seen
    zh = ["臣妾是甄嬛，家父是大理寺少卿。", "臣妾是甄嬛", "家父是少卿", "", "大理寺大理寺大理寺"]
    for pred in zh:
        for ref in zh:
            words = [[t for t in cut(x) if t.strip()] for x in (pred, ref)]
            assert METRICS["bleu_zh"](pred, ref) == nltk_bleu(*words), (pred, ref)


def test_squad_family_takes_max_over_references_separately():
    task_like = {"answers": ["Paris", "the city of Paris France"]}
    scores = {m: max(METRICS[m]("paris france", a) for a in task_like["answers"])
              for m in ("exact_match", "match", "recall", "recall_char3gram")}
    assert scores == {"exact_match": 0.0, "match": 1.0, "recall": 1.0, "recall_char3gram": 1.0}


# --- jieba is called, never changed

def test_zh_cut_is_jiebas_own_cut_and_leaves_jieba_unpatched():
    import jieba
    import jieba.finalseg

    texts = [json.loads(line)["context"] for line in (ROOT / "dataset" / "demo_qa_zh.jsonl").read_text(
        encoding="utf-8").splitlines()][:5] + ["人民币57081.86元, 词词词abc 北京。", "词" * 300, ""]
    assert [cut(t) for t in texts] == [list(jieba.cut(t, cut_all=False)) for t in texts]
    assert jieba.finalseg.viterbi.__module__ == "jieba.finalseg"  # HMM segmentation is jieba's own


# --- the registry finds every module under Eval/metrics/ by itself

NEW_METRIC = '''
from Eval.metrics.registry import metric


@metric("same_length", version="test-1")
def same_length(prediction: str, reference: str, **record) -> float:
    """1 when both texts have the same number of characters.

    >>> same_length("abc", "xyz")
    1.0
    """
    return float(len(prediction) == len(reference))
'''


def _eval_copy(tmp_path, **modules):
    shutil.copytree(ROOT / "Eval", tmp_path / "Eval", ignore=shutil.ignore_patterns("__pycache__", "demo"))
    for name, source in modules.items():
        (tmp_path / "Eval" / "metrics" / f"{name}.py").write_text(source, encoding="utf-8")
    return tmp_path


def _run_in(folder, code):
    env = {**os.environ, "PYTHONPATH": str(folder)}
    return subprocess.run([sys.executable, "-c", code, str(folder)], cwd=folder, env=env, capture_output=True,
                          text=True, timeout=120)


def test_a_new_metric_module_is_found_and_scores(tmp_path):
    folder = _eval_copy(tmp_path, length_metric=NEW_METRIC, _private_helper="raise ImportError('never imported')")
    code = ("import sys, Eval\n"
            "from Eval.metrics import METRICS\n"
            "from Eval.scoring.scorer import best_over_answers\n"
            "m = METRICS['same_length']\n"
            "print(Eval.__file__.startswith(sys.argv[1]), m('abc', 'xyz'), m('ab', 'xyz'),\n"
            "      best_over_answers(m, 'abc', ['x', 'xyz'], None)[:2], 'jieba' in sys.modules, 'nltk' in sys.modules)")
    run = _run_in(folder, code)
    assert run.returncode == 0, run.stderr
    assert run.stdout.split() == ["True", "1.0", "0.0", "(1.0,", "None)", "False", "False"]


def test_a_metric_name_registered_twice_is_an_error(tmp_path):
    with pytest.raises(ValueError, match="'qa_f1' is registered twice"):
        metric("qa_f1")(lambda prediction, reference, **record: 0.0)
    folder = _eval_copy(tmp_path, length_metric=NEW_METRIC, length_again=NEW_METRIC)
    run = _run_in(folder, "from Eval.metrics import METRICS; len(METRICS)")  # the first lookup imports the modules
    assert run.returncode != 0 and "ValueError: metric 'same_length' is registered twice" in run.stderr


# --- the opt-in per-sample time limit

def _busy(seconds):
    end = time.perf_counter() + seconds  # pure-Python work, as a stalled metric is
    n = 0
    while time.perf_counter() < end:
        n += 1
    return n


def _swallowing(seconds):
    try:
        return _busy(seconds)
    except Exception:  # as rouge's catch-all does: the limit must still win
        return 0.0


def _swallowing_then_slow(seconds):
    try:
        _busy(seconds)
    except Exception:  # the first alarm is lost (as one raised inside a gc callback is): the repeat must stop it
        pass
    return _busy(seconds)


class _SlowFinalizer:
    def __del__(self):  # the alarm lands here: Python cannot raise it, it reports it as unraisable
        _busy(1.0)


def _first_alarm_in_a_finalizer(seconds):
    _SlowFinalizer()  # finalized at once, taking the first alarm
    return _busy(seconds)


@pytest.mark.filterwarnings("error::pytest.PytestUnraisableExceptionWarning")  # reported nowhere
def test_time_limit_stops_a_slow_pure_python_call():
    before, hook = signal.getsignal(signal.SIGALRM), sys.unraisablehook
    for fn in (_busy, _swallowing, _swallowing_then_slow, _first_alarm_in_a_finalizer):
        start = time.perf_counter()
        with pytest.raises(SampleTimeLimit, match=r"took longer than 0\.2 s"):
            call_with_limit(fn, 0.2, 30)
        assert time.perf_counter() - start < 5
    assert call_with_limit(_busy, 5, 0.01) > 0 and call_with_limit(max, 5, [1, 3]) == 3
    assert call_with_limit(_busy, None, 0.3) > 0  # no limit asked
    assert signal.getsignal(signal.SIGALRM) is before and signal.getitimer(signal.ITIMER_REAL) == (0.0, 0.0)
    assert sys.unraisablehook is hook


def test_time_limit_keeps_an_outer_timer_and_is_off_outside_the_main_thread():
    old = signal.signal(signal.SIGALRM, lambda *args: None)
    try:
        signal.setitimer(signal.ITIMER_REAL, 30)
        assert call_with_limit(_busy, 5, 0.05) > 0
        assert 25 < signal.getitimer(signal.ITIMER_REAL)[0] <= 30  # re-armed with what remained
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)
    results = []
    worker = threading.Thread(target=lambda: results.append((limits_available(), call_with_limit(_busy, 0.05, 0.3))))
    worker.start()
    worker.join()
    assert results[0][0] is False and results[0][1] > 0  # ran to the end: no limit off the main thread
