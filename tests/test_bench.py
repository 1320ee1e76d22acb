"""Every benchmark in bench/ still runs: each bench/bench_*.py (found by a glob, so a new one is covered as it lands; other
files there are their helpers, such as scale_model.py, which bench_scale.py's quick run uses) runs
with --quick, the same code path on a tiny input, in its own process. It must exit 0, print at least one ratio
(a number followed by "x": speed, tokens, throughput against the baseline it measured in the same run) and no
traceback. The figures themselves are not asserted: they are timings on a shared machine."""
import os
import re
import subprocess
import sys

import pytest

from conftest import ROOT, needs_shared

BENCHMARKS = sorted((ROOT / "bench").glob("bench_*.py"))
# A benchmark that cannot run without the published reference data declares `NEEDS_SHARED = True`.
CASES = [pytest.param(path, id=path.stem, marks=[needs_shared] if re.search(
    r"^NEEDS_SHARED = True", path.read_text(encoding="utf-8"), re.M) else []) for path in BENCHMARKS]
RATIO = re.compile(r"(?<![\w.])\d+(?:\.\d+)?x\b")  # "3.33x", "50.9x", "2x"; not "0x1f" nor "7x7"


def test_the_glob_finds_the_benchmarks():
    assert {"bench_api.py", "bench_eval.py", "bench_inference.py", "bench_rouge.py", "bench_scale.py",
            "bench_unlearning.py"} \
        <= {path.name for path in BENCHMARKS}


@pytest.mark.parametrize("script", CASES)
def test_benchmark_runs_quick(script):
    done = subprocess.run([sys.executable, str(script), "--quick"], cwd=ROOT, capture_output=True, text=True,
                          timeout=180, env={**os.environ, "OMP_WAIT_POLICY": "PASSIVE"})
    output = done.stdout + done.stderr
    assert done.returncode == 0, output[-4000:]
    assert "Traceback" not in output, output[-4000:]
    assert RATIO.search(done.stdout), done.stdout[-4000:]
