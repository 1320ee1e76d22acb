"""Benchmark: our ROUGE-L against the pltrdy `rouge` 1.0.1 package on TinyEval's 300 multi_news predictions.

Usage:
    python bench/bench_rouge.py [--repeats 3] [--limit N]
    python bench/bench_rouge.py --quick           # smoke run: the first 20 lines, one timed run each

Scores ../shared/reference/tinyeval/pred/internlm/multi_news.jsonl the LongBench way (per line the max over
`answers`, floored at 0; any exception is 0.0) with the package and with Eval.metrics.rouge in the same run,
and prints the best-of-N times, the speed ratio, how many per-line values are bitwise identical and both
dataset figures. Goal: about 0.3 s against about 12 s on the 2-core dev machine, 300/300 identical, 23.66.
"""
import argparse
import json
import os
import sys
import time
from pathlib import Path

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
MULTI_NEWS = ROOT.parent / "shared" / "reference" / "tinyeval" / "pred" / "internlm" / "multi_news.jsonl"
NEEDS_SHARED = True  # reads ../shared (tests/test_bench.py skips it, saying so, where that is absent)

from rouge import Rouge  # noqa: E402  (the reference; test-only dependency)

from Eval.metrics.rouge import rouge  # noqa: E402

QUICK = {"limit": 20, "repeats": 1}  # what --quick sets (tests/test_bench.py runs it)


def package_rouge_score(prediction: str, ground_truth: str) -> float:
    """LongBench's rouge_score."""
    try:
        scores = Rouge().get_scores([prediction], [ground_truth], avg=True)
    except Exception:
        return 0.0
    return scores["rouge-l"]["f"]


def score_all(fn, rows: list[dict]) -> list[float]:
    return [max([0.0] + [fn(row["pred"], gt) for gt in row["answers"]]) for row in rows]


def best_of(fn, rows: list[dict], repeats: int) -> tuple[float, list[float]]:
    best, values = float("inf"), []
    for _ in range(repeats):
        start = time.perf_counter()
        values = score_all(fn, rows)
        best = min(best, time.perf_counter() - start)
    return best, values


def main() -> None:
    p = argparse.ArgumentParser(formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--repeats", type=int, default=3, help="best of this many runs for each implementation")
    p.add_argument("--limit", type=int, default=None, help="only the first N lines")
    p.add_argument("--quick", action="store_true", help=f"smoke run, the same code on a tiny input: {QUICK}")
    args = p.parse_args()
    if args.quick:
        vars(args).update(QUICK)
    rows = [json.loads(line) for line in MULTI_NEWS.open(encoding="utf-8")][:args.limit]
    package_s, expected = best_of(package_rouge_score, rows, args.repeats)
    ours_s, got = best_of(rouge, rows, args.repeats)
    same = sum(float(a).hex() == float(b).hex() for a, b in zip(got, expected))
    print(f"multi_news: {len(rows)} lines, best of {args.repeats}")
    print(f"rouge package  {package_s:8.3f} s   score {round(100 * sum(expected) / len(expected), 2)}")
    print(f"Eval rouge     {ours_s:8.3f} s   score {round(100 * sum(got) / len(got), 2)}")
    print(f"speed ratio    {package_s / ours_s:8.1f}x")
    print(f"identical      {same}/{len(rows)}")


if __name__ == "__main__":
    main()
