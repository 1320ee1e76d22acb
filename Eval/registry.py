"""One registry behind every named concept, filled where each thing is defined; a name registered
twice raises, an unknown one is a KeyError naming the closest known ones. `discover`: the first
lookup imports every module of those packages (not `_x`); with a `marker`, the modules are only
read (its decorators parsed) and one is imported when one of its names is asked for (--help
imports no torch).

Usage:
    METRICS = Registry("metric", discover="Eval.metrics", hint="add one with @metric")
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
    def __init__(self, kind: str, *, discover: str | tuple[str, ...] = (),
                 marker: str | None = None, hint: str = ""):
        self.kind, self.hint, self._marker = kind, hint, marker
        self._packages = (discover,) if isinstance(discover, str) else discover
        self._items: dict[str, Any] = {}
        self._marked: dict[str, tuple[str, str]] = {}  # marker mode: name -> (module, help)
        self._discovered = not self._packages
        self.fallback = None  # name -> value or None: names built, not listed (ranking cutoffs)

    def register(self, name: str, value: Any = None):
        """Register `value` under `name`; with no value, return a decorator that does."""
        if value is None:
            return lambda thing: self.register(name, thing)
        if name in self._items:
            raise ValueError(f"{self.kind} {name!r} is registered twice")
        self._items[name] = value
        return value

    def _discover(self) -> None:
        if self._discovered:
            return
        self._discovered = True
        modules = [f"{package}.{found.name}" for package in self._packages
                   for found in pkgutil.iter_modules(importlib.import_module(package).__path__)
                   if not found.name.startswith("_")]
        for module in modules:
            if self._marker is None:
                importlib.import_module(module)
                continue
            for name, help_text in _marked_names(module, self._marker):
                self._marked.setdefault(name, (module, help_text))

    def names(self) -> list[str]:
        self._discover()
        return sorted(set(self._items) | set(self._marked))

    def __getitem__(self, name: str) -> Any:
        if name not in self._items:
            self._discover()
            if name in self._marked:
                importlib.import_module(self._marked[name][0])  # registers it where it is defined
        if name not in self._items:
            built = self.fallback(name) if self.fallback else None
            if built is None:
                raise KeyError(self.unknown(name))
            return built
        return self._items[name]

    def help_of(self, name: str) -> str:
        """The help="..." a marker gave `name`, without importing its module."""
        self._discover()
        return self._marked.get(name, ("", ""))[1]

    def unknown(self, name: object) -> str:
        known = self.names()
        text = f"unknown {self.kind} {name!r}.{did_you_mean(name, known)} Known: " \
               f"{', '.join(known) or 'none'}."
        return text + (f" {self.hint}" if self.hint else "")

    def __contains__(self, name: object) -> bool:
        if not isinstance(name, str):
            return False
        return name in self.names() or bool(self.fallback and self.fallback(name))

    def __iter__(self) -> Iterator[str]:
        return iter(self.names())

    def __len__(self) -> int:
        return len(self.names())


def _marked_names(module: str, marker: str) -> list[tuple[str, str]]:
    """(name, help or "") of each `@marker("name", help="...")` in a module's source."""
    source = Path(importlib.util.find_spec(module).origin).read_text(encoding="utf-8")
    names = []
    for node in ast.walk(ast.parse(source)):
        for decorator in getattr(node, "decorator_list", []):
            if (isinstance(decorator, ast.Call) and getattr(decorator.func, "id", None) == marker
                    and decorator.args and isinstance(decorator.args[0], ast.Constant)):
                help_text = next((k.value.value for k in decorator.keywords
                                  if k.arg == "help" and isinstance(k.value, ast.Constant)), "")
                names.append((decorator.args[0].value, help_text))
    return names


def did_you_mean(name: object, known: list[str], cutoff: float = 0.5, lead: str = "") -> str:
    """' Did you mean: A, B?' of the known names closest to a mistyped `name`, else ''; `lead`
    (".": the sentence before it has no stop of its own) goes first when there is a hint."""
    close = difflib.get_close_matches(str(name), known, n=3, cutoff=cutoff)
    return f"{lead} Did you mean: {', '.join(close)}?" if close else ""
