"""Local transformers checkpoints, the base of the hf and masked adapters: device, tokenizer, safe
weight loading, identity.

Usage:
    HFModel(path, AdapterOptions(), dtype="bfloat16")   # or HFModel.from_options(path, ...)
"""
from __future__ import annotations

import dataclasses
from pathlib import Path

import torch
from transformers import AutoTokenizer

from Eval.models.base import BaseLLM
from Eval.models.gguf import gguf_parts
from Eval.models.identity import folder_identity, shown_path, template_sha256
from Eval.models.options import AdapterOptions, option
from Eval.registry import did_you_mean
from Eval.storage import read_json_object


@dataclasses.dataclass(frozen=True)
class CheckpointOptions:
    """-M options of the hf and masked backends. Safe by default: safetensors, no remote code."""
    dtype: str = option("auto", "auto: float32 on CPU, the checkpoint's dtype on GPU",
                        choices=("auto", "float32", "bfloat16", "float16"))
    device: str = option("auto", "auto, cpu, cuda, cuda:1, ...")
    peft: str | None = option(None, "path of a PEFT adapter to apply")
    trust_remote_code: bool = option(False, "allow model code from the checkpoint")
    allow_pickle: bool = option(False, "allow non-safetensors (pickle) weights")
    threads: int | None = option(None, "torch CPU threads (none: torch's choice)")

    def __post_init__(self):  # refused here, before any weights load, not deep inside torch
        if self.threads is not None and self.threads < 1:
            raise ValueError(f"-M threads={self.threads}: must be at least 1 (none: torch's "
                             "choice)")
        if self.peft is not None and not self.peft.strip():
            raise ValueError("-M peft= is empty: give the adapter's path, or peft=none")
        check_device(self.device, here=False)


def check_device(device: str, here: bool) -> None:
    """ValueError naming the devices here, for a name torch cannot parse and, with `here` (weights
    about to load), a CUDA device it does not have: a laptop dry-runs the prompts of a GPU run."""
    if device == "auto":
        return
    gpus = torch.cuda.device_count() if torch.cuda.is_available() else 0
    cuda = f", cuda, cuda:0 to cuda:{gpus - 1}" if gpus else ""
    mps = ", mps" if torch.backends.mps.is_available() else ""
    devices = f"auto, cpu{cuda}{mps}" + ("" if gpus else " (torch sees no CUDA GPU)")
    try:
        parsed = torch.device(device)
    except (RuntimeError, ValueError):
        raise ValueError(f"-M device={device}: not a device torch knows; here: {devices}") from None
    if parsed.type == "meta":  # tensors without values: nothing could be computed
        raise ValueError(f"-M device=meta holds no weights' values; here: {devices}")
    if here and parsed.type == "cuda" and (parsed.index or 0) >= gpus:
        raise ValueError(f"-M device={device}: no such CUDA device on this machine; here: "
                         f"{devices}")


def checked_checkpoint(path: str, flag: str = "model") -> str:
    """`path` if it can be a checkpoint (a folder with a config.json, a GGUF), an adapter (flag
    "-M peft") or a hub name: org/name where org/ is no local folder, not a typo'd local path."""
    if not Path(path).exists() and (path.startswith((".", "/", "~")) or path.count("/") != 1
                                    or Path(path.split("/")[0]).is_dir()):
        parent = Path(path).parent  # a typo: the names beside it it may mean
        near = did_you_mean(Path(path).name, [p.name for p in parent.iterdir()]
                            if parent.is_dir() else [], lead=".")
        raise FileNotFoundError(f"{flag} {path!r}: no such file or folder (and not a hub name, "
                                f"org/name with no local folder org/){near}")
    if flag == "model" and gguf_parts(path) is None and Path(path).exists() and \
            not (Path(path) / "config.json").is_file():
        hint, (adapter, _) = "", read_json_object(Path(path) / "adapter_config.json")
        if adapter:  # a PEFT adapter: it is loaded on its base model
            base = adapter.get("base_model_name_or_path") or "BASE"
            hint = f"; it holds a PEFT adapter, loaded on its base: --model {base} -M peft={path}"
        raise FileNotFoundError(f"model {path}: neither a folder with a config.json nor a .gguf "
                                f"file, so not a transformers checkpoint{hint}")
    return path


def pickle_weights(folder: str | None) -> str | None:
    """A local folder's pickle weights file when it holds no safetensors ones, else None."""
    path = Path(folder or "")
    if not folder or not path.is_dir() or any(path.glob("*.safetensors")):
        return None
    found = sorted([*path.glob("pytorch_model*.bin"), *path.glob("adapter_model.bin")])
    return str(found[0]) if found else None


def load_tokenizer(path: str, trust_remote_code: bool, padding_side: str = "left"):
    folder, gguf = gguf_parts(path) or (path, None)
    tokenizer = AutoTokenizer.from_pretrained(folder, gguf_file=gguf, padding_side=padding_side,
                                              trust_remote_code=trust_remote_code)
    if not tokenizer("Hello, world.", add_special_tokens=False)["input_ids"]:  # transformers' blank
        raise ValueError(f"model {path}: its tokenizer has no vocabulary: tokenizer.json (or "
                         "vocab.json and merges.txt, or tokenizer.model) is missing")
    tokenizer.model_max_length = int(1e30)  # we cut long prompts ourselves: no length warning
    if tokenizer.pad_token_id is None:  # padding needs a pad id; it is masked out anyway
        tokenizer.pad_token = tokenizer.eos_token
    return tokenizer


class CheckpointModel(BaseLLM):
    """A checkpoint loaded with `auto_class`, its tokenizer padding on `padding_side`."""
    Options = CheckpointOptions
    auto_class = None  # AutoModelForCausalLM, AutoModelForMaskedLM
    padding_side = "left"

    @classmethod
    def from_options(cls, model: str, options: AdapterOptions, backend_options: CheckpointOptions):
        if backend_options.peft:  # refused before the weights load, not after
            checked_checkpoint(backend_options.peft, "-M peft")
        return cls(checked_checkpoint(model), options, **dataclasses.asdict(backend_options))

    def __init__(self, path: str, options: AdapterOptions | None = None, *, dtype: str = "auto",
                 device: str = "auto", peft: str | None = None, trust_remote_code: bool = False,
                 allow_pickle: bool = False, threads: int | None = None):
        super().__init__(options)
        if threads:
            torch.set_num_threads(threads)
        if device == "auto":
            device = "cuda" if torch.cuda.is_available() else "cpu"
        check_device(device, here=True)
        self.path, self.peft, self.device = path, peft, device
        # taken before the weights load: what was loaded (None: not on disk); a hub name's after
        # it, from the snapshot from_pretrained resolved (and may have fetched)
        local = Path(path).exists() and (not peft or Path(peft).exists())
        self.files = self._file_identities() if local else None
        self.tokenizer = load_tokenizer(path, trust_remote_code, self.padding_side)
        self.model = self._load_weights(dtype, trust_remote_code, allow_pickle)
        self.files = self.files or self._file_identities()
        self.num_parameters = sum(p.numel() for p in self.model.parameters())

    def _load_weights(self, dtype: str, trust_remote_code: bool, allow_pickle: bool):
        """Safetensors (pickle too if allowed) or GGUF weights, with the PEFT adapter if any."""
        if dtype == "auto":
            dtype = torch.float32 if self.device == "cpu" else "auto"
        folder, gguf = gguf_parts(self.path) or (self.path, None)
        # said here: transformers would name only the safetensors file it did not find
        for flag, where in (("--model", None if gguf else folder), ("-M peft", self.peft)):
            found = None if allow_pickle else pickle_weights(where)
            if found:
                raise ValueError(f"{flag}: {found} holds pickle weights, which can run code when "
                                 "loaded; -M allow_pickle=true loads them (files you trust only)")
        safe = {"gguf_file": gguf} if gguf else {"use_safetensors": None if allow_pickle else True}
        model = self.auto_class.from_pretrained(folder, dtype=dtype,
                                                trust_remote_code=trust_remote_code, **safe)
        if self.peft:
            from peft import PeftModel  # optional dependency, needed only for adapters

            model = PeftModel.from_pretrained(model, self.peft)
        return model.to(self.device).eval()

    def _file_identities(self) -> tuple[dict | None, dict | None]:
        return tuple((folder_identity(p, hub=True) or None) if p else None
                     for p in (self.path, self.peft))

    def context_window(self) -> int | None:
        return getattr(self.model.config, "max_position_embeddings", None)

    def identity(self) -> dict:
        return {"path": shown_path(self.path), "dtype": str(self.model.dtype),
                "model_type": getattr(self.model.config, "model_type", None),
                "num_parameters": self.num_parameters,
                "files": self.files[0], "peft_files": self.files[1],
                "chat_template_sha256": template_sha256(self.tokenizer),
                "adapter": self.name, "peft": self.peft, "device": self.device}
