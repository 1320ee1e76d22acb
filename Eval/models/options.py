"""-M key=value model options, one pair per flag (a value may hold commas, spaces and "="; a tuple
option grows by one value per pair), declared by each backend as a frozen dataclass of
`option(default, help)` fields (--help: Eval/args.py); AdapterOptions: every backend's.

Usage:
    parse_model_args(["dtype=bfloat16"], [AdapterOptions, CheckpointOptions])  # {class: options}
"""
from __future__ import annotations

import dataclasses
import typing

from Eval.registry import did_you_mean


def option(default, help: str, choices: tuple | None = None):  # noqa: A002 - argparse's word for it
    return dataclasses.field(default=default, metadata={"help": help, "choices": choices})


@dataclasses.dataclass(frozen=True)
class AdapterOptions:
    """Options every backend takes: differences between model families, never name checks."""
    system_prompt: str | None = option(None, "system message for chat templates")
    stop: tuple[str, ...] = option((), "an extra stop string (one per pair; repeat for more)")
    cut_at: tuple[str, ...] = option((), "cut the output at this marker, e.g. <eoa> (TinyEval)")
    strip_think: bool = option(False, "save only the text after the thinking block (if closed)")
    think_tags: tuple[str, ...] = option(("<think>", "</think>"),
                                         "the thinking block's opening and closing tag: two pairs, "
                                         "think_tags=OPEN think_tags=CLOSE")
    thinking_budget: int | None = option(None, "hf: at most N new tokens inside a thinking block, "
                                               "then the closing tag is forced")
    reasoning: bool = option(False, "the model may think without its prompt opening the block "
                                    "(api: stop strings are applied here, after the closing tag)")

    def __post_init__(self):
        if len(self.think_tags) != 2 or not all(self.think_tags):  # "" would match every text
            raise ValueError("think_tags must be two non-empty strings (open, close), not "
                             f"{self.think_tags!r}")
        if self.thinking_budget is not None and self.thinking_budget < 0:
            raise ValueError(f"thinking_budget must be at least 0, not {self.thinking_budget}")
        for name in ("stop", "cut_at"):
            if any(not text for text in getattr(self, name)):  # "" would match everywhere
                raise ValueError(f"-M {name}= is empty: give the text to look for")


def _value(annotation, text: str, key: str):
    """`text` as a value of a field annotated X, X | None ("none") or tuple[X, ...] (one X)."""
    if type(None) in typing.get_args(annotation) and text.lower() == "none":
        return None
    kind = next((a for a in typing.get_args(annotation) if a is not type(None)), annotation)
    if kind is bool:
        if text.lower() in ("true", "1", "yes", "on"):
            return True
        if text.lower() in ("false", "0", "no", "off"):
            return False
        raise ValueError(f"-M {key}={text}: not true or false")
    try:
        return kind(text)
    except ValueError:
        what = "an integer" if kind is int else "a number"
        raise ValueError(f"-M {key}={text}: not {what}") from None


def parse_model_args(pairs: list[str], classes: list[type]) -> dict[type, object]:
    """Each options class built from the `key=value` pairs that name its fields, or ValueError."""
    fields = {f.name: (cls, f) for cls in classes for f in dataclasses.fields(cls)}
    values: dict[type, dict] = {cls: {} for cls in classes}
    for pair in pairs:
        key, sep, text = pair.partition("=")
        key = key.strip().replace("-", "_")
        if not sep:
            raise ValueError(f"-M {pair}: expected key=value")
        if key not in fields:
            raise ValueError(f"-M {key}: no such option.{did_you_mean(key, list(fields))} Options: "
                             f"{', '.join(sorted(fields))}")
        cls, field = fields[key]
        annotation = typing.get_type_hints(cls)[key]
        value = _value(annotation, text, key)
        choices = field.metadata.get("choices")
        if choices and value not in choices:
            raise ValueError(f"-M {key}={text}: choose one of {', '.join(map(str, choices))}")
        if typing.get_origin(annotation) is tuple:
            value = (*values[cls].get(key, ()), value)
        values[cls][key] = value
    return {cls: cls(**values[cls]) for cls in classes}  # __post_init__'s ValueError as it is
