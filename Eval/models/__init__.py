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


@register("echo")
def _load_echo(model: str, options: AdapterOptions, **kwargs) -> BaseLLM:
    from Eval.models.echo import EchoModel

    return EchoModel(options)
