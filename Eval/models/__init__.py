"""Model adapters (the inference stage), one registry: MODELS[backend] is a BaseLLM subclass.

A backend is a BaseLLM subclass decorated with `@register_model("name")` in any module of this package, with a
`from_args(model, options, args)` classmethod; nothing else lists it. The registry finds the names by reading the
modules and imports a module only when its backend is used, so listing backends (--help) and importing this
package stay cheap and the scoring stage never pulls in torch. Build an adapter with Eval/models/factory.py.
"""
from __future__ import annotations

from Eval.registry import Registry

MODELS = Registry("model backend", discover="Eval.models", marker="register_model",
                  hint='Add one: a BaseLLM subclass decorated with @register_model("name") '
                       'in a module of Eval/models/.')
register_model = MODELS.register
