"""Loading a local transformers checkpoint, shared by the causal (Eval/models/hf.py) and masked
(Eval/models/masked.py) adapters: the device, safe weight loading, and what identifies the checkpoint in a sidecar.

Usage:
    model = load_weights(AutoModelForCausalLM, checked_checkpoint(path), "auto", resolve_device("auto"),
                         trust_remote_code=False, allow_pickle=False, peft=None)
    HFModel(path, AdapterOptions(), **dataclasses.asdict(CheckpointOptions(dtype="bfloat16")))   # -M options
    checkpoint_identity(path, model, tokenizer, checkpoint_files(path, peft))   # -> {"path", "dtype", "files", "peft_files", ...}
"""
from __future__ import annotations

import dataclasses
import hashlib
import os
from pathlib import Path

import torch

from Eval.models.identity import folder_identity
from Eval.models.options import option

DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


def resolve_device(device: str) -> str:
    if device != "auto":
        return device
    return "cuda" if torch.cuda.is_available() else "cpu"


def is_oom(err: BaseException) -> bool:
    return isinstance(err, torch.OutOfMemoryError) or "out of memory" in str(err).lower()


def load_weights(auto_class, path: str, dtype: str, device: str, trust_remote_code: bool, allow_pickle: bool,
                 peft: str | None):
    """Weights from safetensors (pickle only if allowed), in the dtype asked (auto: float32 on CPU, the
    checkpoint's own on GPU), with an optional PEFT adapter, on `device`, in eval mode."""
    torch_dtype = DTYPES[dtype] if dtype in DTYPES else (torch.float32 if device == "cpu" else "auto")
    model = auto_class.from_pretrained(path, dtype=torch_dtype, trust_remote_code=trust_remote_code,
                                       use_safetensors=not allow_pickle)
    if peft:
        from peft import PeftModel  # optional dependency, needed only for adapters

        model = PeftModel.from_pretrained(model, peft)
    return model.to(device).eval()


def checkpoint_files(path: str, peft: str | None) -> tuple[dict | None, dict | None]:
    """The file identities of a checkpoint and its adapter (Eval/models/identity.py), taken before the weights
    load so that they describe what was loaded; None for what is not on disk (a hub name, no adapter)."""
    return folder_identity(path) or None, (folder_identity(peft) or None) if peft else None


def checkpoint_identity(path: str, model, tokenizer, files: tuple[dict | None, dict | None]) -> dict:
    """What identifies a local checkpoint in a run sidecar: path, dtype, type, size, the hash of every file that
    determines its outputs (Eval/models/identity.py: all weight shards, config, generation config, tokenizer,
    chat template) and of the PEFT adapter's files, and the chat template's hash."""
    template = tokenizer.chat_template or ""
    return {"path": os.path.abspath(path) if os.path.exists(path) else path, "dtype": str(model.dtype),
            "model_type": getattr(model.config, "model_type", None),
            "num_parameters": sum(p.numel() for p in model.parameters()),
            "files": files[0], "peft_files": files[1],
            "chat_template_sha256": hashlib.sha256(template.encode()).hexdigest()[:16] if template else None}


def checked_checkpoint(path: str) -> str:
    """`path` when it can be a checkpoint: an existing folder with a config.json, or a hub name like org/model."""
    if not Path(path).exists() and (path.startswith((".", "/", "~")) or path.count("/") != 1):
        raise FileNotFoundError(f"model {path!r}: no such folder (and not a hub name like org/model)")
    if Path(path).is_dir() and not (Path(path) / "config.json").is_file():
        raise FileNotFoundError(f"model folder {path}: no config.json, so not a transformers checkpoint")
    return path


@dataclasses.dataclass(frozen=True)
class CheckpointOptions:
    """-M options of the Hugging Face backends (hf, masked). Safe by default: safetensors only, no remote code."""
    dtype: str = option("auto", "auto: float32 on CPU, the checkpoint's dtype on GPU",
                        choices=("auto", "float32", "bfloat16", "float16"))
    device: str = option("auto", "auto, cpu, cuda, cuda:1, ...")
    peft: str | None = option(None, "path of a PEFT adapter to apply")
    trust_remote_code: bool = option(False, "allow model code from the checkpoint")
    allow_pickle: bool = option(False, "allow non-safetensors (pickle) weights")
    threads: int | None = option(None, "torch CPU threads (none: torch's choice)")
