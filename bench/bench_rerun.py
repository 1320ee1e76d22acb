"""Benchmark: a finished rerun of `python inference.py`, of `python inference.py unlearning tofu` and of
`python eval.py judge`, each a process as a user runs it: said from the files, before torch is imported or a
model loads (Eval/inference/rerun.py), against the same rerun made to load its model (`-M threads=1` changes
the request, not the records or verdicts: the model then loads to find nothing to do, as every rerun did before).

Usage:
    python bench/bench_rerun.py            # the demo datasets, the TOFU demo splits, the demo model as judge
    python bench/bench_rerun.py --quick    # custom_en's first 4; baseline: a process importing torch only

The first runs, which make the records, run in this process and are not measured.
"""
import argparse
import contextlib
import io
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import eval as eval_cli  # noqa: E402
import inference  # noqa: E402

# each a command line, OUT the benchmark's output folder; the judge grades the main job's records
JUDGE = ["eval.py", "judge", "--judge", "demo/tiny-qwen2", "--judge-mode", "logits", "--pred-dir",
         "OUT/tiny-qwen2"]
JOBS = {"main job": ["inference.py", "--out-dir", "OUT"],
        "unlearning tofu": ["inference.py", "unlearning", "tofu", "--out-dir", "OUT"], "eval.py judge": JUDGE}
QUICK = {"main job": [*JOBS["main job"], "--datasets", "custom_en", "--limit", "4"], "eval.py judge": JUDGE}
IMPORTS = ["-c", "import torch"]  # the least a rerun that loads a model costs


def timed(argv: list[str]) -> tuple[float, str]:
    """Seconds of `python ARGV` from the repository root, and what it printed."""
    start = time.perf_counter()
    done = subprocess.run([sys.executable, *argv], cwd=ROOT, capture_output=True, text=True)
    if done.returncode:
        raise SystemExit(f"python {' '.join(argv)} failed:\n{done.stderr[-2000:]}")
    return time.perf_counter() - start, done.stdout


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="one small dataset, imports as baseline")
    args = parser.parse_args()
    jobs = QUICK if args.quick else JOBS
    os.chdir(ROOT)  # the runs' relative defaults (dataset/, prompts/), whatever folder this started in
    print(f"{'rerun of':16} {'baseline':>9} {'ours':>7} {'ratio':>7}  baseline")
    with tempfile.TemporaryDirectory() as tmp:
        for label, command in jobs.items():
            argv = [part.replace("OUT", tmp) for part in command]
            script = {"inference.py": inference, "eval.py": eval_cli}[argv[0]]
            with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
                assert script.main(argv[1:]) == 0  # the records (the verdicts), made once
            ours, said = timed(argv)
            if "nothing to do: no model loaded" not in said:
                raise SystemExit(f"{label}: the rerun had work to do:\n{said[-1000:]}")
            base, what = (timed(IMPORTS)[0], "importing torch") if args.quick else \
                (timed([*argv, "-M", "threads=1"])[0], "the model loaded")
            print(f"{label:16} {base:8.2f}s {ours:6.2f}s {base / ours:6.1f}x  {what}")


if __name__ == "__main__":
    main()
