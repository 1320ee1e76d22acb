"""Loading a dataset and its prompt template for inference, and checking them before any model loads.

A dataset is `dataset/NAME.jsonl` (or NAME.json: a JSON array, or a nested choice-question source such as
TinyEval's GAOKAO-new1-math.json) in one of the record forms of Eval/inference/dataset_forms.py: LongBench,
instruction / input / output, LongBench v2, choice. Its template comes from prompts/NAME.txt, a benchmark's
--prompt-config or the form's default (Eval/inference/templates.py); its generation length from --maxlen-config
(a benchmark's dataset2maxlen.json) or the task row. A dataset with no row in Eval/tasks.py still works:
`resolve_task` picks a metric and generation length from the data's form and language, and every choice made for
the user is reported.

Each example has an id (`_id` / `id`, else `NAME-<position>`) and a content hash over all its fields: resume
redoes an example whose content changed, and eval.py tells when predictions no longer match their data. A line
that repeats an earlier one exactly is run once (and said so); an id repeated with different content is an
error naming both lines.

Usage:
    from Eval.inference.datasets import load_dataset
    ds = load_dataset("demo_qa_en", Path("dataset"), Path("prompts"))
    ds.task, ds.template, ds.examples[0].fields, ds.notes, ds.fill(ds.examples[0])
    ds = load_dataset("multi_news", Path("dataset"), Path("prompts"), Sources(prompt_config, maxlen_config))
"""
from __future__ import annotations

import dataclasses
import difflib
import hashlib
import math
import re
from pathlib import Path

from Eval.names import check_name
from Eval.records import RecordError, content_hash, examples_digest, iter_json_objects
from Eval.storage import regular_file_problem
from Eval.tasks import TASKS, Task
from Eval.inference.dataset_forms import answers_of, expand_nested_choices, prompt_fields, record_form
from Eval.inference.templates import (KINDS, ChosenTemplate, PromptConfig, fill_template, resolve_template,
                                      template_fields)

# The task of a dataset that has no row in TASKS, by (form, language): metrics, extraction, generation length.
_CHOICE_TASK = {"metrics": ("gaokao_choice",), "extract": ("strip_think", "choice_letters"), "max_new_tokens": 512}
_V2_TASK = {"metrics": ("choice_match",), "extract": ("strip_think", "longbench_v2_answer"), "max_new_tokens": 128,
            "group_by": ("difficulty", "length", "domain", "sub_domain"), "breakdown": "longbench_v2",
            "cot_max_new_tokens": 1024}
DEFAULT_TASKS = {("longbench", "en"): {"metrics": ("qa_f1",), "max_new_tokens": 128},
                 ("longbench", "zh"): {"metrics": ("qa_f1_zh",), "max_new_tokens": 128},
                 ("instruction", "en"): {"metrics": ("rouge", "bleu"), "max_new_tokens": 512},
                 ("instruction", "zh"): {"metrics": ("rouge_zh", "bleu_zh"), "max_new_tokens": 512},
                 ("choice", "en"): _CHOICE_TASK, ("choice", "zh"): _CHOICE_TASK,
                 ("longbench_v2", "en"): _V2_TASK, ("longbench_v2", "zh"): {**_V2_TASK, "language": "zh"}}


@dataclasses.dataclass(frozen=True)
class Sources:
    """Where templates and generation lengths come from besides prompts/ and the task table: a benchmark's
    published config files, as read by Eval/inference/templates.py load_prompt_config and load_maxlen_config."""
    prompt_config: PromptConfig | None = None
    maxlen: dict | None = None  # dataset name -> max new tokens (dataset2maxlen.json)
    maxlen_path: Path | None = None


@dataclasses.dataclass
class Example:
    id: str
    fields: dict  # the record as read; the template is filled from it
    answers: list[str]
    all_classes: list[str] | None
    length: int | float | None
    sha256: str = ""  # content_hash(fields): resume redoes the example when it changes
    line: int = 0  # where the example starts in the dataset file
    perturbation: str | None = None  # --perturb: the label of the perturbation that made this copy (None: original)
    original_id: str | None = None  # --perturb: the id of the example this copy was made from


@dataclasses.dataclass
class Dataset:
    name: str
    path: Path
    form: str  # "longbench" or "instruction"
    task: Task
    templates: dict  # template kind ("answer"; "cot", "cot_answer" for --cot) -> ChosenTemplate
    examples: list[Example]
    notes: list[str]  # choices made for the user (default template / metric), printed before the run
    file_sha256: str = ""  # of the dataset file's bytes: eval.py tells whether the data changed since the run
    copies: int = 0  # --perturb: perturbed copies after each original example (records say which is which)
    cot: bool = False  # --cot: two passes (reasoning, then the answer quoting it); records go to NAME_cot.jsonl

    @property
    def perturbed(self) -> bool:
        return self.copies > 0

    @property
    def template(self) -> str:
        return self.templates["answer"].template

    @property
    def template_source(self) -> str:
        return self.templates["answer"].source

    @property
    def template_hash(self) -> str:
        return self.templates["answer"].sha256

    def as_cot(self) -> "Dataset":
        """This dataset in --cot mode, named NAME_cot; ValueError when its task has no chain-of-thought mode."""
        if not self.task.cot_max_new_tokens:
            raise ValueError(f"--cot: {self.name} has no chain-of-thought mode (its task sets no "
                             "cot_max_new_tokens in Eval/tasks.py)")
        name = f"{self.name}_cot"
        return dataclasses.replace(self, name=name, task=dataclasses.replace(self.task, name=name), cot=True)

    def fill(self, example: Example, kind: str = "answer", **extra: str) -> str:
        """The prompt text of `example` before truncation and chat wrapping: its template filled with its
        fields (and `extra`, e.g. cot=...); a default template asks no question of a record with no input."""
        chosen: ChosenTemplate = self.templates[kind]
        fields = {**prompt_fields(example.fields, self.form), **extra}
        no_input = chosen.no_input is not None and not str(fields.get("input") or "").strip()
        return fill_template(chosen.no_input if no_input else chosen.template, fields)

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
    keys = ("instruction", "input", "context", "output", "question")
    text = "".join(str(r.get(k, "")) for r in records[:50] for k in keys)
    letters = [c for c in text if c.isalpha()]
    return "zh" if letters and sum(map(_is_cjk, letters)) / len(letters) > 0.2 else "en"


def _length(fields: dict, answers: list[str], language: str) -> int:
    # LongBench's `length`: characters (zh) or words (en) of the input, context and answers.
    text = [str(fields.get(k) or "") for k in ("instruction", "input", "context")] + answers
    return sum(len(t) for t in text) if language == "zh" else sum(len(t.split()) for t in text)


def _example(record: dict, form: str, index: int, name: str, language: str, path: Path, line: int) -> Example:
    answers = answers_of(record, form)
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
    length = record.get("length") if form != "longbench_v2" else None  # v2's length is a class: a group
    if length is not None and (isinstance(length, bool) or not isinstance(length, (int, float))
                               or not math.isfinite(length) or length < 0):
        raise RecordError(path, line, f"length must be a finite number >= 0 (LongBench's word or character "
                                      f"count), found {length!r}")
    return Example(id=str(rid) if rid is not None else f"{name}-{index}", fields=record, answers=answers,
                   all_classes=classes,
                   length=length if length is not None or form == "longbench_v2" else _length(record, answers,
                                                                                               language),
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
    fields = {"language": language, **DEFAULT_TASKS[(form, language)]}
    task = Task(name, description=f"user dataset ({form} form, {language})", **fields)
    return task, (f"{name}: not in Eval/tasks.py; scoring with {', '.join(task.metrics)} "
                  f"(default for {form}-form {language} data), max_new_tokens {task.max_new_tokens}")


def _dataset_path(name: str, dataset_dir: Path) -> Path:
    stem = dataset_dir / check_name(name, "dataset name")
    found = [p for p in (stem.with_name(f"{stem.name}.jsonl"), stem.with_name(f"{stem.name}.json"))
             if p.exists() or p.is_symlink()]
    if len(found) == 2:
        raise RecordError(found[1], None, f"both {found[0].name} and {found[1].name} exist; keep one, so that "
                                          f"{name!r} names one dataset")
    if not found:
        known = dataset_names(dataset_dir)
        close = difflib.get_close_matches(name, known, n=3, cutoff=0.6)
        hint = f" Did you mean: {', '.join(close)}?" if close else ""
        raise FileNotFoundError(f"unknown dataset {name!r}: no file {stem}.jsonl or {stem}.json.{hint} "
                                f"Available: {', '.join(known) or 'none'}")
    problem = regular_file_problem(found[0])
    if problem:
        raise RecordError(found[0], None, problem)
    return found[0]


def dataset_names(dataset_dir: Path) -> list[str]:
    """Every dataset in a folder: NAME.jsonl and NAME.json files, sorted."""
    return sorted({p.stem for pattern in ("*.jsonl", "*.json") for p in dataset_dir.glob(pattern)})


def _read_items(path: Path) -> list[tuple[int, dict]]:
    items = list(iter_json_objects(path))
    if not items:
        raise RecordError(path, None, "file is empty: no examples")
    if len(items) == 1:  # a nested source file (TinyEval's GAOKAO-new1-math.json) is one object of question lists
        text = path.read_text(encoding="utf-8")
        lines = [text.count("\n", 0, m.start()) + 1 for m in re.finditer(r'"question"\s*:', text)]
        nested = expand_nested_choices(items[0][1], path, lines)
        items = nested if nested is not None else items
    for line, record in items:
        if not isinstance(record, dict):
            raise RecordError(path, line, f"expected a JSON object, found {type(record).__name__}")
    return items


def _templates(name: str, prompt_dir: Path, form: str, task: Task, sources: Sources) -> dict[str, ChosenTemplate]:
    kinds = ("answer", "cot", "cot_answer") if task.cot_max_new_tokens else ("answer",)
    chosen = {kind: resolve_template(name, kind, prompt_dir, form, task.language, task.published_prompt,
                                     sources.prompt_config) for kind in kinds}
    missing = [f"{prompt_dir / name}{KINDS[kind]}" for kind, template in chosen.items() if template is None]
    if missing:  # a task with a chain-of-thought mode needs both of its templates
        raise ValueError(f"{name}: its task has a chain-of-thought mode, and there is no template for it: write "
                         f"{' and '.join(missing)}")
    return chosen


def _check_fields(ds_templates: dict[str, ChosenTemplate], record: dict, path: Path, line: int) -> None:
    for kind, chosen in ds_templates.items():
        missing = sorted(f for f in template_fields(chosen.template) if f not in record and f != "cot")
        if missing:
            raise RecordError(path, line, f"template {chosen.source} needs field(s) {', '.join(missing)}, "
                                          "which this record lacks")


def load_dataset(name: str, dataset_dir: Path, prompt_dir: Path, sources: Sources = Sources()) -> Dataset:
    """Read, validate and template-check one dataset; RecordError / FileNotFoundError / ValueError (a name that
    is a path, a benchmark dataset with no prompt) say what and where."""
    path = _dataset_path(name, dataset_dir)
    items = _read_items(path)
    form = record_form(items[0][1], path, items[0][0])
    language = detect_language([r for _, r in items])
    task, task_note = resolve_task(name, form, language)
    notes = [task_note] if task_note else []
    if sources.maxlen and name in sources.maxlen and task.max_new_tokens != sources.maxlen[name]:
        notes.append(f"{name}: max_new_tokens {sources.maxlen[name]} from {sources.maxlen_path} "
                     f"(the task table says {task.max_new_tokens})")
    if sources.maxlen and name in sources.maxlen:
        task = dataclasses.replace(task, max_new_tokens=sources.maxlen[name])
    templates = _templates(name, prompt_dir, form, task, sources)
    notes += [t.note for t in templates.values() if t.note]
    examples = []
    for index, (line, record) in enumerate(items):
        if record_form(record, path, line) != form:
            raise RecordError(path, line, f"record is not in the {form} form of the file's first record")
        _check_fields(templates, record, path, line)
        examples.append(_example(record, form, index, name, task.language, path, line))
    examples, repeated = _unique(examples, path)
    if repeated:
        notes.append(f"{name}: {repeated} line(s) repeat an earlier example exactly (same id and content); "
                     "each example is run once")
    unanswerable = sum(1 for e in examples if not e.answers)
    if unanswerable:
        notes.append(f"{name}: {unanswerable} example(s) have no reference answer; they will score 0")
    file_sha = hashlib.sha256(path.read_bytes()).hexdigest()[:16]
    return Dataset(name, path, form, task, templates, examples, notes, file_sha)
