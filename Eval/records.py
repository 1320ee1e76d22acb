"""The prediction record: the one file contract between `inference.py` and `eval.py`.

A prediction file is `<pred-dir>/<dataset>.jsonl`, one JSON object per line. LongBench / TinyEval files are
valid as they are (only `pred` and `answers` are required); later stages add fields, never rename them.

Usage:
    from Eval.records import read_records, append_records
    records = read_records("pred/internlm/trec.jsonl")   # list of dicts, `answers` always a list

Every field, in one table (name, JSON type, required, who writes it, meaning):
"""
from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Iterable

# name: (allowed JSON types, required, meaning). Types are Python types after json.loads; None means null.
FIELDS: dict[str, tuple[tuple[type, ...], bool, str]] = {
    "pred": ((str,), True, "raw model output, unprocessed; all extraction happens at scoring time"),
    "answers": ((list, str), True, "reference answers; a bare string is ONE answer (GAOKAO files), never "
                                  "its characters"),
    "all_classes": ((list, type(None)), False, "label set for classification tasks (trec, lsht)"),
    "length": ((int, float, type(None)), False, "LongBench length: words (en/code) or characters (zh) of "
                                                "input+context+answers; drives the LongBench-E buckets"),
    "_id": ((str, type(None)), False, "LongBench's example id"),
    "id": ((str, int, type(None)), False, "example id written by inference.py (resume and merge key)"),
    "dataset": ((str, type(None)), False, "dataset name; the file stem is authoritative"),
    "question": ((str, type(None)), False, "the example's question (input / instruction), shown to a judge"),
    "prompt_tokens": ((int, type(None)), False, "tokens in the final prompt after truncation and template"),
    "truncated_tokens": ((int, type(None)), False, "tokens cut from the middle of the prompt (0: none)"),
    "gen_tokens": ((int, type(None)), False, "generated tokens"),
    "finish_reason": ((str, type(None)), False, "'stop' (EOS / stop string), 'length' or 'error'"),
    "latency_s": ((int, float, type(None)), False, "wall time of the batch that produced this record, "
                                                   "divided by its size"),
    "batch_size": ((int, type(None)), False, "batch size actually used (after any OOM halving)"),
    "logprobs": ((dict, list, type(None)), False, "saved log-probability data for probability metrics"),
    "index": ((int, type(None)), False, "row position in a TOFU / MUSE split (open-unlearning's value_by_index)"),
    "gradnorm": ((dict, type(None)), False, "GradNorm MIA score per answer key, computed at inference"),
    "reference_avg_loss": ((dict, type(None)), False, "a reference model's avg loss per answer key (Reference MIA)"),
    "judge": ((dict, type(None)), False, "judge verdicts attached by eval.py --judge"),
    "error": ((str, type(None)), False, "per-record failure (API error, ...); such a record counts as "
                                        "failed in the results, never silently dropped"),
}
__doc__ += "\n".join(f"    {k:17} {'/'.join(t.__name__ for t in v[0]):22} {'required' if v[1] else 'optional':8} "
                     f"{v[2]}" for k, v in FIELDS.items())


# What the probability / unlearning metrics need, saved per answer option in a record's `logprobs` field:
#   "logprobs": {<answer key>: [TokenStats, ...one per option...]}   e.g. "answer", "paraphrased_answer",
#                                                                     "perturbed_answer" (3-5 options)
# A TokenStats dict holds one entry per LABELLED answer token (an EOS appended to QA answers is labelled too;
# completion texts get no EOS), never anything vocabulary-sized:
TOKEN_STATS_FIELDS = {
    "logprobs": "list[float]: log p(y_t | prompt, y_<t), the teacher-forced label log-probabilities",
    "greedy": "list[bool]: whether the label is the argmax at its position (exact memorisation, extraction)",
    "mean": "list[float]: E_p[log p] over the full vocabulary at each position (Min-K%++)",
    "var": "list[float]: Var_p[log p] over the full vocabulary at each position (Min-K%++)",
    "text": "str: the label tokens decoded with special tokens skipped (ZLib)",
    "eos": "bool: whether an EOS token was appended to the answer and labelled",
}
# Consumers drop the last labelled position where open-unlearning does (Min-K, Min-K++, EM, ES).


class RecordError(ValueError):
    """Bad input, located: `str(err)` reads `path:line: problem`."""

    def __init__(self, path: os.PathLike | str, line: int | None, problem: str):
        self.path, self.line, self.problem = str(path), line, problem
        where = f"{self.path}:{line}" if line else self.path
        super().__init__(f"{where}: {problem}")


def _line_of(text: str, offset: int) -> int:
    return text.count("\n", 0, offset) + 1


def _decode(path: Path) -> str:
    raw = path.read_bytes()
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as err:
        line = raw.count(b"\n", 0, err.start) + 1
        raise RecordError(path, line, f"byte 0x{raw[err.start]:02x} is not valid UTF-8; re-save the file "
                                      "as UTF-8") from None


def iter_json_objects(path: os.PathLike | str) -> Iterable[tuple[int, object]]:
    """Yield (line number, parsed value) for each JSON value in the file.

    Reads JSON Lines, and also the two shapes TinyEval ships under a .jsonl name: pretty-printed objects one
    after another, and one JSON array of objects (each element is yielded with the line it starts on).
    """
    path = Path(path)
    text = _decode(path)
    decoder = json.JSONDecoder()
    pos, end = 0, len(text)
    values, line, counted = [], 1, 0
    while True:
        while pos < end and text[pos] in " \t\r\n":
            pos += 1
        if pos >= end:
            break
        start = pos
        line += text.count("\n", counted, start)  # incremental: counting from 0 each time is quadratic
        counted = start
        try:
            value, pos = decoder.raw_decode(text, pos)
        except json.JSONDecodeError as err:
            # Name the line where the broken value starts (a torn JSONL line fails only at the next one).
            where = "" if err.lineno == line else f" at line {err.lineno}"
            raise RecordError(path, line, f"not valid JSON ({err.msg}{where}, column {err.colno})") from None
        values.append((line, value, start))
    if len(values) == 1 and isinstance(values[0][1], list):
        yield from _array_elements(text, values[0][2], values[0][1])
        return
    for line, value, _ in values:
        yield line, value


def _array_elements(text: str, start: int, items: list) -> Iterable[tuple[int, object]]:
    # Re-scan the array to find where each element starts, so errors can still name a line.
    decoder, pos = json.JSONDecoder(), start + 1
    line, counted = _line_of(text, start), start
    for item in items:
        while text[pos] in " \t\r\n,":
            pos += 1
        line += text.count("\n", counted, pos)
        counted = pos
        _, pos = decoder.raw_decode(text, pos)
        yield line, item


def normalize_answers(answers: object) -> list[str]:
    """`answers` as a list of strings: a bare string is one answer (never iterated character by character)."""
    if isinstance(answers, str):
        return [answers]
    return list(answers)  # type: ignore[arg-type]


def validate_record(obj: object, path: os.PathLike | str, line: int) -> dict:
    """Check one parsed value against FIELDS; return it with `answers` normalised to a list of strings."""
    if not isinstance(obj, dict):
        raise RecordError(path, line, f"expected a JSON object, found {type(obj).__name__}")
    for name, (types, required, _) in FIELDS.items():
        if name not in obj:
            if required:
                raise RecordError(path, line, f"missing required field {name!r}")
            continue
        if not isinstance(obj[name], types) or isinstance(obj[name], bool):
            allowed = " or ".join("null" if t is type(None) else t.__name__ for t in types)
            raise RecordError(path, line, f"field {name!r} must be {allowed}, found "
                                          f"{type(obj[name]).__name__}")
    answers = normalize_answers(obj["answers"])
    if not all(isinstance(a, str) for a in answers):
        raise RecordError(path, line, "field 'answers' must hold only strings")
    classes = obj.get("all_classes")
    if classes is not None and not all(isinstance(c, str) for c in classes):
        raise RecordError(path, line, "field 'all_classes' must hold only strings")
    return {**obj, "answers": answers}


def read_records(path: os.PathLike | str) -> list[dict]:
    """Read and validate a whole prediction file; any problem raises RecordError naming file and line."""
    records = [validate_record(obj, path, line) for line, obj in iter_json_objects(path)]
    if not records:
        raise RecordError(path, None, "file is empty: no prediction records")
    return records


def write_json_atomic(path: os.PathLike | str, obj: object) -> None:
    """Write JSON via a temporary file and rename, so a crash never leaves a half-written result."""
    path = Path(path)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(obj, ensure_ascii=False, indent=4, allow_nan=False) + "\n", encoding="utf-8")
    os.replace(tmp, path)


def write_jsonl_atomic(path: os.PathLike | str, rows: Iterable[dict]) -> None:
    path = Path(path)
    tmp = path.with_name(path.name + ".tmp")
    with tmp.open("w", encoding="utf-8") as f:
        for row in rows:
            f.write(json.dumps(row, ensure_ascii=False, allow_nan=False) + "\n")
    os.replace(tmp, path)
