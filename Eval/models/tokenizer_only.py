"""The hf adapter's tokenizer-only twin for `inference.py dry-run` (HFModel.tokenizer_only): the
same prompts, rendered by the checkpoint's tokenizer and chat template, with no weights loaded.

Usage:
    renderer = TokenizerOnly("/path/to/checkpoint", AdapterOptions())
    renderer.build_prompts(["Hi"], chat=True, max_new_tokens=16, max_length=None)
"""
from __future__ import annotations

from transformers import AutoConfig

from Eval.models.base import BaseLLM
from Eval.models.checkpoint import gguf_parts, load_tokenizer
from Eval.models.identity import shown_path, template_sha256
from Eval.models.options import AdapterOptions


class TokenizerOnly(BaseLLM):
    name = "tokenizer-only"
    capabilities: frozenset[str] = frozenset()

    def __init__(self, path: str, options: AdapterOptions | None = None, *,
                 trust_remote_code: bool = False):
        super().__init__(options)
        self.path, self.trust_remote_code = path, trust_remote_code
        self.tokenizer = load_tokenizer(path, trust_remote_code)
        self._window: list[int | None] = []  # context_window's answer, once read

    def context_window(self) -> int | None:
        """max_position_embeddings of the checkpoint's config, read once per run: a GGUF file's
        config is parsed from the whole file (seconds), and every dataset asks."""
        if not self._window:
            folder, gguf = gguf_parts(self.path) or (self.path, None)
            config = AutoConfig.from_pretrained(folder, gguf_file=gguf,
                                                trust_remote_code=self.trust_remote_code)
            self._window.append(getattr(config, "max_position_embeddings", None))
        return self._window[0]

    def identity(self) -> dict:
        return {"adapter": f"hf ({self.name})", "path": shown_path(self.path),
                "chat_template_sha256": template_sha256(self.tokenizer)}
