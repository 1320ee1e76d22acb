"""The prediction record: the one file contract between `inference.py` and `eval.py`.

A prediction file is `<pred-dir>/<dataset>.jsonl`, one JSON object per line. LongBench / TinyEval files are
valid as they are (only `pred` and `answers` are required); later stages add fields, never rename them.

Usage:
    from Eval.records import read_records, append_records
    records = read_records("pred/internlm/trec.jsonl")   # list of dicts, `answers` always a list

Every field, in one table (name, JSON type, required, who writes it, meaning):
"""
from __future__ import annotations

import hashlib
import json
import math
import os
import re
from pathlib import Path
from typing import Iterable

from Eval.storage import StorageError, read_regular_bytes

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
    "example_sha256": ((str, type(None)), False, "hash of the dataset example the record was made from "
                                                 "(Eval/inference/datasets.py); resume redoes an example whose content "
                                                 "changed, eval.py checks the file against the run sidecar"),
    "dataset": ((str, type(None)), False, "dataset name; the file stem is authoritative"),
    "question": ((str, type(None)), False, "the example's question (input / instruction), shown to a judge"),
    "prompt_tokens": ((int, type(None)), False, "tokens in the final prompt after truncation and template"),
    "truncated_tokens": ((int, type(None)), False, "tokens cut from the middle of the prompt (0: none)"),
    "gen_tokens": ((int, type(None)), False, "generated tokens"),
    "finish_reason": ((str, type(None)), False, "'stop' (EOS / stop string), 'length' or 'error'"),
    "latency_s": ((int, float, type(None)), False, "wall time of the batch that produced this record, "
                                                   "divided by its size"),
    "batch_size": ((int, type(None)), False, "batch size actually used (after any OOM halving)"),
    "server_usage": ((dict, type(None)), False, "the API server's own token counts for this record "
                                                "(prompt_tokens, completion_tokens, ...), when it sent any"),
    "logprobs": ((dict, list, type(None)), False, "saved log-probability data for probability metrics"),
    "index": ((int, type(None)), False, "row position in a TOFU / MUSE split (open-unlearning's value_by_index)"),
    "gradnorm": ((dict, type(None)), False, "GradNorm MIA score per answer key, computed at inference"),
    "reference_avg_loss": ((dict, type(None)), False, "a reference model's avg loss per answer key (Reference MIA)"),
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


def read_text_file(path: Path) -> str:
    """A regular UTF-8 text file (a BOM is dropped); RecordError naming the file (and the line of a bad byte)
    for anything else: a folder, a FIFO, a broken link, bytes that are not UTF-8."""
    try:
        raw = read_regular_bytes(path)
    except StorageError as err:
        raise RecordError(path, None, str(err).removeprefix(f"{path}: ")) from None
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as err:
        line = raw.count(b"\n", 0, err.start) + 1
        raise RecordError(path, line, f"byte 0x{raw[err.start]:02x} is not valid UTF-8; re-save the file "
                                      "as UTF-8") from None


def _raw_decode(decoder: json.JSONDecoder, text: str, pos: int, path: Path, line: int) -> tuple[object, int]:
    """One JSON value at `pos`; every way the parser can fail becomes a RecordError naming the line."""
    try:
        return decoder.raw_decode(text, pos)
    except json.JSONDecodeError as err:
        # Name the line where the broken value starts (a torn JSONL line fails only at the next one).
        where = "" if err.lineno == line else f" at line {err.lineno}"
        raise RecordError(path, line, f"not valid JSON ({err.msg}{where}, column {err.colno})") from None
    except RecursionError:
        raise RecordError(path, line, "a value is nested too deeply (hundreds of levels of [ or {) to be a "
                                      "record") from None
    except ValueError as err:  # e.g. an integer of more than 4300 digits
        raise RecordError(path, line, f"a value cannot be read: {str(err).split(';')[0]}") from None


# A record holding a lone surrogate can be parsed but never written back as UTF-8; such text can only come
# from a \uD800-\uDFFF escape, so only values whose text has one are walked.
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F][0-9a-fA-F]{2}")


def _lone_surrogate_at(value: object, where: str = "") -> str | None:
    """The field path of the first string holding a lone surrogate, or None."""
    stack = [(where, value)]
    while stack:
        name, item = stack.pop()
        if isinstance(item, str):
            try:
                item.encode("utf-8")
            except UnicodeEncodeError:
                return name or "the value"
        elif isinstance(item, dict):
            stack.extend((f"{name}.{k}" if name else repr(k), v) for k, v in item.items())
            stack.extend((f"{name} (a key)", k) for k in item)
        elif isinstance(item, list):
            stack.extend((f"{name}[{i}]", v) for i, v in enumerate(item))
    return None


def iter_json_objects(path: os.PathLike | str) -> Iterable[tuple[int, object]]:
    """Yield (line number, parsed value) for each JSON value in the file.

    Reads JSON Lines, and also the two shapes TinyEval ships under a .jsonl name: pretty-printed objects one
    after another, and one JSON array of objects (each element is yielded with the line it starts on).
    Refuses, naming file and line: anything but a regular file, bytes that are not UTF-8, broken JSON, values
    nested too deeply or integers too long to read, and strings holding a lone surrogate (a `\\ud800`
    escape), which could never be written back as UTF-8.
    """
    path = Path(path)
    text = read_text_file(path)
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
        value, pos = _raw_decode(decoder, text, pos, path, line)
        if _SURROGATE_ESCAPE.search(text, start, pos):
            _refuse_surrogates(value, path, line)
        values.append((line, value, start))
    if len(values) == 1 and isinstance(values[0][1], list):
        yield from _array_elements(text, values[0][2], values[0][1], path)
        return
    for line, value, _ in values:
        yield line, value


def _refuse_surrogates(value: object, path: Path, line: int) -> None:
    field = _lone_surrogate_at(value)
    if field:
        raise RecordError(path, line, f"{field} holds a lone surrogate (an unpaired \\ud800-\\udfff escape), "
                                      "which is not valid Unicode; fix the text that produced it")


def _array_elements(text: str, start: int, items: list, path: Path) -> Iterable[tuple[int, object]]:
    # Re-scan the array to find where each element starts, so errors can still name a line.
    decoder, pos = json.JSONDecoder(), start + 1
    line, counted = _line_of(text, start), start
    for item in items:
        while text[pos] in " \t\r\n,":
            pos += 1
        line += text.count("\n", counted, pos)
        counted = pos
        _, end = decoder.raw_decode(text, pos)
        if _SURROGATE_ESCAPE.search(text, pos, end):
            _refuse_surrogates(item, path, line)
        pos = end
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
    length = obj.get("length")
    if length is not None and not (math.isfinite(length) and length >= 0):
        raise RecordError(path, line, f"field 'length' must be a finite number >= 0 (LongBench's word or "
                                      f"character count), found {length!r}")
    return {**obj, "answers": answers}


def read_records(path: os.PathLike | str) -> list[dict]:
    """Read and validate a whole prediction file; any problem raises RecordError naming file and line."""
    records = [validate_record(obj, path, line) for line, obj in iter_json_objects(path)]
    if not records:
        raise RecordError(path, None, "file is empty: no prediction records")
    return records


def content_hash(record: dict) -> str:
    """The identity of an example's content: every field, key order ignored (16 hex digits of sha256).

    >>> content_hash({"input": "a", "output": "b"}) == content_hash({"output": "b", "input": "a"})
    True
    """
    text = json.dumps(record, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


def examples_digest(pairs) -> str:
    """One hash over a sequence of (id, content hash): which examples, with which content, in which order."""
    digest = hashlib.sha256()
    for rid, sha in pairs:
        digest.update(json.dumps([str(rid), sha or ""], ensure_ascii=False).encode("utf-8"))
    return digest.hexdigest()[:16]


def sidecar_path(pred_path: os.PathLike | str) -> Path:
    """The run sidecar beside a record file: <stem>.run.json (the resolved configuration, written by inference)."""
    pred_path = Path(pred_path)
    return pred_path.with_name(pred_path.stem + ".run.json")


DRY_RUN_SUFFIX = ".prompts.jsonl"  # inference.py dry-run's rendered prompts (Eval/inference/dry_run.py)


def is_dry_run_output(path: os.PathLike | str) -> bool:
    """Whether a *.jsonl is `inference.py dry-run`'s <dataset>.prompts.jsonl: the suffix and no run sidecar
    (a dry run writes none; a real run of a dataset named "x.prompts" does, and its file stays a prediction file)."""
    path = Path(path)
    sidecar = sidecar_path(path)
    return path.name.endswith(DRY_RUN_SUFFIX) and not (sidecar.exists() or sidecar.is_symlink())


def is_prediction_file(path: os.PathLike | str) -> bool:
    """Whether a *.jsonl in a prediction folder holds predictions for the LongBench scorer: yes, unless it is a
    dry run's prompts (is_dry_run_output) or its run sidecar (<stem>.run.json) says it holds something else, such
    as TOFU / MUSE score records ("kind": "unlearning_score_records"; sidecars of older runs say so with a
    "split" entry)."""
    path = Path(path)
    if is_dry_run_output(path):
        return False
    try:
        content = json.loads(read_regular_bytes(sidecar_path(path)))
    except (StorageError, ValueError, RecursionError):
        return True
    if not isinstance(content, dict):
        return True
    return content.get("kind", "predictions") == "predictions" and "split" not in content
