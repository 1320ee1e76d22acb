"""A fresh copy of the project in a temporary folder, for tests that run the command line as a user does.

Usage:
    repo = copy_checkout(tmp_path)              # tmp_path/main, with tmp_path/shared -> ../shared when present
    proc = sh("python inference.py --backend echo", repo)   # a real process: CompletedProcess
    proc = here("python eval.py --model m", repo)           # the same command in this process: CompletedProcess

`here` runs `python inference.py ...` and `python eval.py ...` through the scripts' own main(argv) with the copy
as the current folder (the scripts' relative defaults, dataset/, prompts/, pred/, point into it), which spares
each command the interpreter's start and the import of torch; anything else runs as a process.
"""
from __future__ import annotations

import contextlib
import io
import os
import shlex
import shutil
import subprocess
from pathlib import Path

from conftest import MAIN_JOB_COMMAND as MAIN_JOB, ROOT, SHARED  # MAIN_JOB: the README's first command

# What a clone does not have: the git folder, caches, and what git ignores (run outputs such as pred/ and
# eval.py's files beside shipped predictions, the benchmarks' built checkpoints in bench/.models).
_CACHES = shutil.ignore_patterns(".git", "__pycache__", ".pytest_cache", "*.pyc", "*.tmp", ".locks")


def _git_ignored() -> set[str]:
    """Paths under ROOT that git ignores (folders with a trailing /); empty outside a git checkout."""
    try:
        listed = subprocess.run(["git", "ls-files", "--others", "--ignored", "--exclude-standard",
                                 "--directory", "-z"], cwd=ROOT, capture_output=True, check=True)
    except (OSError, subprocess.CalledProcessError):
        return set()
    return {path for path in listed.stdout.decode().split("\0") if path}


_IGNORED = _git_ignored()


def _skip(folder: str, names: list[str]) -> set[str]:
    where = Path(folder).relative_to(ROOT)
    paths = {name: (where / name).as_posix() for name in names}
    ignored = {name for name, path in paths.items() if {path, path + "/"} & _IGNORED}
    return set(_CACHES(folder, names)) | ignored | ({"pred"} if Path(folder) == ROOT else set())


def copy_checkout(tmp_path: Path) -> Path:
    """The tracked project files under tmp_path/main, the reference data beside it as ../shared."""
    repo = tmp_path / "main"
    shutil.copytree(ROOT, repo, ignore=_skip)
    if SHARED.is_dir():
        (tmp_path / "shared").symlink_to(SHARED, target_is_directory=True)
    return repo


def command_env(**env) -> dict:
    """The environment of a command a user types."""
    environ = {**os.environ, "OMP_WAIT_POLICY": "PASSIVE", **env}
    environ.pop("PYTHONDONTWRITEBYTECODE", None)  # bytecode is written, as on a user's machine
    environ.pop("PYTEST_CURRENT_TEST", None)
    return environ


def sh(command: str, cwd: Path, timeout: float = 600, **env) -> subprocess.CompletedProcess:
    """Run a shell command line as a user types it, as a process."""
    return subprocess.run(["bash", "-c", command], cwd=cwd, capture_output=True, text=True, env=command_env(**env),
                          timeout=timeout)


def here(command: str, cwd: Path) -> subprocess.CompletedProcess:
    """Run a command line in `cwd`: each `python inference.py|eval.py ARGS` of an `&&` chain through the script's
    main(ARGS) in this process, anything else as a process. Stops at the first part that fails."""
    import eval as eval_script
    import inference

    scripts = {"inference.py": inference, "eval.py": eval_script}
    outs, errs, code = [], [], 0
    for part in (p.strip() for p in command.split(" && ")):
        words = shlex.split(part)
        if len(words) >= 2 and words[0] == "python" and words[1] in scripts:
            code, out, err = _in_process(scripts[words[1]], words[2:], cwd)
        else:
            done = sh(part, cwd)
            code, out, err = done.returncode, done.stdout, done.stderr
        outs.append(out)
        errs.append(err)
        if code:
            break
    return subprocess.CompletedProcess(command, code, "".join(outs), "".join(errs))


def _in_process(script, argv: list[str], cwd: Path) -> tuple[int, str, str]:
    out, err, before = io.StringIO(), io.StringIO(), os.getcwd()
    os.chdir(cwd)
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                code = script.main(argv) or 0
            except SystemExit as stop:  # argparse's usage errors and --help
                code = stop.code if isinstance(stop.code, int) else 1
    finally:
        os.chdir(before)
    return code, out.getvalue(), err.getvalue()


def run_main_job(tmp_path: Path) -> tuple[Path, subprocess.CompletedProcess]:
    """A fresh copy that has run the README's main job (tests/conftest.py shares one per session)."""
    tmp_path.mkdir(parents=True, exist_ok=True)
    repo = copy_checkout(tmp_path)
    return repo, sh(MAIN_JOB, repo)


def copy_after_main_job(prepared: Path, tmp_path: Path) -> Path:
    """Another copy of a checkout that has run the main job, outputs included, for a test to change freely."""
    repo = tmp_path / "main"
    shutil.copytree(prepared, repo, symlinks=True)
    if SHARED.is_dir():
        (tmp_path / "shared").symlink_to(SHARED, target_is_directory=True)
    return repo
