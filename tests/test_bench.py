"""Every benchmark in bench/ still runs: each bench/bench_*.py (found by a glob, so a new one is covered as it
lands; other files there are their helpers, such as scale_model.py, which bench_scale.py's quick run uses) runs
with --quick, the same code path on a tiny input. It must exit 0, print at least one ratio (a number followed by
"x": speed, tokens, throughput against the baseline it measured in the same run) and no traceback. The figures
themselves are not asserted: they are timings on a shared machine.

The scripts run inside the test process, as `python bench/NAME.py --quick` runs them: as `__main__` (runpy), with
that sys.argv, the script's folder first on sys.path and the repository root taken off it (a script puts it there
itself, as on the command line; modules this process imported before stay importable), from the repository root.
A process of its own per benchmark would import torch and transformers again (about 5 s of CPU each) for quick
runs whose own work is about a second. What a script changes that would outlive it in this process (sys.argv,
sys.path, the working folder, the environment, warning filters, torch's thread count and random state) is put back
after it."""
import contextlib
import os
import re
import runpy
import signal
import sys
import threading
import warnings
from pathlib import Path

import pytest
import torch

from conftest import ROOT, needs_shared

BENCHMARKS = sorted((ROOT / "bench").glob("bench_*.py"))
# A benchmark that cannot run without the published reference data declares `NEEDS_SHARED = True`.
CASES = [pytest.param(path, id=path.stem, marks=[needs_shared] if re.search(
    r"^NEEDS_SHARED = True", path.read_text(encoding="utf-8"), re.M) else []) for path in BENCHMARKS]
# bench_api's quick run uses the API tests' demo server (conftest.py) through its own --base-url: its
# measurement is the same, and the 6 s server start (tests/serve_local.py, theirs too) is made once
SERVER_BENCHMARKS = ("bench_api",)
CASES = [pytest.param(*case.values, id=case.id, marks=[*case.marks, pytest.mark.xdist_group("demo-server")])
         if case.id in SERVER_BENCHMARKS else case for case in CASES]
RATIO = re.compile(r"(?<![\w.])\d+(?:\.\d+)?x\b")  # "3.33x", "50.9x", "2x"; not "0x1f" nor "7x7"
LIMIT_S = 180  # a quick run takes seconds; one that hangs (a server that never answers) fails instead


def test_the_glob_finds_the_benchmarks():
    assert {"bench_api.py", "bench_eval.py", "bench_inference.py", "bench_scale.py", "bench_unlearning.py"} \
        <= {path.name for path in BENCHMARKS}


@contextlib.contextmanager
def time_limit(seconds: int):
    """TimeoutError in the script after `seconds` (SIGALRM: only the main thread can take it; elsewhere no limit)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def too_slow(signum, frame):
        raise TimeoutError(f"the quick run took over {seconds} s")

    previous = signal.signal(signal.SIGALRM, too_slow)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


@contextlib.contextmanager
def as_command_line(script: Path, extra: list[str]):
    """The process state `python SCRIPT --quick` starts with, and this process's own state back afterwards."""
    argv, path, cwd, env = sys.argv[:], sys.path[:], os.getcwd(), dict(os.environ)
    threads, rng = torch.get_num_threads(), torch.get_rng_state()
    project = {ROOT, ROOT / "tests"}
    sys.argv = [str(script), "--quick", *extra]
    sys.path[:] = [str(script.parent)] + [p for p in path if Path(p or cwd).resolve() not in project]
    os.chdir(ROOT)
    os.environ["OMP_WAIT_POLICY"] = "PASSIVE"
    try:
        with warnings.catch_warnings(), time_limit(LIMIT_S):
            yield
    finally:
        sys.argv, sys.path[:] = argv, path
        os.chdir(cwd)
        os.environ.clear()
        os.environ.update(env)
        torch.set_num_threads(threads)
        torch.set_rng_state(rng)


def run_quick(script: Path, extra: list[str] = ()) -> int:
    """The script's exit status: 0 when it returns, else what it passed to sys.exit (a message counts as 1)."""
    with as_command_line(script, list(extra)):
        try:
            runpy.run_path(str(script), run_name="__main__")
        except SystemExit as stop:
            return 0 if stop.code is None else stop.code if isinstance(stop.code, int) else 1
    return 0


@pytest.mark.parametrize("script", CASES)
def test_benchmark_runs_quick(script, capfd, request):
    extra = []
    if script.stem in SERVER_BENCHMARKS:
        from api_fakes import SERVED
        extra = ["--base-url", request.getfixturevalue("demo_server").base_url, "--api-model", SERVED]
    code = run_quick(script, extra)
    out, err = capfd.readouterr()
    output = out + err
    assert code == 0, output[-4000:]
    assert "Traceback" not in output, output[-4000:]
    assert RATIO.search(out), out[-4000:]


def test_bench_eval_without_the_reference_data_is_one_line(tmp_path, monkeypatch, capsys):
    """docs/speed.md's command ended in a FileNotFoundError traceback where ../shared is absent."""
    import importlib.util

    monkeypatch.syspath_prepend(str(ROOT / "bench"))
    spec = importlib.util.spec_from_file_location("bench_eval_absent", ROOT / "bench" / "bench_eval.py")
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    monkeypatch.setattr(bench, "TINYEVAL", tmp_path / "shared" / "reference" / "tinyeval")
    monkeypatch.setattr(sys, "argv", ["bench_eval.py", "--quick"])
    assert bench.main() == 2
    assert capsys.readouterr().err == (f"error: {tmp_path / 'shared' / 'reference' / 'tinyeval'}: no such folder; "
                                       "this benchmark reads the project's ../shared reference data\n")
