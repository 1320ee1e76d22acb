"""The record shapes a dataset file may hold, and what each gives an example: answers, prompt fields, groups.

    longbench     {"input", "context", "answers": [..], "length", "all_classes", "_id"}   LongBench v1, TinyEval
    instruction   {"instruction", "input", "output"}                                       SFT style (custom_zh)
    longbench_v2  {"_id", "domain", "sub_domain", "difficulty", "length": "short" | "medium" | "long",
                   "question", "choice_A" .. "choice_D", "answer": "B", "context"}          LongBench v2, as published
    choice        {"question", "options", "answer", "question_type"}: the records of a nested source file such as
                  TinyEval's GAOKAO-new1-math.json, {"one-choice-question": [{"question", "options": [{"option": "A",
                  "value": ...}, ...], "answer": "A"}, ...], "multiple-choice-question": [...]}, read as it is

Usage:
    from Eval.inference.dataset_forms import record_form, expand_nested_choices, prompt_fields
    items = expand_nested_choices(value, path) or items        # [(line, record), ...]
    form = record_form(record, path, line)                     # "longbench" | "instruction" | ...
"""
from __future__ import annotations

from pathlib import Path

from Eval.records import RecordError

V2_CHOICES = ("choice_A", "choice_B", "choice_C", "choice_D")
V2_FIELDS = ("question", *V2_CHOICES, "answer", "context")


def record_form(record: dict, path: Path, line: int) -> str:
    """Which of the shapes above `record` has; RecordError naming the fields each shape needs."""
    if "answers" in record:
        return "longbench"
    if "output" in record:
        return "instruction"
    if "choice_A" in record:
        missing = [f for f in V2_FIELDS if not isinstance(record.get(f), str)]
        if missing:
            raise RecordError(path, line, f"a LongBench v2 record needs the text fields {', '.join(V2_FIELDS)}; "
                                          f"missing or not a string: {', '.join(missing)}")
        return "longbench_v2"
    if "options" in record and "answer" in record:
        return "choice"
    raise RecordError(path, line, "a dataset record needs 'answers' (LongBench form), 'output' (instruction / "
                                  "input / output form), or 'question', 'choice_A'..'choice_D', 'answer' "
                                  "(LongBench v2 form)")


_ANSWER_FIELD = {"longbench": "answers", "instruction": "output", "longbench_v2": "answer", "choice": "answer"}


def answers_of(record: dict, form: str) -> object:
    """The reference answer(s) as stored (a string or a list; the caller checks the type)."""
    return record[_ANSWER_FIELD[form]]


def question_text(record: dict, form: str) -> str:
    """What a judge needs to see of the question (the long context stays in the dataset file)."""
    if form == "longbench_v2":
        return "\n".join([record["question"], *(f"{c[-1]}) {record[c]}" for c in V2_CHOICES)])
    parts = [record.get(k) for k in ("instruction", "input", "question", "options")]
    return "\n".join(str(p) for p in parts if p)


def prompt_fields(record: dict, form: str) -> dict:
    """The values a template is filled with: LongBench v2's pred.py strips the document, question and choices
    before filling its prompt, so the v2 form does too; other forms are filled as read."""
    if form != "longbench_v2":
        return record
    return {k: v.strip() if isinstance(v, str) else v for k, v in record.items()}


def expand_nested_choices(value: object, path: Path, text_lines: list[int]) -> list[tuple[int, dict]] | None:
    """The records of a nested choice-question file (one JSON object mapping a question type to its list of
    questions), or None when `value` is not one. `text_lines` are the lines on which each "question" key occurs,
    in file order, so an error can name the line."""
    if not isinstance(value, dict) or not value or not all(isinstance(v, list) for v in value.values()):
        return None
    if not all(isinstance(q, dict) and "options" in q for v in value.values() for q in v):
        return None
    records, position = [], 0
    for question_type, questions in value.items():
        for item in questions:
            line = text_lines[position] if position < len(text_lines) else 1
            position += 1
            records.append((line, _choice_record(item, question_type, path, line)))
    return records


def _choice_record(item: dict, question_type: str, path: Path, line: int) -> dict:
    options = item.get("options")
    if not isinstance(item.get("question"), str) or not isinstance(item.get("answer"), str):
        raise RecordError(path, line, "a choice question needs a 'question' string and an 'answer' string")
    if not isinstance(options, list) or not all(isinstance(o, dict) and isinstance(o.get("option"), str)
                                                and isinstance(o.get("value"), str) for o in options):
        raise RecordError(path, line, "'options' must be a list of {\"option\": letter, \"value\": text} objects")
    listed = ", ".join(f"{o['option']}: {o['value']}" for o in options)
    return {"question": item["question"], "options": listed, "answer": item["answer"],
            "question_type": question_type}
