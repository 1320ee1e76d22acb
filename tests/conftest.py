"""Shared test setup: the repo root on sys.path, and where ../shared lives (tests may read it; the project
never copies it)."""
import gc
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

    from checkout import run_main_job

    def build(folder):
        repo, proc = run_main_job(folder)
        (folder / "process.json").write_text(json.dumps([str(repo), proc.returncode, proc.stdout, proc.stderr]),
                                             encoding="utf-8")

    folder = run_once(tmp_path_factory, "main-job", build)
    repo, code, out, err = json.loads((folder / "process.json").read_text(encoding="utf-8"))
    return Path(repo), subprocess.CompletedProcess(MAIN_JOB_COMMAND, code, out, err)


MAIN_JOB_COMMAND = "python inference.py && python eval.py"  # the README's first command, less its pip install


@pytest.fixture(autouse=True)
def _in_the_project_folder(monkeypatch):
    """Every test starts in the project's folder, where the scripts' relative defaults (dataset/, prompts/,
    pred/) point, whatever folder pytest was started from."""
    monkeypatch.chdir(ROOT)


def pytest_collection_modifyitems(items):
    """The tests that share a slow fixture (the main job, the GGUF run, a transformers serve process) are
    one xdist_group each, which `--dist loadgroup` gives to one worker: no worker waits idle for a fixture
    another is building. They go first, so their chains start at once instead of ending the run."""
    items.sort(key=lambda item: item.get_closest_marker("xdist_group") is None)  # stable: order kept


@pytest.fixture(scope="session")
def demo_server_process(tmp_path_factory):
    """`transformers serve` on the demo model, launched (not yet answering) once per worker for the
    "demo-server" group: the API-backend tests and the API benchmark's quick run share its 6 s start."""
    from api_fakes import SERVED
    from serve_local import TransformersServe

    server = TransformersServe(SERVED, tmp_path_factory.mktemp("serve")).launch()
    yield server
    server.stop()


@pytest.fixture(scope="session")
def demo_server(demo_server_process):
    """The demo server, answering (waits for /health)."""
    try:
        return demo_server_process.start()
    except RuntimeError as err:  # no skip: the API backend is untested without it
        pytest.fail(f"could not start transformers serve (pip install 'transformers[serving]'): {err}")


def pytest_collection_finish(session):
    """What collection imported (torch, transformers, the package: millions of objects that live as
    long as the worker) leaves the garbage collector's view: each full collection would walk them
    again, about 0.3 s each, 15 s of a worker's run (measured with gc.callbacks). gc.freeze() is
    Python's own switch for this; objects made later are collected as before."""
    gc.freeze()
    gc.set_threshold(10_000, 20, 20)


def run_once(tmp_path_factory, name: str, build) -> Path:
    """A folder SHARED/name that `build(folder)` fills once per test run, whichever parallel worker
    (pytest-xdist) asks first; the others wait for it and reuse it."""
    from filelock import FileLock

    base = tmp_path_factory.getbasetemp()
    shared = base.parent if "PYTEST_XDIST_WORKER" in os.environ else base
    folder, done = shared / name, shared / f"{name}.done"
    with FileLock(str(shared / f"{name}.lock")):
        if not done.exists():
            build(folder)
            done.touch()
    return folder
