"""Benchmark: the whole `python eval.py` on TinyEval's three internlm prediction files.

Usage:
    python bench/bench_eval.py [--repeats 3]

Copies ../shared/reference/tinyeval/pred/internlm to a temporary folder and times the CLI end to end (process
start, imports, jieba's dictionary load, scoring, writing) against a bare interpreter start measured in the
same run. Goal on the 2-core dev machine: under 3 s.
"""
import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
ROOT = Path(__file__).resolve().parents[1]
INTERNLM = ROOT.parent / "shared" / "reference" / "tinyeval" / "pred" / "internlm"


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
    args = p.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        pred = Path(tmp) / "internlm"
        shutil.copytree(INTERNLM, pred)
        bare = best_of([sys.executable, "-c", "pass"], args.repeats)
        full = best_of([sys.executable, "eval.py", "--pred-dir", str(pred), "--quiet"], args.repeats)
        print(f"python start: {bare:.2f} s   eval.py on 3 files (1,101 lines): {full:.2f} s   "
              f"ratio to bare start: {full / bare:.1f}x   goal < 3 s: {'met' if full < 3 else 'NOT met'}")
        print(open(pred / "result.json", encoding="utf-8").read())


if __name__ == "__main__":
    main()
