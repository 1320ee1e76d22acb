"""Benchmark: resuming a finished run of 20,000 records (what `python inference.py` does before it finds nothing
left to generate): read every record, check each against its example's content hash, plan the (empty) rest, and
leave the merged file as it is.

Usage:
    python bench/bench_resume.py            # 20,000 records, the baseline too (about 10 s of it)
    python bench/bench_resume.py --quick    # 2,000 records; the baseline at 2,000

Baseline: the same steps with the set of finished ids copied at every membership test, as the `done_ids`
property of earlier versions did (one copy per example: quadratic). `--baseline-records` can make it smaller;
the ratio is taken at the baseline's size and our time at the full size is printed beside it.
"""
import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from Eval.inference.predictions import PredictionFile, merge_predictions  # noqa: E402
from Eval.records import content_hash  # noqa: E402

QUICK = {"records": 2000, "baseline_records": 2000}


def build(folder: Path, n: int) -> tuple[Path, dict[str, str]]:
    """A finished prediction file of `n` records, as inference.py writes them, and its examples' hashes."""
    path = folder / f"big{n}.jsonl"
    expected = {f"big-{i}": content_hash({"instruction": "Answer.", "input": f"question {i}", "output": f"a {i}"})
                for i in range(n)}
    with open(path, "w", encoding="utf-8") as f:
        for rid, sha in expected.items():
            f.write(json.dumps({"id": rid, "example_sha256": sha, "dataset": "big", "question": "Answer.",
                                "pred": "some answer " * 5, "answers": ["a"], "all_classes": None, "length": 12,
                                "prompt_tokens": 40, "truncated_tokens": 0, "gen_tokens": 20, "finish_reason": "stop",
                                "latency_s": 0.01, "batch_size": 16}) + "\n")
    return path, expected


def resume(path: Path, expected: dict[str, str], copy_each_time: bool) -> tuple[float, int]:
    """Seconds to resume, and how many examples were left to do (0 expected)."""
    start = time.perf_counter()
    out = PredictionFile(path, expected=expected)
    ids = list(expected)
    out.status(ids)
    todo = [i for i in ids if i not in (set(out.done) if copy_each_time else out.done)]
    merge_predictions(path, ids, ids, expected)
    return time.perf_counter() - start, len(todo)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--records", type=int, default=20000, help="finished records in the file")
    p.add_argument("--baseline-records", type=int, default=20000, help="records for the quadratic baseline")
    p.add_argument("--quick", action="store_true", help="tiny sizes (tests/test_bench.py runs this)")
    args = p.parse_args()
    if args.quick:
        vars(args).update(QUICK)
    with tempfile.TemporaryDirectory() as tmp:
        small = build(Path(tmp), args.baseline_records)
        base_s, base_left = resume(*small, copy_each_time=True)
        ours_small_s, _ = resume(*small, copy_each_time=False)
        big = build(Path(tmp), args.records)
        before = big[0].read_bytes()
        ours_s, left = resume(*big, copy_each_time=False)
        untouched = big[0].read_bytes() == before
    print(f"resume of {args.baseline_records} finished records: copying the done set per example {base_s:.3f} s, "
          f"ours {ours_small_s:.3f} s = {base_s / ours_small_s:.1f}x")
    print(f"resume of {args.records} finished records: ours {ours_s:.3f} s, {left} left to do "
          f"(baseline {base_left}), file {'left as it was' if untouched else 'REWRITTEN'}")


if __name__ == "__main__":
    main()
