"""Loading a dataset and its prompt template for inference, and checking them before any model loads.

A dataset is `dataset/NAME.jsonl` in one of two forms:
    LongBench:    {"input", "context", "answers": [..], "length", "all_classes", "_id", ...}
    instruction:  {"instruction", "input", "output"}          (SFT style: TinyEval's custom_zh / GAOKAO_math)
Its template is `prompts/NAME.txt` ({field} placeholders, see Eval/inference/templates.py). A dataset with no row in
Eval/tasks.py still works: `resolve_task` picks a metric and generation length from the data's form and
language, a missing template falls back to a default for the form, and both choices are reported.

Each example has an id (`_id` / `id`, else `NAME-<position>`) and a content hash over all its fields: resume
redoes an example whose content changed, and eval.py tells when predictions no longer match their data. A line
that repeats an earlier one exactly is run once (and said so); an id repeated with different content is an
error naming both lines.

Usage:
    from Eval.inference.datasets import load_dataset
    ds = load_dataset("demo_qa_en", Path("dataset"), Path("prompts"))
    ds.task, ds.template, ds.examples[0].fields, ds.notes
"""
from __future__ import annotations

import dataclasses
import difflib
import hashlib
import math
from pathlib import Path

from Eval.names import check_name
from Eval.records import RecordError, content_hash, examples_digest, iter_json_objects
from Eval.storage import regular_file_problem
from Eval.tasks import TASKS, Task
from Eval.inference.templates import fill_template, load_template, template_fields  # noqa: F401  (fill_template: API)

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
    length: int | float | None
    sha256: str = ""  # content_hash(fields): resume redoes the example when it changes
    line: int = 0  # where the example starts in the dataset file


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
    file_sha256: str = ""  # of the dataset file's bytes: eval.py tells whether the data changed since the run

    @property
    def template_hash(self) -> str:
        return hashlib.sha256(self.template.encode("utf-8")).hexdigest()[:16]

    def digest(self, limit: int | None = None) -> str:
        """examples_digest over the first `limit` examples (all when None)."""
        return examples_digest((e.id, e.sha256) for e in self.examples[:limit])


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
    classes = record.get("all_classes")
    if classes is not None and (not isinstance(classes, list) or not all(isinstance(c, str) for c in classes)):
        raise RecordError(path, line, f"all_classes must be a list of strings (the label set), found "
                                      f"{_describe(classes)}")
    rid = record.get("_id", record.get("id"))
    if rid is not None and (isinstance(rid, bool) or not isinstance(rid, (str, int))):
        raise RecordError(path, line, f"the example id (_id / id) must be a string or an integer, found "
                                      f"{_describe(rid)}")
    length = record.get("length")
    if length is not None and (isinstance(length, bool) or not isinstance(length, (int, float))
                               or not math.isfinite(length) or length < 0):
        raise RecordError(path, line, f"length must be a finite number >= 0 (LongBench's word or character "
                                      f"count), found {length!r}")
    return Example(id=str(rid) if rid is not None else f"{name}-{index}", fields=record, answers=answers,
                   all_classes=classes,
                   length=length if length is not None else _length(record, answers, language),
                   sha256=content_hash(record), line=line)


def _describe(value: object) -> str:
    if isinstance(value, list):
        kinds = sorted({type(v).__name__ for v in value if not isinstance(v, str)})
        return f"a list holding {', '.join(kinds)}"
    return f"{type(value).__name__} {str(value)[:40]!r}"


def _unique(examples: list[Example], path: Path) -> tuple[list[Example], int]:
    """Examples with repeated lines dropped (same id, same content) and the number dropped; an id repeated
    with different content is an error naming both lines."""
    first: dict[str, Example] = {}
    kept = []
    for e in examples:
        seen = first.get(e.id)
        if seen is None:
            first[e.id] = e
            kept.append(e)
        elif seen.sha256 != e.sha256:
            raise RecordError(path, e.line, f"example id {e.id!r} was already used by line {seen.line} with "
                                            "different content; ids must name one example")
    return kept, len(examples) - len(kept)


def resolve_task(name: str, form: str, language: str) -> tuple[Task, str | None]:
    """The task row for `name`, or a default one for an unlisted dataset plus a note saying what was chosen."""
    if name in TASKS:
        return TASKS[name], None
    metrics = DEFAULT_METRICS[(form, language)]
    task = Task(name, metrics, DEFAULT_MAX_NEW_TOKENS[form], language=language,
                description=f"user dataset ({form} form, {language})")
    return task, (f"{name}: not in Eval/tasks.py; scoring with {', '.join(metrics)} "
                  f"(default for {form}-form {language} data), max_new_tokens {task.max_new_tokens}")


def _dataset_path(name: str, dataset_dir: Path) -> Path:
    path = dataset_dir / f"{check_name(name, 'dataset name')}.jsonl"
    if not (path.exists() or path.is_symlink()):
        known = sorted(p.stem for p in dataset_dir.glob("*.jsonl"))
        close = difflib.get_close_matches(name, known, n=3, cutoff=0.6)
        hint = f" Did you mean: {', '.join(close)}?" if close else ""
        raise FileNotFoundError(f"unknown dataset {name!r}: no file {path}.{hint} "
                                f"Available: {', '.join(known) or 'none'}")
    problem = regular_file_problem(path)
    if problem:
        raise RecordError(path, None, problem)
    return path


def load_dataset(name: str, dataset_dir: Path, prompt_dir: Path) -> Dataset:
    """Read, validate and template-check one dataset; RecordError / FileNotFoundError / ValueError (a name that
    is a path) say what and where."""
    path = _dataset_path(name, dataset_dir)
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
    examples, repeated = _unique(examples, path)
    notes = [n for n in (task_note, template_note) if n]
    if repeated:
        notes.append(f"{name}: {repeated} line(s) repeat an earlier example exactly (same id and content); "
                     "each example is run once")
    unanswerable = sum(1 for e in examples if not e.answers)
    if unanswerable:
        notes.append(f"{name}: {unanswerable} example(s) have no reference answer; they will score 0")
    file_sha = hashlib.sha256(path.read_bytes()).hexdigest()[:16]
    return Dataset(name, path, form, task, template, source, examples, notes, file_sha)
