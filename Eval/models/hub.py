"""A hub name's files on this machine: `--model Qwen/Qwen2.5-7B-Instruct` is loaded from the
snapshot the Hugging Face cache holds ($HF_HUB_CACHE), so that snapshot's files identify it (a new
revision fetched, e.g. by `hf download NAME`, is another model: its records are redone).

Usage:
    hub_snapshot("Qwen/Qwen2.5-7B-Instruct")   # Path(".../snapshots/<revision>") or None
"""
from __future__ import annotations

from pathlib import Path

MARKERS = ("config.json", "adapter_config.json")  # a model's, a PEFT adapter's


def hub_snapshot(name: str) -> Path | None:
    """The cached snapshot folder of the revision `from_pretrained(name)` loads offline (the
    cache's current `main`), or None: not cached, or not a hub name (org/name) at all."""
    if name.count("/") != 1 or name.startswith((".", "/", "~")):
        return None
    from huggingface_hub import try_to_load_from_cache  # transformers' own dependency

    for marker in MARKERS:
        try:
            found = try_to_load_from_cache(name, marker)
        except ValueError:  # not a valid repository name (HFValidationError)
            return None
        if isinstance(found, str):  # else None, or a marker that the file is known absent
            return Path(found).parent
    return None
