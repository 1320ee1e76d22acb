"""Prompt templates: where each dataset's template comes from, checked and filled.

A template is plain text with `{field}` placeholders naming record fields and `{{` / `}}` for
literal braces. Nothing else str.format accepts is allowed (`{}`, `{0}`, `{a.b}`, which can reach
interpreter internals, `{a[0]}`, `{a!r}`, `{a:>9}`, a lone brace): refused with file and line.
A template file's line ends are read as "\n" (a file saved with CRLF sends no "\r"), and a
template must name at least one field: one without would give every example the same prompt.
A placeholder is filled with a string, an integer, a finite float or a bool as str.format writes
it; null, a list, an object, NaN or infinity is refused (value_problem): it would reach the prompt
as Python text ('None', "['a']").

Where a template comes from, first found wins (resolve_template; step 4 is defaults.py's):
  1. prompts/NAME.txt (NAME.cot.txt, NAME.cot_answer.txt for --cot's two passes);
  2. --prompt-config: LongBench's / TinyEval's `dataset2prompt.json` (name -> template), or
     LongBench v2's `prompts/` folder, read and filled as benchmark_configs.py says;
  3. a task naming a published prompt (Eval/tasks.py) stops here with an error: a generic prompt
     would change the task (multi_news would be asked a question);
  4. the record form's default (defaults.py); a record with an empty `input` gets the variant
     asking nothing.

Usage:
    cfg = load_prompt_config(Path("dataset2prompt.json"))  # Eval/inference/benchmark_configs.py
    chosen = resolve_template("multi_news", "answer", Path("prompts"), "longbench", "", cfg)
    text = fill_template(chosen.template, record)
"""
from __future__ import annotations

import dataclasses
import hashlib
import math
import re
from pathlib import Path

from Eval.records import RecordError, read_text_file

KINDS = {"answer": ".txt", "cot": ".cot.txt", "cot_answer": ".cot_answer.txt"}  # prompts/ suffix


@dataclasses.dataclass(frozen=True)
class PromptConfig:
    """A benchmark's published prompts, read as they are (benchmark_configs.py)."""
    path: Path
    by_dataset: dict  # dataset2prompt.json: dataset name -> template
    by_kind: dict  # LongBench v2's prompts: kind -> ChosenTemplate (dollar_text: the file's)


@dataclasses.dataclass(frozen=True)
class ChosenTemplate:
    template: str
    source: str  # the file, "PATH [name]" for a config entry, or "default (form, language)"
    no_input: str | None = None  # the default's variant for records with an empty `input`
    note: str | None = None  # said to the user when a default was chosen
    dollar_text: str | None = None  # LongBench v2's $MARKER$ file as read: filled as pred.py fills

    @property
    def sha256(self) -> str:
        return hashlib.sha256(self.template.encode("utf-8")).hexdigest()[:16]

    def text_for(self, fields: dict) -> str:
        """The template a record is filled with: the no-input variant when its `input` is empty."""
        if self.no_input is not None and not str(fields.get("input") or "").strip():
            return self.no_input
        return self.template


_TOKEN = re.compile(r"\{\{|\}\}|\{([^{}]*)\}|[{}]")
_PLACEHOLDER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def check_template(template: str, source: str = "template") -> set[str]:
    """The field names of a template; RecordError for anything but {field} and {{ }}."""
    fields = set()
    for match in _TOKEN.finditer(template):
        token, inner = match.group(0), match.group(1)
        if token in ("{{", "}}"):
            continue
        line = template.count("\n", 0, match.start()) + 1
        if inner is None:
            raise RecordError(source, line, f"a lone {token!r} in the template; write "
                                            f"{token * 2} for a literal brace")
        if not _PLACEHOLDER.fullmatch(inner):
            raise RecordError(source, line, f"placeholder {token} is not allowed: only {{field}} "
                                            "with a record field's name (no positional {}, "
                                            "attribute access, indexing, !conversion or :format); "
                                            "write {{ and }} for literal braces")
        fields.add(inner)
    return fields


def read_template_file(path: Path) -> str:
    """A template file's text with CRLF and lone CR line ends read as LF (as Python's open() reads
    them, and so LongBench v2's pred.py)."""
    return read_text_file(path).replace("\r\n", "\n").replace("\r", "\n")


def resolve_template(name: str, kind: str, prompt_dir: Path, form: str, published_prompt: str,
                     config: PromptConfig | None) -> ChosenTemplate | None:
    """The template of one kind for a dataset (steps 1-3 above); None: the default (step 4)."""
    chosen = _find_template(name, kind, prompt_dir, form, published_prompt, config)
    if chosen is not None and not check_template(chosen.template, chosen.source):
        raise RecordError(chosen.source, None, "the template has no {field} placeholder, so every "
                                               "example would get the same prompt; name the "
                                               "record fields it asks about, e.g. {input}")
    return chosen


def _find_template(name: str, kind: str, prompt_dir: Path, form: str, published_prompt: str,
                   config: PromptConfig | None) -> ChosenTemplate | None:
    path = prompt_dir / f"{name}{KINDS[kind]}"
    in_config = config is not None and (kind == "answer" and name in config.by_dataset
                                        or form == "longbench_v2" and kind in config.by_kind)
    if path.exists() or path.is_symlink():
        template = read_template_file(path)
        check_template(template, str(path))
        note = (f"{name}: {path} wins over --prompt-config {config.path} (move it away to use "
                "the config's)") if in_config else None
        return ChosenTemplate(template, str(path), note=note)
    if in_config and kind == "answer" and name in config.by_dataset:
        return ChosenTemplate(config.by_dataset[name], f"{config.path} [{name}]")
    if in_config:
        return config.by_kind[kind]
    if published_prompt:
        where = f"{config.path} has no entry for it" if config else "no --prompt-config was given"
        raise ValueError(f"{name}: a {published_prompt} dataset needs {published_prompt}'s own "
                         f"prompt and there is no {path} ({where}); pass --prompt-config with the "
                         "benchmark's config (LongBench's or TinyEval's "
                         "config/dataset2prompt.json, LongBench v2's prompts/ folder) or write "
                         f"{path}")
    return None  # the form's default, if it has one (defaults.py)


def value_problem(value: object) -> str | None:
    """Why a record value cannot fill a placeholder (None: it can)."""
    if value is None or isinstance(value, (list, dict)):
        kind = "null" if value is None else "a list" if isinstance(value, list) else "an object"
        return f"is {kind}, which would reach the prompt as Python text ({str(value)[:40]!r})"
    if isinstance(value, float) and not math.isfinite(value):
        return f"is {value!r}, not a finite number"
    return None


def fill_template(template: str, fields: dict) -> str:
    """The template filled as str.format fills it (load_dataset has refused the values
    value_problem refuses, naming the file and line)."""
    return template.format(**fields)
