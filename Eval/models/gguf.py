"""GGUF files (llama.cpp's format), which transformers loads itself: the folder, and the file as
`gguf_file=` (docs/inference.md, "GGUF files").

Usage:
    folder, file = gguf_parts("models/SmolLM2.Q4_1.gguf") or ("models/qwen", None)
"""
from __future__ import annotations

import importlib.util
from pathlib import Path


def gguf_parts(path: str) -> tuple[str, str] | None:
    """(folder, file name) of a .gguf file, or of the one in a folder without a config.json."""
    where = Path(path)
    found: list[Path] = []
    if where.is_file() and where.suffix == ".gguf":
        found = [where]
    elif where.is_dir() and not (where / "config.json").is_file():
        found = sorted(where.glob("*.gguf"))
        if len(found) > 1:
            raise FileNotFoundError(f"model folder {path} holds {len(found)} .gguf files; name "
                                    f"one with --model {found[0]}")
    if not found:
        return None
    if importlib.util.find_spec("gguf") is None:
        raise ModuleNotFoundError(f"model {path}: loading a GGUF file needs the gguf package "
                                  "(pip install gguf)")
    return str(found[0].parent), found[0].name
