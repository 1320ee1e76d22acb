"""Loading a dataset and its prompt templates, checked before any model loads. The record forms
(longbench, instruction, longbench_v2, choice: record_form) and ids: docs/inference.md.

Usage:
    ds = load_dataset("demo_qa_en", Path("dataset"), Path("prompts"))
"""

import dataclasses
import math
from pathlib import Path

from Eval.inference.benchmark_configs import fill_dollar_markers, with_maxlen_config
from Eval.inference.defaults import default_task, default_template
from Eval.inference.nested_choices import nested_choice_records
from Eval.inference.templates import (KINDS, ChosenTemplate, PromptConfig, check_template,
                                      fill_template, resolve_template, value_problem)
from Eval.names import check_name
from Eval.registry import did_you_mean
from Eval.records import (RecordError, content_hash, examples_digest, file_sha256,
                          iter_json_objects)
from Eval.storage import regular_file_problem
from Eval.tasks import TASKS, Task, row_name

V2_CHOICES = ("choice_A", "choice_B", "choice_C", "choice_D")
V2_FIELDS = ("question", *V2_CHOICES, "answer", "context")
_ANSWER_FIELD = {"longbench": "answers", "instruction": "output", "longbench_v2": "answer",
                 "choice": "answer"}


@dataclasses.dataclass(frozen=True)
class Sources:
    """A benchmark's published config files."""
    prompt_config: PromptConfig | None = None
    maxlen: dict | None = None  # dataset name -> max new tokens (dataset2maxlen.json), or model
    maxlen_path: Path | None = None  # name -> prompt tokens (LongBench v2's model2maxlen.json)
    model_name: str | None = None  # the run's output folder name: its model2maxlen entry
    cot: bool = False  # --cot: the task's chain-of-thought templates are read too


@dataclasses.dataclass
class Example:
    id: str
    fields: dict  # the record as read; the template is filled from it
    answers: list[str]
    all_classes: list[str] | None
    length: int | float | None
    sha256: str = ""  # content_hash(fields): resume redoes the example when it changes
    line: int = 0  # where the example starts in the dataset file
    perturbation: str | None = None  # --perturb: the copy's perturbation label (None: original)
    original_id: str | None = None  # --perturb: the id of the example this copy was made from


@dataclasses.dataclass
class Dataset:
    name: str
    path: Path
    form: str  # one of the record forms above
    task: Task
    templates: dict  # template kind ("answer"; "cot", "cot_answer" for --cot) -> ChosenTemplate
    examples: list[Example]
    notes: list[str]  # choices made for the user (default template / metric), printed first
    file_sha256: str = ""  # of the file's bytes: eval.py tells whether the data changed since
    copies: int = 0  # --perturb: perturbed copies after each original example
    cot: bool = False  # --cot: reasoning, then the answer quoting it; records go to NAME_cot.jsonl
    prompt_limit: int | None = None  # model2maxlen: the filled prompt's tokens, cut as pred.py cuts

    @property
    def template(self) -> str:
        return self.templates["answer"].template

    @property
    def template_source(self) -> str:
        return self.templates["answer"].source

    @property
    def template_hash(self) -> str:
        return self.templates["answer"].sha256

    def fill(self, example: Example, kind: str = "answer", **extra: str) -> str:
        """The prompt text before truncation and chat wrapping."""
        chosen: ChosenTemplate = self.templates[kind]
        fields = template_fields(example.fields, self.form)
        if self.form == "longbench_v2":  # pred.py strips the fields before filling
            fields = {k: v.strip() if isinstance(v, str) else v for k, v in fields.items()}
        fields = {**fields, **extra}
        if chosen.dollar_text is not None:
            return fill_dollar_markers(chosen.dollar_text, fields, kind)
        return fill_template(chosen.text_for(fields), fields)

    def expected(self) -> dict[str, str]:
        """id -> content hash of every example, in order: what the run loop resumes against."""
        return {e.id: e.sha256 for e in self.examples}

    def digest(self) -> str:
        return examples_digest(self.expected().items())


def record_form(record: dict, path: Path, line: int) -> str:
    """Which form `record` has: longbench (answers), instruction (output), longbench_v2 (choice_A..
    choice_D, read as published), choice (options: a nested file's questions, nested_choices.py)."""
    if "answers" in record:
        return "longbench"
    if "output" in record:
        return "instruction"
    if "choice_A" in record:
        missing = [f for f in V2_FIELDS if not isinstance(record.get(f), str)]
        if missing:
            raise RecordError(path, line, f"a LongBench v2 record needs the text fields "
                                          f"{', '.join(V2_FIELDS)}; missing or not a string: "
                                          f"{', '.join(missing)}")
        return "longbench_v2"
    if "options" in record and "answer" in record:
        return "choice"
    raise RecordError(path, line, "a dataset record needs 'answers' (LongBench form), 'output' "
                                  "(instruction / input / output form), or 'question', "
                                  "'choice_A'..'choice_D', 'answer' (LongBench v2 form)")


def template_fields(record: dict, form: str) -> dict:
    """The record, and for the instruction form an empty `input` where it has none (Alpaca)."""
    return {"input": "", **record} if form == "instruction" else record


def question_text(record: dict, form: str, template: str = "") -> str:
    """What a judge sees of the question: its usual fields, else those `template` fills."""
    if form == "longbench_v2":
        return "\n".join([record["question"], *(f"{c[-1]}) {record[c]}" for c in V2_CHOICES)])
    parts = [record.get(k) for k in ("instruction", "input", "question", "options")]
    parts = parts if any(parts) else \
        [record.get(k) for k in sorted(check_template(template) - {"context"})]  # parsed only here
    return "\n".join(str(p) for p in parts if p)


def detect_language(records: list[dict]) -> str:
    """Their `language` field, else "zh" when over 20% of the letters in their values are CJK."""
    declared = {r.get("language") for r in records} - {None}
    if len(declared) == 1:
        return "zh" if declared.pop() == "zh" else "en"
    values = [v for r in records[:50] for k, v in r.items() if k not in ("_id", "id")]
    letters = [c for c in str(values) if c.isalpha()]  # in fields of any name
    cjk = sum(1 for c in letters if "\u4e00" <= c <= "\u9fff")
    return "zh" if letters and cjk / len(letters) > 0.2 else "en"


def _describe(value: object) -> str:
    if isinstance(value, list):
        kinds = sorted({type(v).__name__ for v in value if not isinstance(v, str)})
        return f"a list holding {', '.join(kinds)}"
    return f"{type(value).__name__} {str(value)[:40]!r}"


def _strings(value: object) -> bool:
    return isinstance(value, list) and all(isinstance(v, str) for v in value)


def _example(record: dict, form: str, index: int, name: str, language: str, path: Path,
             line: int) -> Example:
    answers = record[_ANSWER_FIELD[form]]
    answers = [answers] if isinstance(answers, str) else answers
    if not _strings(answers):
        raise RecordError(path, line, "answers / output must be a string or a list of strings")
    classes = record.get("all_classes")
    if classes is not None and not _strings(classes):
        raise RecordError(path, line, "all_classes must be a list of strings (the label set), "
                                      f"found {_describe(classes)}")
    rid = record.get("_id", record.get("id"))
    if rid is not None and (isinstance(rid, bool) or not isinstance(rid, (str, int))):
        raise RecordError(path, line, "the example id (_id / id) must be a string or an integer, "
                                      f"found {_describe(rid)}")
    length = record.get("length") if form != "longbench_v2" else None  # v2's length is a group
    if length is not None and (isinstance(length, bool) or not isinstance(length, (int, float))
                               or not math.isfinite(length) or length < 0):
        raise RecordError(path, line, f"length must be a finite number >= 0 (LongBench's word or "
                                      f"character count), found {length!r}")
    if length is None and form != "longbench_v2":  # LongBench's: characters (zh) or words (en)
        text = [str(record.get(k) or "") for k in ("instruction", "input", "context")] + answers
        length = sum(len(t) if language == "zh" else len(t.split()) for t in text)
    return Example(id=str(rid) if rid is not None else f"{name}-{index}", fields=record,
                   answers=answers, all_classes=classes, length=length,
                   sha256=content_hash(record), line=line)


def dataset_names(dataset_dir: Path) -> list[str]:
    return sorted({p.stem for pattern in ("*.jsonl", "*.json") for p in dataset_dir.glob(pattern)})


def _dataset_path(name: str, dataset_dir: Path) -> Path:
    stem = dataset_dir / check_name(name, "dataset name")
    found = [p for p in (stem.with_name(f"{stem.name}.jsonl"), stem.with_name(f"{stem.name}.json"))
             if p.exists() or p.is_symlink()]
    if len(found) == 2:
        raise RecordError(found[1], None, f"both {found[0].name} and {found[1].name} exist; keep "
                                          f"one, so that {name!r} names one dataset")
    if not found:
        known = dataset_names(dataset_dir)
        raise FileNotFoundError(f"unknown dataset {name!r}: no file {stem}.jsonl or {stem}.json."
                                f"{did_you_mean(name, known, 0.6)} Available: "
                                f"{', '.join(known) or 'none'}")
    problem = regular_file_problem(found[0])
    if problem:
        raise RecordError(found[0], None, problem)
    return found[0]


def _check_template_fields(fields: dict, templates: dict, path: Path, line: int) -> None:
    for kind, chosen in templates.items():  # its fields in the record, those filled in showable
        cot = {"cot"} if kind == "cot_answer" else set()  # the reasoning pass's output, quoted
        needed = check_template(chosen.text_for(fields)) - cot  # an absent input: the no-input one
        if needed - set(fields):
            raise RecordError(path, line, f"template {chosen.source} needs field(s) "
                                          f"{', '.join(sorted(needed - set(fields)))}, which this "
                                          "record lacks")
        for key in sorted(needed):
            problem = value_problem(fields[key])
            if problem:
                raise RecordError(path, line, f"field {key!r} of template {chosen.source} "
                                              f"{problem}; make it a string")


def load_dataset(name: str, dataset_dir: Path, prompt_dir: Path,
                 sources: Sources = Sources()) -> Dataset:
    """Read, validate and template-check one dataset."""
    path = _dataset_path(name, dataset_dir)
    items = list(iter_json_objects(path))
    if not items:
        raise RecordError(path, None, "file is empty: no examples")
    if len(items) == 1:  # a nested source file is one object of question lists
        nested = nested_choice_records(items[0][1], path)
        items = items if nested is None else nested
    for line, record in items:
        if not isinstance(record, dict):
            raise RecordError(path, line, f"expected a JSON object, found {type(record).__name__}")
    form = record_form(items[0][1], path, items[0][0])
    language = detect_language([r for _, r in items])
    base = row_name(name)  # LongBench-E's NAME_e too
    task, task_note = (dataclasses.replace(TASKS[base], name=name), None) if base in TASKS else \
        default_task(name, form, language)
    notes = [task_note] if task_note else []
    task, limit = with_maxlen_config(task, base, form, sources, notes)
    kinds = ("answer", "cot", "cot_answer")[:3 if task.cot_max_new_tokens and sources.cot else 1]
    templates = {kind: resolve_template(base, kind, prompt_dir, form, task.published_prompt,
                                        sources.prompt_config)
                 or default_template(name, kind, prompt_dir, form, task.language) for kind in kinds}
    missing = [f"{prompt_dir / name}{KINDS[kind]}" for kind, t in templates.items() if t is None]
    if missing:  # a task with a chain-of-thought mode needs both of its templates
        raise ValueError(f"{name}: its task has a chain-of-thought mode, and there is no template "
                         f"for it: write {' and '.join(missing)}")
    notes += [t.note for t in templates.values() if t.note]
    examples = []
    for index, (line, record) in enumerate(items):
        if record_form(record, path, line) != form:
            raise RecordError(path, line, f"record is not in the {form} form of the file's first "
                                          "record")
        _check_template_fields(template_fields(record, form), templates, path, line)
        examples.append(_example(record, form, index, name, task.language, path, line))
    first: dict[str, Example] = {}  # exact repeats dropped; an id reused for other content: error
    for e in examples:
        seen = first.setdefault(e.id, e)
        if seen.sha256 != e.sha256:
            raise RecordError(path, e.line, f"example id {e.id!r} was already used by line "
                                            f"{seen.line} with different content; ids must name "
                                            "one example")
    repeated = len(examples) - len(first)
    examples = list(first.values())
    if repeated:
        notes.append(f"{name}: {repeated} line(s) repeat an earlier example exactly (same id and "
                     "content); each example is run once")
    unanswerable = sum(1 for e in examples if not e.answers)
    if unanswerable:
        notes.append(f"{name}: {unanswerable} example(s) have no reference answer: each scores 0")
    return Dataset(name, path, form, task, templates, examples, notes, prompt_limit=limit,
                   file_sha256=file_sha256(path))
