"""What identifies a model: the sha256 of each file that can change its outputs, by name (a copied
checkpoint keeps its identity), cached by path, size, inode and times as git's index does, in
`$EVAL_HASH_CACHE` or `$XDG_CACHE_HOME` / ~/.cache's eval-toolkit/file-hashes.json.

Usage:
    folder_identity("/path/Qwen2.5-7B")   # {"files": {"config.json": "3f2a", ...}, "sha256": ...}
"""
from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

from Eval.models.hub import hub_snapshot
from Eval.storage import read_json_object

OUTPUT_SUFFIXES = (".safetensors", ".bin", ".pt", ".pth", ".gguf", ".json", ".model", ".jinja",
                   ".py", ".tiktoken")
OUTPUT_NAMES = ("merges.txt", "vocab.txt")
# what a trainer saves beside the weights (its state, metrics a later evaluate rewrites)
NOT_OUTPUT = (".", "optimizer", "scheduler", "rng_state", "training_args", "trainer_state",
              "all_results", "train_results", "eval_results", "test_results", "predict_results")


def _hashes(files: list[Path]) -> dict[str, str]:
    """{name: sha256}, through the cache: path -> [size, inode, mtime_ns, ctime_ns, sha256]."""
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    path = Path(os.environ.get("EVAL_HASH_CACHE") or base / "eval-toolkit" / "file-hashes.json")
    entries, _ = read_json_object(path)  # none or damaged: {}, every file hashed again
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


def folder_identity(path: str | os.PathLike, hub: bool = False) -> dict:
    """{"files": {name: sha256}, "sha256": of them all} of a folder or file (`hub`: or a hub name's
    cached snapshot); {} if not on disk."""
    path = Path(path) if os.path.exists(path) else hub and hub_snapshot(str(path))
    if not path:
        return {}
    files = [path] if path.is_file() else [
        f for f in sorted(path.iterdir()) if f.is_file() and not f.name.startswith(NOT_OUTPUT)
        and (f.name.endswith(OUTPUT_SUFFIXES) or f.name in OUTPUT_NAMES)]
    hashes = _hashes(files)
    combined = json.dumps(sorted(hashes.items()), ensure_ascii=False)  # order ignored
    return {"files": hashes, "sha256": hashlib.sha256(combined.encode("utf-8")).hexdigest()[:16]}


def changed_files(before: dict, after: dict) -> list[str]:
    """Names whose hash differs between two identities (added and removed too)."""
    old, new = before.get("files") or {}, after.get("files") or {}
    return sorted(name for name in set(old) | set(new) if old.get(name) != new.get(name))


def shown_path(path: str) -> str:
    return os.path.abspath(path) if os.path.exists(path) else path


def template_sha256(tokenizer) -> str | None:
    template = tokenizer.chat_template
    return hashlib.sha256(template.encode()).hexdigest()[:16] if template else None
