"""What identifies a model in a run: the sha256 of every file that can change its outputs, named
relative to their folder (a copied checkpoint keeps its identity). Each hash is cached by path,
size, inode, modification and change times, as git's index does: an unchanged checkpoint costs one
stat per file. The cache is `$EVAL_HASH_CACHE` or `~/.cache/eval-toolkit/file-hashes.json` (under
`$XDG_CACHE_HOME` when set); an unwritable one is ignored. No torch here.

Usage:
    folder_identity("/path/Qwen2.5-7B")   # {"files": {"config.json": "3f2a", ...}, "sha256": ...}
"""
from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

# Files of a checkpoint folder that determine its outputs, by suffix, and by name.
OUTPUT_SUFFIXES = (".safetensors", ".bin", ".pt", ".pth", ".gguf", ".json", ".model", ".jinja",
                   ".py", ".tiktoken")
OUTPUT_NAMES = ("merges.txt", "vocab.txt")
# Hidden files, and what a trainer saves beside the weights that never reaches the model (its
# state, and the metrics it wrote: all_results.json, ..., rewritten by a later evaluate).
NOT_OUTPUT = (".", "optimizer", "scheduler", "rng_state", "training_args", "trainer_state",
              "all_results", "train_results", "eval_results", "test_results", "predict_results")


def _hashes(files: list[Path]) -> dict[str, str]:
    """{name: sha256} of `files`, through the cache: path -> [size, inode, mtime_ns, ctime_ns,
    sha256], written back atomically when it grew (a failure costs only time later)."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    path = Path(os.environ.get("EVAL_HASH_CACHE") or
                Path(base) / "eval-toolkit" / "file-hashes.json")
    try:
        entries = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        entries = {}
    entries = entries if isinstance(entries, dict) else {}
    hashes, changed = {}, False
    for file in files:
        real = os.path.realpath(file)
        st = os.stat(real)
        key = [st.st_size, st.st_ino, st.st_mtime_ns, st.st_ctime_ns]
        if not (isinstance(entries.get(real), list) and entries[real][:4] == key):
            with open(real, "rb") as f:
                entries[real], changed = key + [hashlib.file_digest(f, "sha256").hexdigest()], True
        hashes[file.name] = entries[real][4]
    tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
    try:
        if changed:
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp.write_text(json.dumps(entries), encoding="utf-8")
            os.replace(tmp, path)
    except OSError:
        tmp.unlink(missing_ok=True)
    return hashes


def folder_identity(path: str | os.PathLike) -> dict:
    """{"files": {name: sha256}, "sha256": one hash over names and hashes} of a checkpoint folder or
    a single model file (GGUF); {} for a path that is not on disk (a hub name: nothing to hash)."""
    path = Path(path)
    if not path.exists():
        return {}
    files = [path] if path.is_file() else [
        f for f in sorted(path.iterdir()) if f.is_file() and not f.name.startswith(NOT_OUTPUT)
        and (f.name.endswith(OUTPUT_SUFFIXES) or f.name in OUTPUT_NAMES)]
    hashes = _hashes(files)
    combined = json.dumps(sorted(hashes.items()), ensure_ascii=False)  # order ignored
    return {"files": hashes, "sha256": hashlib.sha256(combined.encode("utf-8")).hexdigest()[:16]}


def changed_files(before: dict, after: dict) -> list[str]:
    """Names whose hash differs between two {"files": ...} identities (added and removed too)."""
    old, new = before.get("files") or {}, after.get("files") or {}
    return sorted(name for name in set(old) | set(new) if old.get(name) != new.get(name))


def shown_path(path: str) -> str:
    """A local path made absolute; a hub name as it is."""
    return os.path.abspath(path) if os.path.exists(path) else path


def template_sha256(tokenizer) -> str | None:
    """16 hex digits of the sha256 of a tokenizer's chat template; None without one."""
    template = tokenizer.chat_template
    return hashlib.sha256(template.encode()).hexdigest()[:16] if template else None
