"""Prompt templates: `prompts/NAME.txt` read, checked and filled; the defaults for datasets that have none.

A template is plain text with `{field}` placeholders naming fields of the dataset's records, and `{{` / `}}` for
literal braces. Nothing else that str.format would accept is allowed: `{}` and `{0}` (positional), `{a.b}`
(attribute access, which can reach interpreter internals), `{a[0]}`, `{a!r}` and `{a:>9}`, and a lone brace are
refused with the file, line and placeholder, before any model loads.

Usage:
    from Eval.inference.templates import load_template, fill_template
    template, source, note = load_template("demo_qa_en", Path("prompts"), form="longbench", language="en")
    text = fill_template(template, record)
"""
from __future__ import annotations

import re
from pathlib import Path

from Eval.records import RecordError, read_text_file

DEFAULT_TEMPLATES = {
    ("longbench", "en"): "Read the text below and answer the question.\n\n{context}\n\nQuestion: {input}\nAnswer:",
    ("longbench", "zh"): "阅读下面的材料并回答问题。\n\n{context}\n\n问题：{input}\n回答：",
    ("instruction", "en"): "{instruction}\n{input}",
    ("instruction", "zh"): "{instruction}\n{input}",
}

_TOKEN = re.compile(r"\{\{|\}\}|\{([^{}]*)\}|[{}]")
_PLACEHOLDER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def check_template(template: str, source: str) -> set[str]:
    """The field names of a template; RecordError naming `source`, the line and the placeholder for anything
    but plain {field} placeholders and {{ }} escapes.

    >>> sorted(check_template("{context}\\n{{literal}} {input}", "t.txt"))
    ['context', 'input']
    >>> check_template("{input.__class__}", "t.txt")
    Traceback (most recent call last):
    ...
    Eval.records.RecordError: t.txt:1: placeholder {input.__class__} is not allowed: only {field} with a record field's name (no positional {}, attribute access, indexing, !conversion or :format); write {{ and }} for literal braces
    """
    fields = set()
    for match in _TOKEN.finditer(template):
        token, inner = match.group(0), match.group(1)
        if token in ("{{", "}}"):
            continue
        line = template.count("\n", 0, match.start()) + 1
        if inner is None:
            raise RecordError(source, line, f"a lone {token!r} in the template; write {token * 2} for a literal "
                                            "brace")
        if not _PLACEHOLDER.fullmatch(inner):
            raise RecordError(source, line, f"placeholder {token} is not allowed: only {{field}} with a record "
                                            "field's name (no positional {}, attribute access, indexing, "
                                            "!conversion or :format); write {{ and }} for literal braces")
        fields.add(inner)
    return fields


def template_fields(template: str) -> set[str]:
    """The field names a template uses (`{context}` -> "context"; `{{` is a literal brace)."""
    return check_template(template, "template")


def load_template(name: str, prompt_dir: Path, form: str, language: str) -> tuple[str, str, str | None]:
    """(template, where it came from, a note when a default was chosen); the file's template is checked."""
    path = prompt_dir / f"{name}.txt"
    if path.exists() or path.is_symlink():
        template = read_text_file(path)
        check_template(template, str(path))
        return template, str(path), None
    return (DEFAULT_TEMPLATES[(form, language)], f"default ({form}, {language})",
            f"{name}: no {path}; using the default {form}-form template")


def fill_template(template: str, fields: dict) -> str:
    """The template with each {field} replaced by the record's value (checked templates only)."""
    return template.format(**fields)
