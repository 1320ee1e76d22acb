"""The dry-run twin of an adapter for `inference.py dry-run`: the same prompts, with no weights
loaded (hf: TokenizerOnly, the checkpoint's tokenizer and chat template) and no model calls.

Usage:
    renderer = dry_run_twin(args)   # or TokenizerOnly("/path/to/checkpoint", AdapterOptions())
    renderer.build_prompts(["Hi"], chat=True, max_new_tokens=16, max_length=None)
"""
from __future__ import annotations

from transformers import AutoConfig

from Eval.models import MODELS
from Eval.models.base import BaseLLM
from Eval.models.checkpoint import checked_checkpoint, load_tokenizer
from Eval.models.gguf import gguf_parts
from Eval.models.hf import HFModel
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


def dry_run_twin(args) -> BaseLLM:
    """The adapter `args` describe (factory.resolve_model_args), without weights or model calls."""
    backend = MODELS[args.backend]
    backend.check_thinking_budget(args.adapter_options.thinking_budget)  # before any loading
    if issubclass(backend, HFModel):  # a backend built on hf's adapter renders as hf does
        return TokenizerOnly(checked_checkpoint(args.model), args.adapter_options,
                             trust_remote_code=args.backend_options.trust_remote_code)
    if backend.holds_weights:
        raise ValueError(f"the {backend.name} backend cannot dry-run: it has no tokenizer-only "
                         "mode")
    adapter = backend.from_options(args.model, args.adapter_options, args.backend_options)
    adapter.capabilities = frozenset()
    return adapter
