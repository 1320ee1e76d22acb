"""Bytes on disk: data is read from regular files only (a FIFO would block forever); files are
written to NAME.tmp and renamed; a set of files that must agree is committed through a journal the
next `recover()` rolls forward; JSONL lines are appended whole, fsynced, under the file's flock;
one writer per output file.

Usage:
    data = read_regular_bytes(path)              # StorageError for a FIFO, folder, broken link
    obj, notes = read_json_object(path)          # {} if absent; {} and a note if unreadable
    write_json_atomic(path, obj)
    commit_files(folder, {"result.json": b"...", "per_example/a.jsonl": b"..."}, delete=["old"])
    with output_lock(path, "inference.py"): ...   # StorageError while another holds it
"""
from __future__ import annotations

import contextlib
import errno
import json
import os
import stat
import sys
from pathlib import Path
from typing import Iterable

StrPath = os.PathLike | str
JOURNAL = ".eval_commit.json"
TMP_SUFFIX = ".tmp"


class StorageError(ValueError):
    """A path that cannot be read or written as asked; the message names the path and why."""


def regular_file_problem(path: Path) -> str | None:
    """Why `path` is not a readable regular file (following links), or None when it is one."""
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        return "is a dangling symbolic link" if os.path.islink(path) else "does not exist"
    except OSError as err:
        if err.errno == errno.ELOOP:
            return "is a symbolic link loop"
        return f"cannot be read ({err.strerror})"
    if stat.S_ISDIR(mode):
        return "is a folder, not a file"
    if not stat.S_ISREG(mode):
        kind = "a FIFO (named pipe)" if stat.S_ISFIFO(mode) else "a socket or device"
        return f"is {kind}, not a regular file; reading it could block forever"
    return None


def read_regular_bytes(path: StrPath) -> bytes:
    """The bytes of a regular file; StorageError (naming the path) for anything else."""
    path = Path(path)
    problem = regular_file_problem(path)
    if problem:
        raise StorageError(f"{path}: {problem}")
    # O_NONBLOCK: were the path swapped for a FIFO after the check, open() still returns at once
    with os.fdopen(os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0)), "rb") as f:
        if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):
            raise StorageError(f"{path}: is not a regular file")
        return f.read()


@contextlib.contextmanager
def _flocked(f):
    """An exclusive flock on open file `f` while a block runs; none without fcntl."""
    try:
        import fcntl
    except ImportError:
        yield
        return
    try:
        fcntl.flock(f.fileno(), fcntl.LOCK_EX)
    except OSError:  # a file system without locks (some network mounts): unlocked, as before
        yield
        return
    try:
        yield
    finally:
        fcntl.flock(f.fileno(), fcntl.LOCK_UN)


def _fsync_write(path: Path, data: bytes, mode: str = "wb") -> None:
    """Write and fsync; an OSError names the file (a full disk fails the write, not the open)."""
    try:
        with open(path, mode) as f, _flocked(f) if "a" in mode else contextlib.nullcontext():
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
    except OSError as err:
        if err.filename is None:
            raise OSError(err.errno, err.strerror, str(path)) from err
        raise


def _tmp(path: Path) -> Path:
    return path.with_name(path.name + TMP_SUFFIX)


def _remove_quietly(paths: Iterable[Path]) -> None:
    for path in paths:
        with contextlib.suppress(OSError):
            path.unlink(missing_ok=True)


def write_bytes_atomic(path: StrPath, data: bytes) -> None:
    """Write via NAME.tmp and rename; a failed write removes the temporary, NAME stays as it was."""
    tmp = _tmp(Path(path))
    try:
        _fsync_write(tmp, data)
        os.replace(tmp, path)
    except BaseException:
        _remove_quietly([tmp])
        raise


def json_bytes(obj: object) -> bytes:
    """Pretty JSON as every result file is written (TinyEval's json.dump(indent=4)), UTF-8."""
    return (json.dumps(obj, ensure_ascii=False, indent=4, allow_nan=False) + "\n").encode("utf-8")


def jsonl_bytes(rows: Iterable[dict]) -> bytes:
    text = "".join(json.dumps(row, ensure_ascii=False, allow_nan=False) + "\n" for row in rows)
    return text.encode("utf-8")


def read_json_object(path: StrPath) -> tuple[dict, list[str]]:
    """A result file's JSON object: {} when there is none; {} and a note when it is unreadable."""
    path = Path(path)
    if regular_file_problem(path):
        return {}, []
    with contextlib.suppress(OSError, ValueError, RecursionError):
        content = json.loads(read_regular_bytes(path))
        if isinstance(content, dict):
            return content, []
    return {}, [f"{path}: unreadable (not a JSON object); rebuilt from this run's results"]


def write_json_atomic(path: StrPath, obj: object) -> None:
    write_bytes_atomic(path, json_bytes(obj))


def write_jsonl_atomic(path: StrPath, rows: Iterable[dict]) -> None:
    write_bytes_atomic(path, jsonl_bytes(rows))


def append_lines(path: StrPath, lines: list[str]) -> None:
    """Append complete lines (each ending in a newline) and fsync, under the file's flock: a crash
    loses at most these, and read_complete_lines' repair never cuts them while in flight."""
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    _fsync_write(Path(path), "".join(lines).encode("utf-8"), "ab")


def read_complete_lines(path: StrPath, repair: bool) -> tuple[list[tuple[int, bytes]], bool]:
    """(line number, bytes) of every complete line, and whether a torn last line (no newline: a
    crash mid-write) was there; with `repair` (the file this process appends to) it is cut off,
    under the file's flock: a line another process is appending (judges sharing a verdict cache)
    is not torn but in flight, and is read whole once its append ends."""
    raw = Path(path).read_bytes()
    end = raw.rfind(b"\n") + 1
    if repair and end < len(raw):
        with open(path, "r+b") as f, _flocked(f):
            raw = f.read()
            end = raw.rfind(b"\n") + 1
            f.truncate(end)
    return list(enumerate(raw[:end].split(b"\n")[:-1], 1)), end < len(raw)


def _inside(folder: Path, relative: str) -> Path:
    # the journal is read back from disk: a name in it is data, never trusted as a path
    if os.path.isabs(relative) or ".." in Path(relative).parts:
        raise StorageError(f"{folder}: refusing to write {relative!r} outside the folder")
    return folder / relative


def commit_files(folder: StrPath, files: dict[str, bytes], delete: Iterable[str] = ()) -> None:
    """Replace `files` (paths relative to `folder`) and remove `delete`, all or nothing: the
    temporaries are written first, then the journal listing the renames, then the renames run."""
    folder = Path(folder)
    if (folder / JOURNAL).is_file():
        _roll_forward(folder)
    for relative in [*files, *delete]:
        _inside(folder, relative)  # refused before anything is written
    written = []
    try:  # a failed write (a full disk) removes every temporary: the old set stays whole
        for relative, data in files.items():
            written.append(_tmp(folder / relative))
            written[-1].parent.mkdir(parents=True, exist_ok=True)
            _fsync_write(written[-1], data)
    except BaseException:
        _remove_quietly(written)
        raise
    journal = {"replace": sorted(files), "delete": sorted(set(delete) - set(files))}
    write_bytes_atomic(folder / JOURNAL, json.dumps(journal, ensure_ascii=False).encode("utf-8"))
    _roll_forward(folder)


def _roll_forward(folder: Path) -> None:
    journal = json.loads((folder / JOURNAL).read_bytes())
    for relative in journal["replace"]:
        tmp = _tmp(_inside(folder, relative))
        if tmp.exists():  # absent: already renamed before an earlier kill
            os.replace(tmp, folder / relative)
    for relative in journal["delete"]:
        _inside(folder, relative).unlink(missing_ok=True)
    (folder / JOURNAL).unlink()


def recover(folder: StrPath, owned: Iterable[str], owned_folders: Iterable[str]) -> list[str]:
    """Finish a commit a killed process left half done, then remove stale temporaries of the files
    this caller owns (`owned` names in `folder`, every file in `owned_folders`); returns notes."""
    folder, done = Path(folder), []
    if (folder / JOURNAL).is_file():
        try:
            _roll_forward(folder)
            done.append(f"{folder}: finished an interrupted write of results (journal {JOURNAL})")
        except (ValueError, KeyError, TypeError):  # unreadable: its renames cannot be trusted
            (folder / JOURNAL).unlink()
    stale = [_tmp(folder / name) for name in (JOURNAL, *owned)]
    for sub in owned_folders:
        stale += sorted((folder / sub).glob("*" + TMP_SUFFIX))
    for tmp in stale:
        if tmp.is_file() and not tmp.is_symlink():
            tmp.unlink()
            done.append(f"{tmp}: removed a stale temporary file")
    return done


@contextlib.contextmanager
def output_lock(path: StrPath, what: str, wait: bool = False):
    """`with output_lock(path, what):` an exclusive flock on .locks/NAME.lock beside `path`, holding
    `what` and the pid for another writer's message (`wait`: waits); none without fcntl."""
    try:
        import fcntl
    except ImportError:
        yield
        return
    path = Path(path)
    lock_path = path.parent / ".locks" / (path.name + ".lock")
    lock_path.parent.mkdir(parents=True, exist_ok=True)
    with open(lock_path, "a+", encoding="utf-8") as handle:  # closing it drops the flock
        try:
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            handle.seek(0)
            holder = handle.read().strip() or "another process"
            if not wait:
                why = "is writing this file now; wait for it to finish, or write elsewhere"
                raise StorageError(f"{path}: {holder} {why} (--out-dir / --model-name)") from None
            print(f"{path}: {holder} is writing it now; waiting for it to finish", file=sys.stderr)
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX)  # said first: a long wait is no hang
        handle.truncate(0)  # "a+": the write lands at the (new) end
        handle.write(f"{what} (pid {os.getpid()})")
        handle.flush()
        yield
