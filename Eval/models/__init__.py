"""Model adapters (the inference stage): MODELS[backend] is a BaseLLM subclass decorated with
`@register_model("name")` in a module of this package (README: "A backend"), found by reading the
modules and imported only when used: --help and scoring need no torch. Built by factory.py.
"""
from __future__ import annotations

from Eval.registry import Registry

MODELS = Registry("model backend", discover="Eval.models", marker="register_model",
                  hint='Add one: a BaseLLM subclass decorated with @register_model("name") '
                       'in a module of Eval/models/.')
register_model = MODELS.register
