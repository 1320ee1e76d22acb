"""One registry helper behind every named concept: MODELS (backends), METRICS, TASKS (datasets), EXTRACTORS.
Things are registered where they are defined; nothing lists them by hand.

A Registry is a read-only mapping of name -> thing with three promises: a name is registered once (a second
registration is a bug and raises), an unknown name is a KeyError that suggests the closest known names and says
how to add one, and the package the things live in is searched by itself:
    - `discover="Eval.metrics"`: the first lookup imports every module of that package (not `_private` ones);
    - `discover="Eval.models", marker="register_model"`: the modules are only READ (their `@register_model("x")`
      decorators found by parsing), and a module is imported when one of its names is asked for. Listing the
      backends for --help then costs no torch import; using one imports just its module.

Usage:
    METRICS = Registry("metric", discover="Eval.metrics", hint="add one with @metric in any module there")
    METRICS.register("qa_f1", Metric(...))        # or as a decorator: @METRICS.register("qa_f1")
    METRICS["qa_f1"]; "qa_f1" in METRICS; sorted(METRICS); METRICS.get("nope")  # -> None
"""
from __future__ import annotations

import ast
import difflib
import importlib
import importlib.util
import pkgutil
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Iterator


class Registry(Mapping):
    def __init__(self, kind: str, *, discover: str | tuple[str, ...] | None = None, marker: str | None = None,
                 hint: str = ""):
        self.kind, self.hint = kind, hint
        self._packages = (discover,) if isinstance(discover, str) else tuple(discover or ())
        self._marker = marker
        self._items: dict[str, Any] = {}
        self._lazy: dict[str, str] | None = None  # name -> module, found by reading the package (marker mode)
        self._help: dict[str, str] = {}  # name -> the marker's help="..." keyword, read with the name
        self._imported = discover is None

    # --- filling ------------------------------------------------------------------------------------------
    def register(self, name: str, value: Any = None):
        """Register `value` under `name`; without a value, a decorator that registers what it decorates."""
        if value is None:
            def decorate(thing):
                self.register(name, thing)
                return thing
            return decorate
        if name in self._items:
            raise ValueError(f"{self.kind} {name!r} is registered twice")
        self._items[name] = value
        return value

    def _modules(self) -> list[str]:
        found = []
        for name in self._packages:
            package = importlib.import_module(name)
            found += [f"{name}.{m.name}" for m in pkgutil.iter_modules(package.__path__) if not m.name.startswith("_")]
        return found

    def _discover(self) -> None:
        if self._imported:
            return
        if self._marker is None:
            self._imported = True
            for module in self._modules():
                importlib.import_module(module)
        elif self._lazy is None:
            self._lazy = {}
            for module in self._modules():
                for name, help_text in _marked_names(module, self._marker):
                    self._lazy.setdefault(name, module)
                    self._help.setdefault(name, help_text)

    # --- looking up ----------------------------------------------------------------------------------------
    def names(self) -> list[str]:
        self._discover()
        return sorted(set(self._items) | set(self._lazy or ()))

    def __getitem__(self, name: str) -> Any:
        if name not in self._items:
            self._discover()
            if self._lazy and name in self._lazy and name not in self._items:
                importlib.import_module(self._lazy[name])  # registers it where it is defined
        if name not in self._items:
            raise KeyError(self.unknown(name))
        return self._items[name]

    def help_of(self, name: str) -> str:
        """The one-line help a marker gave `name` (help="..."), without importing its module."""
        self._discover()
        return self._help.get(name) or getattr(self._items.get(name), "help", "")

    def unknown(self, name: object) -> str:
        known = self.names()
        close = difflib.get_close_matches(str(name), known, n=3, cutoff=0.5)
        hint = f" Did you mean: {', '.join(close)}?" if close else ""
        return f"unknown {self.kind} {name!r}.{hint} Known: {', '.join(known) or 'none'}." + \
            (f" {self.hint}" if self.hint else "")

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and name in self.names()

    def __iter__(self) -> Iterator[str]:
        return iter(self.names())

    def __len__(self) -> int:
        return len(self.names())


def _marked_names(module: str, marker: str) -> list[tuple[str, str]]:
    """(name, help) of what a module registers with `@marker("name", help="...")`, read from its source without
    importing it (help is "" when the marker has none)."""
    spec = importlib.util.find_spec(module)
    if spec is None or spec.origin is None or not spec.origin.endswith(".py"):
        return []
    tree = ast.parse(Path(spec.origin).read_text(encoding="utf-8"))
    names = []
    for node in ast.walk(tree):
        for decorator in getattr(node, "decorator_list", []):
            if isinstance(decorator, ast.Call) and getattr(decorator.func, "id", None) == marker and \
                    decorator.args and isinstance(decorator.args[0], ast.Constant):
                help_text = next((k.value.value for k in decorator.keywords
                                  if k.arg == "help" and isinstance(k.value, ast.Constant)), "")
                names.append((decorator.args[0].value, help_text))
    return names
