"""PERTURBATIONS: seeded rewrites of an example's input text, for HELM's robustness figure
(docs/robustness.md): each a decorated pure `fn(text, rng, *args) -> str` in its language's module,
its docstring the card; (text, seed_key, arguments) gives the same text anywhere.

Usage:
    parse_perturbations("typo:0.05,extra_space")   # [("typo", (0.05,)), ("extra_space", ())]
    PERTURBATIONS["typo"].label(())          # "typo:0.05" (missing arguments take their defaults)
    PERTURBATIONS["typo"].apply("Hello world", "ex-7|question", 0.05)
"""
from __future__ import annotations

import dataclasses
import hashlib
import random
from typing import Callable

from Eval.registry import Registry

PERTURBATIONS = Registry("perturbation", discover="Eval.perturbations",
                         hint="Add one: a function decorated with @perturbation in any module of "
                              "Eval/perturbations/.")
INPUT_FIELDS = ("input", "question", "instruction", "context")  # where an example's input lives


@dataclasses.dataclass(frozen=True)
class Perturbation:
    name: str
    fn: Callable[..., str]
    languages: tuple[str, ...]
    fields: tuple[str, ...] = INPUT_FIELDS
    default_args: tuple = ()
    bounds: tuple[tuple[float, float], ...] = ()  # (low, high) per argument, inclusive

    def resolve(self, args: tuple | list = ()) -> tuple:
        """`args` completed with the defaults, typed as them, checked in bounds."""
        if len(args) > len(self.default_args):
            raise ValueError(f"{self.name} takes at most {len(self.default_args)} argument(s), "
                             f"got {len(args)}")
        resolved = []
        for i, default in enumerate(self.default_args):
            value = args[i] if i < len(args) else default
            try:
                value = type(default)(value)
            except (TypeError, ValueError):
                raise ValueError(f"{self.name}: argument {i + 1} must be {type(default).__name__}, "
                                 f"got {value!r}") from None
            if i < len(self.bounds) and not self.bounds[i][0] <= value <= self.bounds[i][1]:
                low, high = self.bounds[i]
                raise ValueError(f"{self.name}: argument {i + 1} must be within [{low}, {high}], "
                                 f"got {value}")
            resolved.append(value)
        return tuple(resolved)

    def label(self, args: tuple | list = ()) -> str:
        """Stable text naming this perturbation with all its arguments: "typo:0.05", "lowercase"."""
        return ":".join([self.name, *map(str, self.resolve(args))])

    def rng(self, seed_key: str, args: tuple) -> random.Random:
        # sha256, not hash(): Python salts str hashes per process
        digest = hashlib.sha256(f"{self.name}|{args}|{seed_key}".encode("utf-8")).digest()
        return random.Random(int.from_bytes(digest[:8], "big"))

    def apply(self, text: str, seed_key: str, *args) -> str:
        """`text` perturbed, the same for the same (text, seed_key, args); "" stays ""."""
        args = self.resolve(args)
        if not text:
            return text
        return self.fn(text, self.rng(str(seed_key), args), *args)


def perturbation(name: str, *, languages: tuple[str, ...], default_args: tuple = (),
                 bounds: tuple[tuple[float, float], ...] = ()):
    """Register `fn(text, rng, *args) -> str` under `name`."""
    if not languages:
        raise ValueError(f"perturbation {name!r} must declare the languages it applies to")

    def register(fn: Callable[..., str]) -> Callable[..., str]:
        PERTURBATIONS.register(name, Perturbation(name, fn, tuple(languages), INPUT_FIELDS,
                                                  tuple(default_args), tuple(bounds)))
        return fn
    return register


def swap_chars(text: str, rng: random.Random, rate: float, table: dict[str, str]) -> str:
    """Each character in `table` (lower-cased), with probability `rate`, replaced by one of its
    entry's, the case kept."""
    out = []
    for ch in text:
        options = table.get(ch.lower())
        if options and rng.random() < rate:
            new = rng.choice(options)
            ch = new.upper() if ch.isupper() else new
        out.append(ch)
    return "".join(out)


def apply(name: str, text: str, seed_key: str, *args) -> str:
    """The short form of PERTURBATIONS[name].apply the cards' examples use."""
    return PERTURBATIONS[name].apply(text, seed_key, *args)


def parse_perturbations(spec: str | None) -> list[tuple[str, tuple]]:
    """NAME[:ARG...],... -> [(name, the arguments given, converted and checked)]."""
    if spec is None or not spec.strip():
        return []
    specs, seen = [], {}
    for part in (part.strip() for part in spec.split(",")):
        name, *raw = [piece.strip() for piece in part.split(":")]
        if not name:
            raise ValueError(f"--perturb: empty perturbation name in part {part!r} of {spec!r}")
        if name not in PERTURBATIONS:
            raise ValueError(f"--perturb: {part!r}: {PERTURBATIONS.unknown(name)}")
        p = PERTURBATIONS[name]
        try:
            args = p.resolve(raw)[:len(raw)]
        except ValueError as error:
            raise ValueError(f"--perturb: {part!r}: {error}") from None
        label = p.label(args)
        if label in seen:
            raise ValueError(f"--perturb: {part!r} repeats {seen[label]!r} (both are {label})")
        seen[label] = part
        specs.append((name, args))
    return specs
