"""Names that become file names (a dataset, a model folder, a rubric): `check_name` refuses one
that would reach outside its folder (a separator, `..`), naming where it came from; the names a
mistyped one may mean.

Usage:
    out = out_dir / check_name(args.model_name, "--model-name")  # ValueError: --model-name '../x'
"""
from __future__ import annotations

import argparse
import os
from pathlib import Path

from Eval.args import name_list
from Eval.registry import did_you_mean

MAX_NAME = 200  # well under every file system's 255-byte limit, leaving room for suffixes we add


def name_problem(name: object) -> str | None:
    """Why `name` cannot be a file name, or None when it can."""
    if not isinstance(name, str) or not name:
        return "a name must be a non-empty string"
    if name != name.strip():  # " " or "run " would be a folder that looks like another, or none
        return "a name cannot be blank or start or end with whitespace"
    if any(sep in name for sep in ("/", "\\", "\x00")):
        return "a name cannot hold '/' or '\\' (it would be a path)"
    if name in (".", ".."):
        return "'.' and '..' are not names"
    if name.startswith("."):
        return "a name cannot start with '.' (hidden files are the toolkit's own)"
    if any(ord(c) < 32 or 0xD800 <= ord(c) <= 0xDFFF for c in name):
        return "a name cannot hold control characters or lone surrogates"
    if len(name.encode("utf-8")) > MAX_NAME:
        return f"a name is at most {MAX_NAME} bytes"
    return None


def check_name(name: object, source: str) -> str:
    """`name` when it is a safe file name, else ValueError naming `source` (an option, a file)."""
    problem = name_problem(name)
    if problem:
        raise ValueError(f"{source} {name!r}: {problem}; give a plain name (letters, digits, '_', "
                         "'-', '.')")
    return name  # type: ignore[return-value]


def model_folder(text: str) -> str:
    try:
        return check_name(text, "")
    except ValueError as err:
        raise argparse.ArgumentTypeError(str(err).strip()) from None


def dataset_name_set(text: str) -> set[str]:
    try:
        return {check_name(name, "entry") for name in name_list(text)}
    except ValueError as err:
        raise argparse.ArgumentTypeError(str(err)) from None


def add_output_arguments(parser: argparse.ArgumentParser) -> None:
    """--model-name and --out-dir, which output_folder() joins (stage 1's commands)."""
    parser.add_argument("--model-name", default=None,
                        help="output folder name (default: the model path's last part)")
    parser.add_argument("--out-dir", type=Path, default=Path("pred"),
                        help="records go to OUT_DIR/MODEL_NAME/")


def check_out_dir(out_dir: Path) -> Path:
    """`out_dir` unless it is, or is under, a file: said before any work, not when writing."""
    blocking = next(p for p in (out_dir, *out_dir.absolute().parents) if p.exists())
    if not blocking.is_dir():
        raise ValueError(f"--out-dir {out_dir}: {blocking} is a file, not a folder")
    return out_dir


def output_folder(out_dir: Path, model_name: str | None, model: str) -> Path:
    """OUT_DIR/MODEL_NAME (given, or the model path's last part without .gguf), checked."""
    if model_name is not None:
        name = check_name(model_name, "--model-name")
    else:
        last = Path(os.path.abspath(model)).name.removesuffix(".gguf")
        name = check_name(last, "the model path's last part (set --model-name)")
    if out_dir.exists() and not out_dir.is_dir():
        raise ValueError(f"--out-dir {out_dir}: is a file, not a folder")
    return out_dir / name


def folder_hint(path: Path) -> str:
    """'. Did you mean: X?' of the folders beside a missing one (a typo), else ''."""
    beside = sorted(d.name for d in path.parent.iterdir() if d.is_dir()) \
        if path.parent.is_dir() else []
    return did_you_mean(path.name, beside, lead=".")


def existing_folder(text: str) -> Path:
    """An argparse type: a folder that is there (a typo would silently mean no data or prompts)."""
    if not Path(text).is_dir():
        raise argparse.ArgumentTypeError(f"{text}: no such folder{folder_hint(Path(text))}")
    return Path(text)


def model_folder_hint(pred_root: Path, name: str) -> str:
    """did_you_mean of the model folders of `pred_root`, else ' Its model folders: ...'."""
    known = sorted(d.name for d in pred_root.iterdir() if d.is_dir() and d.name[0] != ".") \
        if pred_root.is_dir() else []
    return did_you_mean(name, known) or f" Its model folders: {', '.join(known) or 'none'}."
