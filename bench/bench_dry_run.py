"""Benchmark: what `inference.py dry-run` costs next to the run it previews, and how well its figures predict it.

Usage:
    python bench/bench_dry_run.py            # the demo model on every demo dataset, 10 examples each
    python bench/bench_dry_run.py --quick    # 3 examples of two datasets (tests/test_bench.py runs this)

Baseline: the real run (`python inference.py` with the same datasets, --limit and --max-length) measured in the same
process. Printed: both wall times and their ratio; the dry run's prompt-token total beside the real records' (equal
when the dry run renders what the model is given), and its bound on generated tokens beside the real count.
"""
import argparse
import contextlib
import io
import json
import os
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import inference  # noqa: E402

DATASETS = "custom_en,custom_zh,demo_gaokao,demo_qa_en,demo_qa_zh,demo_summ_en,demo_trec"
QUICK = {"datasets": "demo_qa_en,demo_trec", "limit": 3}


def timed(argv: list[str]) -> float:
    """Seconds of one in-process inference.py call (its output hidden)."""
    start = time.perf_counter()
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        code = inference.main(argv)
    if code != 0:
        raise SystemExit(f"inference.py {' '.join(argv)} exited with {code}")
    return time.perf_counter() - start


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--datasets", default=DATASETS, help="comma-separated demo datasets")
    p.add_argument("--limit", type=int, default=10, help="examples per dataset")
    p.add_argument("--max-length", type=int, default=1024, help="context window (some prompts are cut)")
    p.add_argument("--quick", action="store_true", help="tiny sizes (tests/test_bench.py runs this)")
    args = p.parse_args()
    if args.quick:
        vars(args).update(QUICK)
    common = ["--datasets", args.datasets, "--limit", str(args.limit), "--max-length", str(args.max_length),
              "-M", "threads=2"]
    with tempfile.TemporaryDirectory() as tmp:
        dry_s = timed(["dry-run", *common, "--out-dir", str(Path(tmp) / "dry")])
        run_s = timed([*common, "--out-dir", str(Path(tmp) / "run")])
        summary = json.loads((Path(tmp) / "dry" / "tiny-qwen2" / "dry_run.json").read_text(encoding="utf-8"))
        records = [json.loads(line) for name in args.datasets.split(",")
                   for line in (Path(tmp) / "run" / "tiny-qwen2" / f"{name}.jsonl").read_text("utf-8").splitlines()]
    total = summary["total"]
    real_prompt = sum(r["prompt_tokens"] for r in records)
    real_gen = sum(r["gen_tokens"] for r in records)
    print(f"{total['examples']} examples: real run {run_s:.2f} s, dry run {dry_s:.2f} s = {run_s / dry_s:.1f}x cheaper")
    print(f"prompt tokens: dry run {total['prompt_tokens']}, real records {real_prompt} "
          f"({'equal' if total['prompt_tokens'] == real_prompt else 'DIFFERENT'}); {total['truncated']} cut")
    print(f"generated tokens: dry-run bound {total['max_gen_tokens']}, real {real_gen} "
          f"({100 * real_gen / total['max_gen_tokens']:.0f}% of the bound)")


if __name__ == "__main__":
    main()
