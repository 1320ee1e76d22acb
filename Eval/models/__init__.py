"""Model adapters (the inference stage): MODELS[backend] is a BaseLLM subclass.

A backend is a BaseLLM subclass decorated with `@register_model("name")` in a module of this
package, with its -M options in `Options` and a `from_options` classmethod. The registry reads the
modules for names and imports one only when its backend is used: --help and scoring need no torch.
Build an adapter with Eval/models/factory.py.
"""
from __future__ import annotations

from Eval.registry import Registry

MODELS = Registry("model backend", discover="Eval.models", marker="register_model",
                  hint='Add one: a BaseLLM subclass decorated with @register_model("name") '
                       'in a module of Eval/models/.')
register_model = MODELS.register
