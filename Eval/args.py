"""Command-line helpers shared by inference.py, eval.py and the bridges: argument types that refuse nonsense at
parse time, and a help formatter that shows each default once.

Usage:
    p = argparse.ArgumentParser(formatter_class=HelpFormatter)
    p.add_argument("--batch-size", type=positive_int, default=16, help="most examples per batch")
    if __name__ == "__main__":
        run_main(main)
"""
from __future__ import annotations

import argparse
import errno
import math
import os
import sys
from collections.abc import Callable


class HelpFormatter(argparse.RawDescriptionHelpFormatter, argparse.ArgumentDefaultsHelpFormatter):
    """Appends "(default: X)" to every option's help, unless the help already says what its default is; the
    description and epilog (lists of subcommands and -M options) keep their lines."""

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        if "default" in text.lower() or action.required:
            return text
        return super()._get_help_string(action)


def _number(kind, text: str, lowest, what: str):
    try:
        value = kind(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not {'an integer' if kind is int else 'a number'}") from None
    if not (math.isfinite(value) and value >= lowest) or (what == "positive" and value <= 0):
        raise argparse.ArgumentTypeError(f"must be {what}, not {text}")
    return value


def positive_int(text: str) -> int:
    """An integer >= 1 (a batch size, a limit, a token count)."""
    return _number(int, text, 1, "an integer >= 1")


def nonnegative_int(text: str) -> int:
    """An integer >= 0 (a shard id, a retry count)."""
    return _number(int, text, 0, "an integer >= 0")


def positive_float(text: str) -> float:
    """A finite number > 0 (a timeout in seconds)."""
    return _number(float, text, 0, "positive")


def nonnegative_float(text: str) -> float:
    """A finite number >= 0 (a back-off delay)."""
    return _number(float, text, 0, "a number >= 0")


def non_empty(text: str) -> str:
    """A string that says something: an empty marker or stop string would match everywhere."""
    if not text:
        raise argparse.ArgumentTypeError("is empty: give the text to look for")
    return text


def name_list(text: str) -> list[str]:
    """A comma-separated list of names; empty entries ("a,,b", a trailing comma) are ignored, an empty list is
    refused."""
    names = [n.strip() for n in text.split(",") if n.strip()]
    if not names:
        raise argparse.ArgumentTypeError("is empty: give one or more names separated by commas")
    return names


def one_line(err: BaseException) -> str:
    """An exception's message on one line (transformers' and datasets' messages span several), with its direct
    cause where the message alone says nothing specific (datasets' "error while generating the dataset")."""
    text = " ".join(str(err).split()) or type(err).__name__
    if isinstance(err.__cause__, Exception) and str(err.__cause__).strip():
        text += f" ({' '.join(str(err.__cause__).split())})"
    return text


# What the machine refuses (not a bug of ours): said in one line naming the path, exit code 2.
_HINTS = {errno.ENOSPC: "no space left on the device: free some and rerun the same command (what was saved "
                        "is kept)",
          errno.EDQUOT: "disk quota exceeded: free some space and rerun the same command",
          errno.EACCES: "permission denied: choose a folder you can write (--out-dir, --pred-root) or fix the "
                        "permissions",
          errno.EPERM: "operation not permitted",
          errno.EROFS: "the file system is read-only: choose another folder (--out-dir, --pred-root)"}


def os_error_line(err: OSError) -> str | None:
    """One line for an OSError the user can act on (a full disk, no permission, ...), or None for others."""
    if err.errno not in _HINTS:
        return None
    where = err.filename if err.filename is not None else "(a file)"
    return f"error: {where}: {_HINTS[err.errno]}"


def run_main(main: Callable[[], int | None]) -> None:
    """Exits with main()'s status; a reader that stops early (`| head`) is not our error, so it ends quietly; a
    full disk or a permission problem is one line naming the path (exit 2), not a traceback."""
    try:
        sys.exit(main())
    except BrokenPipeError:
        # Python would print a second BrokenPipeError while flushing stdout at exit; point stdout at devnull first.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        sys.exit(1)
    except OSError as err:
        line = os_error_line(err)
        if line is None:
            raise
        print(line, file=sys.stderr)
        sys.exit(2)
