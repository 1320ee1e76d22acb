"""LongBench parity at its edges: rounding ties in the dataset score and the LongBench-E buckets, and failed
records (an `error` field) scoring 0.

Each figure must come out of its reference's own float arithmetic. LongBench's scorer() sums left to right
(`total_score += score`) and rounds round(100 * total / n, 2); its scorer_e() rounds round(100 * np.mean(bucket),
2), numpy's pairwise sum and numpy's rounding. At a x.xx5 tie the two orders (and Python 3.12's compensated
builtin sum()) land on different sides, so the expected values below are the references' own, worked out by
running LongBench's eval.py (with and without --e) on the same lines.

Usage:
    OMP_WAIT_POLICY=PASSIVE python -m pytest -q tests/test_longbench_edges.py
"""
import json

import numpy as np

import eval as eval_cli
from Eval.scoring.scorer import bucket_percent, percent, score_dataset
from Eval.tasks import TASKS

# Eight qa_f1-like values: 100 * mean is 45.625 give or take an ulp, and the two summation orders disagree.
EIGHT = [0.8, 0.6, 0.25, 0.6, 0.2, 0.5, 0.5, 0.2]
# 32 classification scores (1/k for k matching class names, or 0): a left-to-right loop gives 33.13, numpy's
# mean and Python 3.12's sum() both give 33.12.
THIRTY_TWO = [0.0, 1.0, 0.2, 1 / 3, 0.5, 0.0, 0.2, 1 / 3, 0.25, 1 / 3, 0.0, 0.2, 0.25, 0.2, 1.0, 0.0, 0.2, 0.0, 0.5,
              0.2, 0.2, 0.25, 1.0, 0.2, 0.5, 0.5, 0.5, 0.0, 1.0, 0.25, 0.5, 0.0]
CLASSES = ["Alpha", "Bravo", "Charlie", "Delta", "Echo"]  # none is part of another, so no match is dropped


def test_dataset_score_is_the_left_to_right_loop():
    assert percent(EIGHT) == (45.63, 45.62500000000001)
    assert percent(THIRTY_TWO) == (33.13, 33.12500000000001)
    assert percent([]) == (None, None)


def test_bucket_is_numpy_mean_and_numpy_rounding():
    assert bucket_percent(EIGHT) == 45.62  # pairwise sum: 100 * mean is 45.625 exactly, a tie rounded to even
    assert bucket_percent(THIRTY_TWO) == 33.12
    # numpy rounds rint(x * 100) / 100: 2.675 (below 2.675 in decimal) rounds up there, down in Python's round()
    assert (bucket_percent([0.02675]), percent([0.02675])[0]) == (2.68, 2.67)
    assert (bucket_percent([0.12345]), percent([0.12345])[0]) == (12.34, 12.35)
    assert bucket_percent([]) is None


def test_pairwise_sum_really_differs_from_the_loop():
    # why the two figures can differ: the same eight numbers, summed in numpy's order and left to right
    total = 0.0
    for value in EIGHT:
        total += value
    assert (float(np.sum(EIGHT)), total) == (3.65, 3.6500000000000004)


def trec_record(score, length=100, **extra):
    """A trec line whose classification score is `score` (1/k: the answer and k - 1 other class names)."""
    k = 0 if score == 0 else round(1 / score)
    pred = " ".join(CLASSES[:k]) if k else "Echo"
    return {"pred": pred, "answers": ["Alpha"], "all_classes": CLASSES, "length": length, **extra}


def test_scorer_and_buckets_each_keep_their_reference_tie():
    records = [trec_record(v) for v in THIRTY_TWO]
    result = score_dataset(TASKS["trec"], records)["metrics"]["classification"]
    assert (result["score"], result["score_unrounded"]) == (33.13, 33.12500000000001)
    assert result["length_buckets"] == {"0-4k": 33.12, "4-8k": None, "8k+": None}
    assert result["length_missing"] == 0
    # the first 8 lines moved to 4-8k: each bucket averages only its own lines (LongBench's eval.py --e agrees)
    records = [trec_record(v, length=5000) for v in THIRTY_TWO[:8]] + [trec_record(v) for v in THIRTY_TWO[8:]]
    buckets = score_dataset(TASKS["trec"], records)["metrics"]["classification"]["length_buckets"]
    assert buckets == {"0-4k": 33.47, "4-8k": 32.08, "8k+": None}


def test_failed_record_scores_zero_and_says_why(tmp_path):
    folder = tmp_path / "m"
    folder.mkdir()
    lines = [trec_record(1.0, id="ok"), trec_record(1.0, id="broken", error="503 after 3 retries"),
             trec_record(0.5, id="none", error=None)]
    (folder / "trec.jsonl").write_text("".join(json.dumps(r) + "\n" for r in lines), encoding="utf-8")
    assert eval_cli.main(["--pred-dir", str(folder), "--quiet"]) == 0
    assert json.loads((folder / "result.json").read_text()) == {"trec": 50.0}  # (1 + 0 + 0.5) / 3
    detail = json.loads((folder / "result_detail.json").read_text())["trec"]
    assert detail["failed_records"] == 1 and detail["extraction"]["failed"] == 0
    assert detail["metrics"]["classification"]["zeroed_by_exception"] == {}
    per_example = [json.loads(line) for line in (folder / "per_example" / "trec.scores.jsonl").open()]
    assert [(e["id"], e["scores"]["classification"], e.get("failed")) for e in per_example] == [
        ("ok", 1.0, None), ("broken", 0.0, "503 after 3 retries"), ("none", 0.5, None)]
