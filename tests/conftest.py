"""Shared test setup: the repo root on sys.path, and where ../shared lives (tests may read it; the project
never copies it)."""
import os
import sys
from pathlib import Path

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
if "PYTEST_XDIST_WORKER" in os.environ:  # tests run in parallel workers: one thread each, not two per worker
    os.environ.setdefault("OMP_NUM_THREADS", "1")
# Model file hashes are cached per user (Eval/models/identity.py); the tests keep theirs in a folder of their own.
os.environ.setdefault("EVAL_HASH_CACHE", os.path.join(__import__("tempfile").mkdtemp(prefix="eval-hashes-"),
                                                      "file-hashes.json"))
ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared"
TINYEVAL = SHARED / "reference" / "tinyeval"
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import pytest  # noqa: E402

# Tests that compare with published reference data need ../shared beside the checkout; without it they are
# skipped with this one reason, and every other test still runs.
needs_shared = pytest.mark.skipif(not SHARED.is_dir(), reason=f"needs the published reference data in {SHARED} "
                                                               "(the ../shared folder beside the checkout)")


def needs_package(module: str):
    """Import a package tests/requirements.txt lists. Under CI (CI=true) a missing one is a failure, since CI
    installs them all; elsewhere the test is skipped, saying which package to install."""
    import importlib
    try:
        return importlib.import_module(module)
    except ImportError:
        message = f"{module} is a test dependency (pip install -r tests/requirements.txt)"
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(message + ", and CI must have it")
        pytest.skip(message, allow_module_level=True)


@pytest.fixture(scope="session")
def main_job(tmp_path_factory):
    """(checkout, the finished process) of one fresh copy that ran the README's main job, shared by the tests
    that start where a new user starts (tests/test_journey.py, tests/test_readme_commands.py), and by every
    parallel worker (pytest-xdist): the first to arrive runs it, the others wait and reuse it. Copy it with
    checkout.copy_after_main_job before changing anything."""
    import json
    import subprocess

    from filelock import FileLock

    from checkout import run_main_job
    # One folder for all workers of this pytest run: each worker's base is a subfolder of the run's (popen-gwN),
    # while a run without workers has the run's own folder as its base (its parent holds every earlier run).
    base = tmp_path_factory.getbasetemp()
    shared = base.parent if "PYTEST_XDIST_WORKER" in os.environ else base
    done = shared / "main-job" / "process.json"
    with FileLock(str(shared / "main-job.lock")):
        if not done.exists():
            repo, proc = run_main_job(shared / "main-job")
            done.write_text(json.dumps([str(repo), proc.returncode, proc.stdout, proc.stderr]), encoding="utf-8")
    repo, code, out, err = json.loads(done.read_text(encoding="utf-8"))
    return Path(repo), subprocess.CompletedProcess(MAIN_JOB_COMMAND, code, out, err)


MAIN_JOB_COMMAND = "python inference.py && python eval.py"  # the README's first command, less its pip install


@pytest.fixture(scope="session")
def warm_python(tmp_path_factory):
    """One warm interpreter per worker for the command chains (tests/warm_python.py): their `python SCRIPT`
    commands skip the 3.5 s import of torch and transformers. The main job above runs a real fresh one."""
    from checkout import command_env
    from warm_python import WarmPython

    with WarmPython(tmp_path_factory.mktemp("warm-python"), command_env()) as warm:
        yield warm


# The order tests start in, for the parallel run. pytest-xdist's `load` scheduler first hands each worker a
# block of consecutive tests, a quarter of its share (xdist/scheduler/load.py: collection // workers // 4), and
# later ones to whichever worker runs low. The README chain goes first in worker 0's block: it runs the main job
# (about 20 s; every later main-job test reuses it) and is the longest test. The other heavy tests open the other
# workers' blocks, so they run while the main job does, and the main-job tests among them (journey, unlearning
# chain) come after enough other work that the main job is done instead of being waited for. Without workers
# this is only an order.
SCHEDULE = ("test_readme_commands.py::test_readme_commands_run_as_written[main]",
            "test_hf_inference.py::test_sigkill_mid_run_then_resume_equals_an_uninterrupted_run",
            "test_lm_eval_bridge.py::test_hub_task_offline_is_one_line_saying_how_to_run_a_local_task",
            "test_inference.py::test_ctrl_c_says_in_one_line_what_was_saved_and_the_same_command_resumes",
            "test_api_backend.py::test_killed_server_fails_only_the_affected_records_and_a_rerun_redoes_them",
            "test_journey.py::test_the_everyday_loop",
            "test_sharding.py::test_torchrun_two_ranks_equal_one_process",
            "test_readme_commands.py::test_readme_commands_run_as_written[unlearning]")


def pytest_collection_modifyitems(session, config, items):
    workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
    where = {item.nodeid.split("tests/", 1)[-1]: item for item in items}
    heavy = [where[name] for name in SCHEDULE if name in where]
    light = [item for item in items if item not in heavy]
    blocks = [[] for _ in range(workers)]
    for k, item in enumerate(heavy):  # the README chain alone in block 0, the rest over the other blocks
        blocks[0 if k == 0 or workers == 1 else 1 + (k - 1) % (workers - 1)].append(item)
    size = max(len(items) // workers // 4, 2)
    ordered = []
    for block in blocks:
        fill = max(size - len(block), 0)
        ordered += block + light[:fill]
        light = light[fill:]
    items[:] = ordered + light
