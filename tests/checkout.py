"""A fresh copy of the project in a temporary folder, for tests that run the command line as a user does.

Usage:
    repo = copy_checkout(tmp_path)              # tmp_path/main, with tmp_path/shared -> ../shared when present
    proc = sh("python inference.py --backend echo", repo)   # CompletedProcess; OMP_WAIT_POLICY set
"""
from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

from conftest import MAIN_JOB_COMMAND as MAIN_JOB, ROOT, SHARED  # MAIN_JOB: the README's first command

# What a clone does not have: caches, the git folder, and the outputs of runs (the top-level pred/ only:
# tests/data/pred/ is shipped data).
_CACHES = shutil.ignore_patterns(".git", "__pycache__", ".pytest_cache", "*.pyc", "*.tmp", ".locks")


def _skip(folder: str, names: list[str]) -> set[str]:
    return set(_CACHES(folder, names)) | ({"pred"} if Path(folder) == ROOT else set())


def copy_checkout(tmp_path: Path) -> Path:
    """The tracked project files under tmp_path/main, the reference data beside it as ../shared."""
    repo = tmp_path / "main"
    shutil.copytree(ROOT, repo, ignore=_skip)
    for folder in ("tests/data/pred/demo",):  # drop what eval.py wrote beside the shipped example predictions
        for generated in ("result.json", "result_detail.json", "per_example", "judge", "judge_result.json"):
            target = repo / folder / generated
            shutil.rmtree(target) if target.is_dir() else target.unlink(missing_ok=True)
    if SHARED.is_dir():
        (tmp_path / "shared").symlink_to(SHARED, target_is_directory=True)
    return repo


def command_env(**env) -> dict:
    """The environment of a command a user types."""
    # Bytecode is written, as on a user's machine: the copies made after the main job then start 0.2-0.3 s
    # faster per process than recompiling Eval/ each time.
    environ = {**os.environ, "OMP_WAIT_POLICY": "PASSIVE", **env}
    environ.pop("PYTHONDONTWRITEBYTECODE", None)
    environ.pop("PYTEST_CURRENT_TEST", None)
    return environ


def sh(command: str, cwd: Path, timeout: float = 600, warm=None, **env) -> subprocess.CompletedProcess:
    """Run a shell command line as a user types it; with `warm` (tests/warm_python.py), its `python SCRIPT` runs
    in a fork of an interpreter that has imported torch and transformers already."""
    environ = command_env(**env)
    if warm is not None:
        environ["PATH"] = warm.path_with_shim(environ.get("PATH", ""))
    return subprocess.run(["bash", "-c", command], cwd=cwd, capture_output=True, text=True, env=environ,
                          timeout=timeout)




def run_main_job(tmp_path: Path, warm=None) -> tuple[Path, subprocess.CompletedProcess]:
    """A fresh copy that has run the README's main job (tests/conftest.py shares one per session)."""
    tmp_path.mkdir(parents=True, exist_ok=True)
    repo = copy_checkout(tmp_path)
    return repo, sh(MAIN_JOB, repo, warm=warm)


def copy_after_main_job(prepared: Path, tmp_path: Path) -> Path:
    """Another copy of a checkout that has run the main job, outputs included, for a test to change freely."""
    repo = tmp_path / "main"
    shutil.copytree(prepared, repo, symlinks=True)
    if SHARED.is_dir():
        (tmp_path / "shared").symlink_to(SHARED, target_is_directory=True)
    return repo
