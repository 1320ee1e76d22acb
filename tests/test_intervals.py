"""95% intervals of dataset scores (Eval/scoring/intervals.py): the bootstrap agrees with scipy's, Wilson is the
formula, McNemar's exact p is scipy's binomial test, and the same inputs give byte-identical result files."""
import json
import math
import shutil

import numpy as np
import pytest
from scipy import stats

import eval as eval_cli
from conftest import ROOT, TINYEVAL, needs_shared
from Eval.records import read_records
from Eval.scoring import intervals
from Eval.scoring.diff import metric_comparison
from Eval.scoring.intervals import bootstrap_means, mcnemar_exact, score_interval, wilson_interval
from Eval.scoring.scorer import score_dataset
from Eval.tasks import TASKS


@needs_shared
def test_bootstrap_matches_scipy_within_half_a_point_at_n_300():
    records = read_records(TINYEVAL / "pred" / "internlm" / "multifieldqa_zh.jsonl")[:300]
    result = score_dataset(TASKS["multifieldqa_zh"], records)
    summary = result["metrics"]["qa_f1_zh"]
    assert result["n"] == 300 and summary["ci95_method"] == "bootstrap"  # F1 values are not all 0/1
    values = [e["scores"]["qa_f1_zh"] for e in result["per_example"]]
    theirs = stats.bootstrap((np.array(values),), np.mean, method="percentile", confidence_level=0.95,
                             n_resamples=2000, random_state=np.random.default_rng(7)).confidence_interval
    low, high = summary["ci95"]
    assert abs(low - 100 * theirs.low) < 0.5 and abs(high - 100 * theirs.high) < 0.5
    assert low < summary["score"] < high


def _textbook_wilson(k, n):
    z = 1.959963984540054
    p = k / n
    centre = (k + z * z / 2) / (n + z * z)
    half = z * math.sqrt(n) / (n + z * z) * math.sqrt(p * (1 - p) + z * z / (4 * n))
    return centre - half, centre + half


@pytest.mark.parametrize("k,n", [(0, 5), (1, 1), (7, 30), (150, 300), (299, 300), (3, 10_000)])
def test_wilson_is_the_formula(k, n):
    low, high = _textbook_wilson(k, n)
    got = score_interval([1.0] * k + [0.0] * (n - k))
    assert got == {"ci95": [round(100 * max(low, 0.0), 2), round(100 * min(high, 1.0), 2)], "ci95_method": "wilson"}
    ci = stats.binomtest(k, n).proportion_ci(confidence_level=0.95, method="wilson")
    assert wilson_interval(k, n) == pytest.approx((ci.low, ci.high), abs=1e-12)


def test_wilson_worked_value_and_empty_input():
    assert score_interval([1.0, 0.0, 1.0]) == {"ci95": [20.77, 93.85], "ci95_method": "wilson"}
    assert score_interval([]) == {"ci95": None, "ci95_method": None}
    assert score_interval([0.5, 0.5])["ci95"] == [50.0, 50.0]  # no spread: the bootstrap is a point


@pytest.mark.parametrize("b,c", [(0, 0), (0, 1), (1, 0), (3, 11), (5, 5), (0, 25), (40, 61), (700, 760),
                                 (2000, 2150)])
def test_mcnemar_exact_equals_scipy_binomtest(b, c):
    want = 1.0 if b + c == 0 else stats.binomtest(b, b + c, 0.5, alternative="two-sided").pvalue
    assert abs(mcnemar_exact(b, c) - want) <= 1e-12


def test_one_item_of_200_changed_gives_an_interval_containing_zero():
    a = [1.0] * 120 + [0.0] * 80
    b = list(a)
    b[17] = 0.0  # B gets one item wrong that A got right
    got = metric_comparison(a, b)
    assert got["mean_a"] == 60.0 and got["mean_b"] == 59.5 and got["diff"] == -0.5
    low, high = got["ci95"]
    assert low <= 0.0 <= high and low < 0.0
    assert got["mcnemar"] == {"a_only_right": 1, "b_only_right": 0, "p": 1.0}


def test_bootstrap_draws_do_not_depend_on_the_chunk_size(monkeypatch):
    values = np.random.default_rng(3).random(1000)
    whole = bootstrap_means(values)
    monkeypatch.setattr(intervals, "_CHUNK_CELLS", 7_000)  # 7 resamples per chunk
    assert np.array_equal(bootstrap_means(values), whole)


def test_result_files_carry_intervals_and_are_byte_identical_on_a_rerun(tmp_path):
    folder = tmp_path / "pred" / "demo"
    shutil.copytree(ROOT / "tests" / "data" / "pred" / "demo", folder)
    written = ("demo/result.json", "demo/result_detail.json", "results.md", "results.csv",
               *(f"demo/per_example/{p.stem}.scores.jsonl" for p in folder.glob("*.jsonl")))
    runs = []
    for _ in range(2):
        assert eval_cli.main(["--pred-root", str(folder.parent), "--quiet"]) == 0
        runs.append({name: (folder.parent / name).read_bytes() for name in written})
    assert runs[0] == runs[1]
    detail = json.loads(runs[0]["demo/result_detail.json"])
    methods = {(d, m): v["ci95_method"] for d, e in detail.items() for m, v in e["metrics"].items()}
    assert methods == {("GAOKAO_math", "gaokao_choice"): "bootstrap", ("custom_en", "rouge"): "bootstrap",
                       ("custom_en", "bleu"): "bootstrap", ("custom_zh", "rouge_zh"): "bootstrap",
                       ("custom_zh", "bleu_zh"): "bootstrap", ("trec", "classification"): "bootstrap"}
    assert detail["custom_en"]["metrics"]["rouge"]["ci95"] == [0.0, 71.43]
    md = runs[0]["results.md"].decode()
    assert "| demo | [25.00, 100.00] | [0.00, 71.43] | [0.00, 94.74] | [25.00, 100.00] |" in md


def test_the_bootstrap_interval_does_not_depend_on_the_order_of_the_lines():
    """The same records in another order (inference.py rewrites a file in the dataset's order) gave another
    interval: the draws picked positions, not values."""
    rng = np.random.default_rng(5)
    values = list(rng.random(301))
    shuffled = list(values)
    rng.shuffle(shuffled)
    assert score_interval(values) == score_interval(shuffled) == score_interval(values[::-1])
