"""The tokenizer half of a Hugging Face checkpoint, for `inference.py dry-run`: it renders prompts exactly as the
hf adapter does (BaseLLM's prompt path on the same tokenizer, loaded by the same function) and never loads weights.

Usage:
    model = from_args(args, tokenizer_only=True)        # Eval/models/factory.py; the hf backend returns this
    prompts = model.build_prompts(texts, chat=True, max_new_tokens=64, max_length=4096)
    model.can("generate")                               # False: it declares no model calls

It is no backend of its own (not registered): a backend offers it through its `tokenizer_only` classmethod.
"""
from __future__ import annotations

import hashlib
import os

from transformers import AutoConfig, AutoTokenizer

from Eval.models.base import BaseLLM
from Eval.models.options import AdapterOptions


def load_tokenizer(path: str, trust_remote_code: bool, padding_side: str = "left"):
    """The hf adapter's tokenizer (HFModel loads it here too, so a dry run cannot tokenize differently)."""
    tokenizer = AutoTokenizer.from_pretrained(path, trust_remote_code=trust_remote_code, padding_side=padding_side)
    tokenizer.model_max_length = int(1e30)  # we cut long prompts ourselves; silence the length warning
    if tokenizer.pad_token_id is None:  # left padding needs a pad id; it is masked out anyway
        tokenizer.pad_token = tokenizer.eos_token
    return tokenizer


class TokenizerOnly(BaseLLM):
    name = "tokenizer-only"
    capabilities: frozenset[str] = frozenset()  # tokenizer hooks and build_prompts only

    def __init__(self, path: str, options: AdapterOptions | None = None, *, trust_remote_code: bool = False,
                 backend: str = "hf"):
        super().__init__(options)
        self.path, self.backend, self.trust_remote_code = path, backend, trust_remote_code
        self.tokenizer = load_tokenizer(path, trust_remote_code)

    def context_window(self) -> int | None:
        # What HFModel reads from the loaded model's config, read from config.json alone.
        config = AutoConfig.from_pretrained(self.path, trust_remote_code=self.trust_remote_code)
        return getattr(config, "max_position_embeddings", None)

    def identity(self) -> dict:
        template = self.tokenizer.chat_template or ""
        return {"adapter": f"{self.backend} ({self.name})",
                "path": os.path.abspath(self.path) if os.path.exists(self.path) else self.path,
                "chat_template_sha256": hashlib.sha256(template.encode()).hexdigest()[:16] if template else None}
