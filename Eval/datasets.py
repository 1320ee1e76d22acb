"""Loading a dataset and its prompt template for inference, and checking them before any model loads.

A dataset is `dataset/NAME.jsonl` in one of two forms:
    LongBench:    {"input", "context", "answers": [..], "length", "all_classes", "_id", ...}
    instruction:  {"instruction", "input", "output"}          (SFT style: TinyEval's custom_zh / GAOKAO_math)
Its template is `prompts/NAME.txt` (str.format placeholders naming record fields). A dataset with no row in
Eval/tasks.py still works: `resolve_task` picks a metric and generation length from the data's form and
language, a missing template falls back to a default for the form, and both choices are reported.

Usage:
    from Eval.datasets import load_dataset
    ds = load_dataset("demo_qa_en", Path("dataset"), Path("prompts"))
    ds.task, ds.template, ds.examples[0].fields, ds.notes
"""
from __future__ import annotations

import dataclasses
import difflib
import hashlib
import string
from pathlib import Path

from Eval.records import RecordError, iter_json_objects
from Eval.tasks import TASKS, Task

DEFAULT_TEMPLATES = {
    ("longbench", "en"): "Read the text below and answer the question.\n\n{context}\n\nQuestion: {input}\nAnswer:",
    ("longbench", "zh"): "阅读下面的材料并回答问题。\n\n{context}\n\n问题：{input}\n回答：",
    ("instruction", "en"): "{instruction}\n{input}",
    ("instruction", "zh"): "{instruction}\n{input}",
}
# Metric and generation length for a dataset that has no row in TASKS, by (form, language).
DEFAULT_METRICS = {("longbench", "en"): ("qa_f1",), ("longbench", "zh"): ("qa_f1_zh",),
                   ("instruction", "en"): ("rouge", "bleu"), ("instruction", "zh"): ("rouge_zh", "bleu_zh")}
DEFAULT_MAX_NEW_TOKENS = {"longbench": 128, "instruction": 512}


@dataclasses.dataclass
class Example:
    id: str
    fields: dict  # the record as read; the template is filled from it
    answers: list[str]
    all_classes: list[str] | None
    length: int | None


@dataclasses.dataclass
class Dataset:
    name: str
    path: Path
    form: str  # "longbench" or "instruction"
    task: Task
    template: str
    template_source: str  # the template file, or "default (...)"
    examples: list[Example]
    notes: list[str]  # choices made for the user (default template / metric), printed before the run

    @property
    def template_hash(self) -> str:
        return hashlib.sha256(self.template.encode("utf-8")).hexdigest()[:16]


def _is_cjk(ch: str) -> bool:
    return "\u4e00" <= ch <= "\u9fff"


def detect_language(records: list[dict]) -> str:
    """The records' `language` field when present, else "zh" when over 20% of letters are CJK."""
    declared = {r.get("language") for r in records} - {None}
    if len(declared) == 1:
        return "zh" if declared.pop() == "zh" else "en"
    text = "".join(str(r.get(k, "")) for r in records[:50] for k in ("instruction", "input", "context", "output"))
    letters = [c for c in text if c.isalpha()]
    return "zh" if letters and sum(map(_is_cjk, letters)) / len(letters) > 0.2 else "en"


def _form(record: dict, path: Path, line: int) -> str:
    if "answers" in record:
        return "longbench"
    if "output" in record:
        return "instruction"
    raise RecordError(path, line, "a dataset record needs 'answers' (LongBench form) or 'output' "
                                  "(instruction / input / output form)")


def _length(fields: dict, answers: list[str], language: str) -> int:
    # LongBench's `length`: characters (zh) or words (en) of the input, context and answers.
    text = [str(fields.get(k) or "") for k in ("instruction", "input", "context")] + answers
    return sum(len(t) for t in text) if language == "zh" else sum(len(t.split()) for t in text)


def _example(record: dict, form: str, index: int, name: str, language: str, path: Path, line: int) -> Example:
    answers = record["answers"] if form == "longbench" else record["output"]
    answers = [answers] if isinstance(answers, str) else answers
    if not isinstance(answers, list) or not all(isinstance(a, str) for a in answers):
        raise RecordError(path, line, "answers / output must be a string or a list of strings")
    rid = record.get("_id", record.get("id"))
    length = record.get("length")
    return Example(id=str(rid) if rid is not None else f"{name}-{index}", fields=record, answers=answers,
                   all_classes=record.get("all_classes"),
                   length=length if isinstance(length, int) else _length(record, answers, language))


def template_fields(template: str) -> set[str]:
    """The field names a str.format template uses (`{context}` -> "context"; `{{` is a literal brace)."""
    return {f.split(".")[0].split("[")[0] for _, f, _, _ in string.Formatter().parse(template) if f}


def resolve_task(name: str, form: str, language: str) -> tuple[Task, str | None]:
    """The task row for `name`, or a default one for an unlisted dataset plus a note saying what was chosen."""
    if name in TASKS:
        return TASKS[name], None
    metrics = DEFAULT_METRICS[(form, language)]
    task = Task(name, metrics, DEFAULT_MAX_NEW_TOKENS[form], language=language,
                description=f"user dataset ({form} form, {language})")
    return task, (f"{name}: not in Eval/tasks.py; scoring with {', '.join(metrics)} "
                  f"(default for {form}-form {language} data), max_new_tokens {task.max_new_tokens}")


def load_template(name: str, prompt_dir: Path, form: str, language: str) -> tuple[str, str, str | None]:
    path = prompt_dir / f"{name}.txt"
    if path.is_file():
        return path.read_text(encoding="utf-8"), str(path), None
    return (DEFAULT_TEMPLATES[(form, language)], f"default ({form}, {language})",
            f"{name}: no {path}; using the default {form}-form template")


def load_dataset(name: str, dataset_dir: Path, prompt_dir: Path) -> Dataset:
    """Read, validate and template-check one dataset; RecordError / FileNotFoundError name what and where."""
    path = dataset_dir / f"{name}.jsonl"
    if not path.is_file():
        known = sorted(p.stem for p in dataset_dir.glob("*.jsonl"))
        close = difflib.get_close_matches(name, known, n=3, cutoff=0.6)
        hint = f" Did you mean: {', '.join(close)}?" if close else ""
        raise FileNotFoundError(f"unknown dataset {name!r}: no file {path}.{hint} "
                                f"Available: {', '.join(known) or 'none'}")
    items = list(iter_json_objects(path))
    if not items:
        raise RecordError(path, None, "file is empty: no examples")
    for line, record in items:
        if not isinstance(record, dict):
            raise RecordError(path, line, f"expected a JSON object, found {type(record).__name__}")
    form = _form(items[0][1], path, items[0][0])
    language = detect_language([r for _, r in items])
    task, task_note = resolve_task(name, form, language)
    template, source, template_note = load_template(name, prompt_dir, form, language)
    needed = template_fields(template)
    examples = []
    for index, (line, record) in enumerate(items):
        if _form(record, path, line) != form:
            raise RecordError(path, line, f"record is not in the {form} form of the file's first record")
        missing = sorted(f for f in needed if f not in record)
        if missing:
            raise RecordError(path, line, f"template {source} needs field(s) {', '.join(missing)}, "
                                          "which this record lacks")
        examples.append(_example(record, form, index, name, task.language, path, line))
    ids = [e.id for e in examples]
    if len(set(ids)) != len(ids):
        dup = next(i for i in ids if ids.count(i) > 1)
        raise RecordError(path, None, f"example id {dup!r} occurs more than once; ids must be unique")
    notes = [n for n in (task_note, template_note) if n]
    return Dataset(name, path, form, task, template, source, examples, notes)


def fill_template(template: str, fields: dict) -> str:
    return template.format(**fields)
