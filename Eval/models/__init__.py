"""Model adapters, one registry: MODELS[backend] -> a loader taking (model, options, **backend args).

Backends import their heavy dependencies (torch, transformers) only when loaded, so importing this package
stays cheap and the scoring stage never pulls them in.
"""
from __future__ import annotations

from typing import Callable

from Eval.models.base import AdapterOptions, BaseLLM

MODELS: dict[str, Callable[..., BaseLLM]] = {}


def register(name: str):
    def add(loader: Callable[..., BaseLLM]) -> Callable[..., BaseLLM]:
        MODELS[name] = loader
        return loader
    return add


@register("hf")
def _load_hf(model: str, options: AdapterOptions, **kwargs) -> BaseLLM:
    from Eval.models.hf import HFModel

    return HFModel(model, options, **kwargs)


@register("masked")
def _load_masked(model: str, options: AdapterOptions, **kwargs) -> BaseLLM:
    from Eval.models.masked import MaskedLMModel

    return MaskedLMModel(model, options, **kwargs)


@register("echo")
def _load_echo(model: str, options: AdapterOptions, **kwargs) -> BaseLLM:
    from Eval.models.echo import EchoModel

    return EchoModel(options)


@register("api")
def _load_api(model: str, options: AdapterOptions, **kwargs) -> BaseLLM:
    """`model` is the served model name; kwargs: base_url, tokenizer (default: model), api_key_env, ..."""
    from Eval.models.api import APIModel

    return APIModel(kwargs.pop("base_url"), model, options, **kwargs)
