"""Command-line helpers of the scripts: argument types, the help formatter, a backend's -M options
for `--help`, and `run_main` (a full disk, Ctrl-C: one line each).

Usage:
    p = argparse.ArgumentParser(formatter_class=HelpFormatter)
    p.add_argument("--batch-size", type=positive_int, default=16, help="most examples per batch")
    if __name__ == "__main__":
        run_main(main)
"""
from __future__ import annotations

import argparse
import dataclasses
import errno
import functools
import math
import os
import signal
import sys
import threading
from collections.abc import Callable


class HelpFormatter(argparse.RawDescriptionHelpFormatter, argparse.ArgumentDefaultsHelpFormatter):
    """"(default: X)" unless the help names its default; description and epilog keep their lines."""

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        if "default" in text.lower() or action.required:
            return text
        return super()._get_help_string(action)


def backend_help(backend: str) -> str:
    """`--backend NAME --help`'s -M options (its own, then every backend's), one line each."""
    from Eval.models.factory import option_classes  # imports the backend's module, only for help

    classes = option_classes(backend)
    own = _options_help(classes[1:]) or "  (none)"
    return (f"-M options of the {backend} backend:\n{own}\n-M options of every backend:\n"
            f"{_options_help(classes[:1])}")


def backend_epilog(parser: argparse.ArgumentParser, argv: list[str]) -> str | None:
    """backend_help of the backend `argv` names (--backend / --judge-backend NAME or =NAME) when
    `argv` asks for --help of a parser that has the option; None otherwise. Not the default's:
    its module may import torch, which would make every --help take seconds."""
    if not {"-h", "--help"} & set(argv):
        return None
    from Eval.models import MODELS

    for dest in ("backend", "judge_backend"):
        if parser.get_default(dest):
            pre = argparse.ArgumentParser(add_help=False)
            pre.add_argument("--" + dest.replace("_", "-"), default=None)
            name = getattr(pre.parse_known_args(argv)[0], dest)
            return backend_help(name) if name in MODELS else None
    return None


def _options_help(classes: list[type]) -> str:
    rows = []
    for cls in classes:
        for field in dataclasses.fields(cls):
            default = field.default
            shown = " ".join(default) if isinstance(default, tuple) else str(default)
            shown = shown.lower() if isinstance(default, bool) or default is None else shown
            choices = field.metadata.get("choices")
            extra = f" ({'/'.join(map(str, choices))})" if choices else ""
            rows.append((f"-M {field.name}={shown}", f"{field.metadata.get('help', '')}{extra}"))
    width = max((len(left) for left, _ in rows), default=0)
    return "\n".join(f"  {left:<{width}}  {right}" for left, right in rows)


def _number(text: str, kind: type, what: str, limit: str) -> int | float:
    try:
        value = kind(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not {what}") from None
    if not 0 < value < math.inf:  # nan and inf fail too
        raise argparse.ArgumentTypeError(f"must be {limit}, not {text}")
    return value


def positive_int(text: str) -> int:
    """An integer >= 1 (a batch size, a limit, a token count)."""
    return _number(text, int, "an integer", "an integer >= 1")


def positive_float(text: str) -> float:
    """A finite number > 0 (a timeout in seconds)."""
    return _number(text, float, "a number", "positive")


def document_limit(text: str) -> int | float:
    """lm-eval's --limit: a whole number >= 1, or a fraction in (0, 1) (lm-eval cuts 2.7 to 2)."""
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not 0 < value < math.inf or (value >= 1 and value != int(value)):
        raise argparse.ArgumentTypeError(f"must be a whole number of documents (>= 1) or a "
                                         f"fraction of them (0 < F < 1), not {text}")
    return value if value < 1 else int(value)


def name_list(text: str) -> list[str]:
    """A comma-separated list of names; empty entries and repeats are ignored, an empty list is
    refused."""
    names = list(dict.fromkeys(n.strip() for n in text.split(",") if n.strip()))
    if not names:
        raise argparse.ArgumentTypeError("is empty: give one or more names separated by commas")
    return names


def names_from(choices) -> Callable[[str], tuple[str, ...]]:
    """argparse type: a comma-separated list of names, each one of `choices` (or a Registry)."""
    def parse(text: str) -> tuple[str, ...]:
        names = name_list(text)
        unknown = [n for n in names if n not in choices]
        say = getattr(choices, "unknown", None)  # a Registry's: the close names, how to add one
        if unknown:
            raise argparse.ArgumentTypeError(say(unknown[0]) if say else f"unknown {unknown[0]!r}:"
                                             f" choose from {', '.join(choices)}")
        return tuple(names)
    return parse


def key_value(text: str) -> tuple[str, str]:
    """KEY=VALUE as (key, value): a metric's keyword argument (eval.py -S)."""
    key, sep, value = text.partition("=")
    if not sep or not key.strip():
        raise argparse.ArgumentTypeError(f"{text!r}: expected KEY=VALUE")
    return key.strip(), value


def one_line(err: BaseException) -> str:
    """An exception's message on one line, with its direct cause (datasets' "error while
    generating the dataset" says nothing alone)."""
    text = " ".join(str(err).split()) or type(err).__name__
    if isinstance(err.__cause__, Exception) and str(err.__cause__).strip():
        text += f" ({' '.join(str(err.__cause__).split())})"
    return text


def refusing_bad_input(command: Callable[..., int]) -> Callable[..., int]:
    """`command` with bad input as one error line naming the file / line / flag, exit code 2."""
    @functools.wraps(command)
    def run(*args) -> int:
        try:
            return command(*args)
        except (FileNotFoundError, KeyError, ValueError) as err:  # RecordError is a ValueError
            text = err.args[0] if isinstance(err, KeyError) and err.args else err  # unquoted
            print(f"error: {text}", file=sys.stderr)
            return 2
    return run


# What the machine refuses (not a bug of ours): said in one line naming the path, exit code 2.
_HINTS = {errno.ENOSPC: "no space left on the device: free some and rerun the same command "
                        "(what was saved is kept)",
          errno.EDQUOT: "disk quota exceeded: free some space and rerun the same command",
          errno.EACCES: "permission denied: choose a folder you can write (--out-dir, --pred-root) "
                        "or fix the permissions",
          errno.EPERM: "operation not permitted",
          errno.EROFS: "the file system is read-only: choose another folder "
                       "(--out-dir, --pred-root)",
          errno.ENOTDIR: "a part of this path is a file, not a folder: choose another path "
                         "(--out-dir, --pred-root)",
          errno.ENOENT: "no such file or folder: check the path"}


def run_main(main: Callable[[], int | None]) -> None:
    """Exits with main()'s status; `| head` ends it quietly; an uncaught Ctrl-C is one line (exit
    130), a full disk or a permission problem one line naming the path (exit 2)."""
    pressed: list[int] = []  # the Ctrl-Cs seen while main runs

    def note_ctrl_c(signum, frame):
        pressed.append(signum)
        signal.default_int_handler(signum, frame)  # raises KeyboardInterrupt, as without us

    previous = signal.getsignal(signal.SIGINT)
    # not where SIGINT is ignored (a job a script starts in the background), nor off the main thread
    watching = previous is signal.default_int_handler and \
        threading.current_thread() is threading.main_thread()
    if watching:
        signal.signal(signal.SIGINT, note_ctrl_c)
    try:
        sys.exit(main())
    except BrokenPipeError:
        # Python would print a second BrokenPipeError while flushing stdout at exit: silence stdout.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        sys.exit(1)
    except (KeyboardInterrupt, Exception) as err:
        if isinstance(err, OSError) and err.errno in _HINTS:
            where = err.filename if err.filename is not None else "(a file)"
            print(f"error: {where}: {_HINTS[err.errno]}", file=sys.stderr)
            sys.exit(2)
        # An import that Ctrl-C cut short may fail with another error (numpy's: "cannot load module
        # more than once per process"): after a Ctrl-C, that is the interruption too.
        if not (pressed or isinstance(err, KeyboardInterrupt)):
            raise
        print("\ninterrupted; nothing more was written (what was saved is kept); rerun the same "
              "command to go on", file=sys.stderr)
        sys.exit(130)
    finally:
        if watching:
            signal.signal(signal.SIGINT, previous)
