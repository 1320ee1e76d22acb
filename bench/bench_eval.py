"""Benchmark: the whole `python eval.py` on TinyEval's three internlm prediction files.

Usage:
    python bench/bench_eval.py [--repeats 3] [--limit N]
    python bench/bench_eval.py --quick            # smoke run: the first 10 lines of each file, one timed run

Copies ../shared/reference/tinyeval/pred/internlm (or the first N lines of each file) to a temporary folder and
times the CLI end to end (process start, imports, jieba's dictionary load, scoring, writing) against a bare
interpreter start measured in the same run. Goal on the 2-core dev machine: under 3 s.
"""
import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
ROOT = Path(__file__).resolve().parents[1]
INTERNLM = ROOT.parent / "shared" / "reference" / "tinyeval" / "pred" / "internlm"
NEEDS_SHARED = True  # reads ../shared (tests/test_bench.py skips it, saying so, where that is absent)
QUICK = {"limit": 10, "repeats": 1}  # what --quick sets (tests/test_bench.py runs it)


def best_of(cmd: list[str], repeats: int) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        subprocess.run(cmd, cwd=ROOT, check=True, stdout=subprocess.DEVNULL)
        times.append(time.perf_counter() - start)
    return min(times)


def main() -> None:
    p = argparse.ArgumentParser(formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--limit", type=int, default=None, help="only the first N lines of each file")
    p.add_argument("--quick", action="store_true", help=f"smoke run, the same code on a tiny input: {QUICK}")
    args = p.parse_args()
    if args.quick:
        vars(args).update(QUICK)
    with tempfile.TemporaryDirectory() as tmp:
        pred = Path(tmp) / "internlm"
        pred.mkdir()
        files = sorted(INTERNLM.glob("*.jsonl"))
        lines = 0
        for path in files:
            rows = path.read_text(encoding="utf-8").splitlines(keepends=True)[:args.limit]
            (pred / path.name).write_text("".join(rows), encoding="utf-8")
            lines += len(rows)
        bare = best_of([sys.executable, "-c", "pass"], args.repeats)
        full = best_of([sys.executable, "eval.py", "--pred-dir", str(pred), "--quiet"], args.repeats)
        print(f"python start: {bare:.2f} s   eval.py on {len(files)} files ({lines:,} lines): {full:.2f} s   "
              f"ratio to bare start: {full / bare:.1f}x   goal < 3 s: {'met' if full < 3 else 'NOT met'}")
        print(open(pred / "result.json", encoding="utf-8").read())


if __name__ == "__main__":
    main()
