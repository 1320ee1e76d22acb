"""Nested choice-question files (TinyEval's GAOKAO-new1-math.json) read as `choice` records:
{"one-choice-question": [{"question", "options": [{"option": "A", "value"}, ..], "answer"}, ..]}.

Usage: records = nested_choice_records(value, path)   # [(line, record)], or None
"""

import re
from pathlib import Path

from Eval.records import RecordError


def nested_choice_records(value: object, path: Path) -> list[tuple[int, dict]] | None:
    """The (line of its "question" key, record) pairs of such a file, or None when it is not."""
    if not isinstance(value, dict) or not value:
        return None
    every = [q for v in value.values() for q in (v if isinstance(v, list) else [None])]
    if not every or not all(isinstance(q, dict) and "options" in q for q in every):
        return None
    text = path.read_text(encoding="utf-8")  # read again only for a file of this shape: lines
    lines = [text.count("\n", 0, m.start()) + 1 for m in re.finditer(r'"question"\s*:', text)]
    records = []
    for question_type, questions in value.items():
        for item in questions:
            line = lines[len(records)] if len(records) < len(lines) else 1
            options = item.get("options")
            if not isinstance(item.get("question"), str) or not isinstance(item.get("answer"), str):
                raise RecordError(path, line, "a choice question needs a 'question' string and an "
                                              "'answer' string")
            if not isinstance(options, list) or not all(
                    isinstance(o, dict) and isinstance(o.get("option"), str)
                    and isinstance(o.get("value"), str) for o in options):
                raise RecordError(path, line, "'options' must be a list of {\"option\": letter, "
                                              "\"value\": text} objects")
            listed = ", ".join(f"{o['option']}: {o['value']}" for o in options)
            records.append((line, {"question": item["question"], "options": listed,
                                   "answer": item["answer"], "question_type": question_type}))
    return records
