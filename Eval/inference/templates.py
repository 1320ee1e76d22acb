"""Prompt templates: where each dataset's comes from (docs/inference.md), checked and filled.
Only `{field}` and `{{` `}}` are allowed: `{a.b}` and the like could reach interpreter internals.

Usage:
    chosen = resolve_template("multi_news", "answer", Path("prompts"), "longbench", "", cfg)
    text = fill_template(chosen.template, record)
"""

import dataclasses
import functools
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
        """The template a record is filled with: the no-input variant when its `input` is absent,
        null or blank (0 and false are inputs; a list or an object is refused when filled)."""
        value = fields.get("input")
        if self.no_input is not None and (value is None or str(value).strip() == ""):
            return self.no_input
        return self.template


_TOKEN = re.compile(r"\{\{|\}\}|\{([^{}]*)\}|[{}]")
_PLACEHOLDER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


@functools.lru_cache(maxsize=256)  # checked per record, the same few templates
def check_template(template: str, source: str = "template") -> frozenset[str]:
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
    return frozenset(fields)


def read_template_file(path: Path) -> str:
    """A template file's text, CRLF and lone CR read as LF (as open() and LongBench v2 read it)."""
    return read_text_file(path).replace("\r\n", "\n").replace("\r", "\n")


def resolve_template(name: str, kind: str, prompt_dir: Path, form: str, published_prompt: str,
                     config: PromptConfig | None) -> ChosenTemplate | None:
    """The template of one kind for a dataset; None: the form's default (defaults.py)."""
    path = prompt_dir / f"{name}{KINDS[kind]}"
    in_config = config is not None and (kind == "answer" and name in config.by_dataset
                                        or form == "longbench_v2" and kind in config.by_kind)
    if path.exists() or path.is_symlink():
        note = (f"{name}: {path} wins over --prompt-config {config.path} (move it away to use "
                "the config's)") if in_config else None
        chosen = ChosenTemplate(read_template_file(path), str(path), note=note)
    elif in_config and kind == "answer" and name in config.by_dataset:
        chosen = ChosenTemplate(config.by_dataset[name], f"{config.path} [{name}]")
    elif in_config:
        chosen = config.by_kind[kind]
    elif published_prompt:
        where = f"{config.path} has no entry for it" if config else "no --prompt-config was given"
        # a generic prompt would change the task (multi_news would be asked a question)
        raise ValueError(f"{name}: a {published_prompt} dataset needs {published_prompt}'s own "
                         f"prompt and there is no {path} ({where}); pass --prompt-config with the "
                         "benchmark's config (LongBench's or TinyEval's "
                         "config/dataset2prompt.json, LongBench v2's prompts/ folder) or write "
                         f"{path}")
    else:
        return None
    if not check_template(chosen.template, chosen.source):
        raise RecordError(chosen.source, None, "the template has no {field} placeholder, so every "
                                               "example would get the same prompt; name the "
                                               "record fields it asks about, e.g. {input}")
    return chosen


def value_problem(value: object) -> str | None:
    """Why a record value cannot fill a placeholder (None: it can)."""
    if value is None or isinstance(value, (list, dict)):
        kind = "null" if value is None else "a list" if isinstance(value, list) else "an object"
        return f"is {kind}, which would reach the prompt as Python text ({str(value)[:40]!r})"
    if isinstance(value, float) and not math.isfinite(value):
        return f"is {value!r}, not a finite number"
    return None


def fill_template(template: str, fields: dict) -> str:
    """The template filled by str.format (load_dataset refused what value_problem refuses)."""
    return template.format(**fields)
