"""Bytes on disk: reading only regular files, atomic writes, all-or-nothing commits of a set of files, locks.

Every file the toolkit reads or writes goes through here, so the rules hold everywhere:
- A path read as data must be a regular file: a folder, a FIFO (which would block forever), a dangling link or
  a link loop is refused with a message naming the path, before anything is read.
- A file is written to `NAME.tmp` and renamed over NAME, so a reader never sees half a file.
- A set of files that must agree with each other (eval.py's result.json, result_detail.json and per_example/)
  is committed through a journal: every new file is written to its temporary first, then the journal that
  lists the renames is written atomically, then the renames run and the journal is removed. A process killed
  anywhere in between leaves either the old set, or a journal that the next `recover()` rolls forward, so a
  mixed set is never left behind; temporaries no journal names are stale and are removed.
- Append-only JSONL files are appended whole lines at a time and fsynced (`append_lines`); a line torn by a
  crash is cut off by the next writer (`read_complete_lines`).
- `OutputLock` keeps two processes from writing one output file at once (flock on `.locks/NAME.lock`:
  released when the process dies, so a killed run never leaves a stale lock behind).

Usage:
    data = read_regular_bytes(path)                        # StorageError for a FIFO, folder, broken link
    write_json_atomic(path, obj)
    commit_files(folder, {"result.json": b"...", "per_example/a.scores.jsonl": b"..."}, delete=["old.txt"])
    with OutputLock(path, what="inference.py"): ...        # StorageError when another process holds it
"""
from __future__ import annotations

import contextlib
import errno
import json
import os
import stat
from pathlib import Path
from typing import Iterable

JOURNAL = ".eval_commit.json"
TMP_SUFFIX = ".tmp"


class StorageError(ValueError):
    """A path that cannot be read or written as asked; the message names the path and the problem."""


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


def read_regular_bytes(path: os.PathLike | str) -> bytes:
    """The bytes of a regular file; StorageError (naming the path) for anything else."""
    path = Path(path)
    problem = regular_file_problem(path)
    if problem:
        raise StorageError(f"{path}: {problem}")
    # O_NONBLOCK: should the path be swapped for a FIFO after the check, open() still returns at once
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    with os.fdopen(fd, "rb") as f:
        if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):
            raise StorageError(f"{path}: is not a regular file")
        return f.read()


def _fsync_write(path: Path, data: bytes) -> None:
    with _named(path), open(path, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())


@contextlib.contextmanager
def _named(path: Path):
    """An OSError of a write (a full disk fails the write, not the open) names the file it was writing."""
    try:
        yield
    except OSError as err:
        if err.filename is None:
            raise OSError(err.errno, err.strerror, str(path)) from err
        raise


def write_bytes_atomic(path: os.PathLike | str, data: bytes) -> None:
    """Write via NAME.tmp and rename, so a crash never leaves a half-written file under NAME; a failed write
    (a full disk, no permission) removes its temporary and raises, and NAME keeps its old content."""
    path = Path(path)
    tmp = path.with_name(path.name + TMP_SUFFIX)
    try:
        _fsync_write(tmp, data)
        os.replace(tmp, path)
    except BaseException:
        _remove_quietly(tmp)
        raise


def _remove_quietly(path: Path) -> None:
    try:
        path.unlink(missing_ok=True)
    except OSError:
        pass


def json_bytes(obj: object) -> bytes:
    """Pretty JSON as every result file is written (TinyEval's json.dump(indent=4) layout), UTF-8."""
    return (json.dumps(obj, ensure_ascii=False, indent=4, allow_nan=False) + "\n").encode("utf-8")


def jsonl_bytes(rows: Iterable[dict]) -> bytes:
    return "".join(json.dumps(row, ensure_ascii=False, allow_nan=False) + "\n" for row in rows).encode("utf-8")


def write_json_atomic(path: os.PathLike | str, obj: object) -> None:
    write_bytes_atomic(path, json_bytes(obj))


def write_jsonl_atomic(path: os.PathLike | str, rows: Iterable[dict]) -> None:
    write_bytes_atomic(path, jsonl_bytes(rows))


# --- append-only JSONL files (prediction files, the judge's verdict cache) ------------------------------------
def append_lines(path: os.PathLike | str, lines: list[str]) -> None:
    """Append complete lines (each ending in a newline) and fsync, so a crash loses at most this call's lines,
    and at worst leaves one torn last line that `read_complete_lines` repairs."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with _named(path), open(path, "a", encoding="utf-8") as f:
        f.writelines(lines)
        f.flush()
        os.fsync(f.fileno())


def read_complete_lines(path: os.PathLike | str, repair: bool) -> tuple[list[tuple[int, bytes]], bool]:
    """(line number, bytes) of every complete line, and whether a torn last line (one without its newline: a
    crash mid-write) was there. With `repair` (the file this process appends to) it is cut off the file;
    another process's file is only read."""
    path = Path(path)
    raw = path.read_bytes()
    end = raw.rfind(b"\n") + 1
    torn = end < len(raw)
    if repair and torn:
        with open(path, "r+b") as f:
            f.truncate(end)
    return list(enumerate(raw[:end].split(b"\n")[:-1], 1)), torn


# --- all-or-nothing commits --------------------------------------------------------------------------------
def _inside(folder: Path, relative: str) -> Path:
    target = folder / relative
    if os.path.isabs(relative) or ".." in Path(relative).parts:
        raise StorageError(f"{folder}: refusing to write {relative!r} outside the folder")
    return target


def commit_files(folder: os.PathLike | str, files: dict[str, bytes], delete: Iterable[str] = ()) -> None:
    """Replace `files` (paths relative to `folder`) and remove `delete`, all or nothing (see the module doc)."""
    folder = Path(folder)
    if (folder / JOURNAL).is_file():
        _roll_forward(folder)
    delete = [d for d in delete if d not in files]
    written = []
    try:  # a failed write (a full disk) removes every temporary: the old set stays whole, nothing stale is left
        for relative, data in files.items():
            target = _inside(folder, relative)
            target.parent.mkdir(parents=True, exist_ok=True)
            written.append(target.with_name(target.name + TMP_SUFFIX))
            _fsync_write(written[-1], data)
    except BaseException:
        for tmp in written:
            _remove_quietly(tmp)
        raise
    for relative in delete:
        _inside(folder, relative)
    write_bytes_atomic(folder / JOURNAL, json.dumps({"replace": sorted(files), "delete": sorted(delete)},
                                                    ensure_ascii=False).encode("utf-8"))
    _roll_forward(folder)


def _roll_forward(folder: Path) -> None:
    journal = json.loads((folder / JOURNAL).read_bytes())
    for relative in journal["replace"]:
        target = _inside(folder, relative)
        tmp = target.with_name(target.name + TMP_SUFFIX)
        if tmp.exists():  # absent: already renamed before an earlier kill
            os.replace(tmp, target)
    for relative in journal["delete"]:
        _inside(folder, relative).unlink(missing_ok=True)
    (folder / JOURNAL).unlink()


def recover(folder: os.PathLike | str, owned: Iterable[str] = (), owned_folders: Iterable[str] = ()) -> list[str]:
    """Finish a commit a killed process left half done, then remove stale temporaries of the files this caller
    owns (`owned` names in `folder`, every file in `owned_folders`); returns what was done, for a note."""
    folder, done = Path(folder), []
    if (folder / JOURNAL).is_file():
        try:
            _roll_forward(folder)
            done.append(f"{folder}: finished an interrupted write of results (journal {JOURNAL})")
        except (ValueError, KeyError, TypeError):  # unreadable journal: its renames cannot be trusted
            (folder / JOURNAL).unlink()
    stale = [folder / (name + TMP_SUFFIX) for name in (JOURNAL, *owned)]
    for sub in owned_folders:
        stale += sorted((folder / sub).glob("*" + TMP_SUFFIX)) if (folder / sub).is_dir() else []
    for tmp in stale:
        if tmp.is_file() and not tmp.is_symlink():
            tmp.unlink()
            done.append(f"{tmp}: removed a stale temporary file")
    return done


# --- one writer per output file ----------------------------------------------------------------------------
class OutputLock:
    """An exclusive, non-blocking lock for writing `path`, held for the life of a `with` block (or the
    process). The lock file is `.locks/<name>.lock` beside `path`; it stays, and means nothing unheld."""

    def __init__(self, path: os.PathLike | str, what: str):
        self.path = Path(path)
        self.lock_path = self.path.parent / ".locks" / (self.path.name + ".lock")
        self.what, self._file = what, None

    def acquire(self) -> "OutputLock":
        try:
            import fcntl
        except ImportError:  # not POSIX: no lock, as before (documented in the README)
            return self
        self.lock_path.parent.mkdir(parents=True, exist_ok=True)
        handle = open(self.lock_path, "a+", encoding="utf-8")
        try:
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            handle.seek(0)
            holder = handle.read().strip() or "another process"
            handle.close()
            raise StorageError(f"{self.path}: {holder} is writing this file now; wait for it to finish, or "
                               "write elsewhere (--out-dir / --model-name)") from None
        handle.seek(0)
        handle.truncate()
        handle.write(f"{self.what} (pid {os.getpid()})")
        handle.flush()
        self._file = handle
        return self

    def release(self) -> None:
        if self._file is not None:
            self._file.close()  # closing drops the flock; the file stays, empty of meaning without the lock
            self._file = None

    def __enter__(self) -> "OutputLock":
        return self.acquire()

    def __exit__(self, *exc) -> None:
        self.release()
