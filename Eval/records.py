"""The prediction record, the one contract between `inference.py` and `eval.py`: one JSON object
per line of `<pred-dir>/<dataset>.jsonl`; LongBench / TinyEval files are valid as they are.

Usage:
    records = read_records("pred/internlm/trec.jsonl")   # list of dicts, `answers` always a list

Every field (name, JSON type, required, meaning):
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

NULL = type(None)
# name: (allowed JSON types, required, meaning). Types are Python types after json.loads.
FIELDS: dict[str, tuple[tuple[type, ...], bool, str]] = {
    "pred": ((str,), True, "raw model output, unprocessed; all extraction happens at scoring time"),
    "answers": ((list, str), True, "reference answers; a bare string is ONE answer (GAOKAO)"),
    "all_classes": ((list, NULL), False, "label set for classification tasks (trec, lsht)"),
    "length": ((int, float, NULL), False, "LongBench length: words (en/code) or characters (zh) of "
                                          "input, context and answers; the LongBench-E buckets"),
    "_id": ((str, NULL), False, "LongBench's example id"),
    "id": ((str, int, NULL), False, "example id written by inference.py (resume and merge key)"),
    "example_sha256": ((str, NULL), False, "hash of the source example: resume redoes a changed "
                                           "one (its prompt unchanged: keeps the output, takes the "
                                           "new fields); eval.py checks it against the sidecar"),
    "dataset": ((str, NULL), False, "dataset name; the file stem is authoritative"),
    "question": ((str, NULL), False, "the example's question (input / instruction), for a judge"),
    "prompt_tokens": ((int, NULL), False, "tokens in the final prompt (truncated, templated)"),
    "prompt_sha256": ((str, NULL), False, "hash of the exact prompt sent (eval.py diff reads it)"),
    "truncated_tokens": ((int, NULL), False, "tokens cut from the prompt (0: none)"),
    "truncation": ((str, NULL), False, "where a long prompt is cut: middle, left, right or skip"),
    "gen_tokens": ((int, NULL), False, "generated tokens"),
    "finish_reason": ((str, NULL), False, "'stop' (EOS / stop string), 'length', 'error' or "
                                          "'skipped' (--truncation skip: not run)"),
    "latency_s": ((int, float, NULL), False, "wall time of the record's batch divided by its size"),
    "batch_size": ((int, NULL), False, "batch size actually used (after any OOM halving)"),
    "model_sha256": ((str, NULL), False, "hash of the model's identity: resume redoes another's"),
    "server_usage": ((dict, NULL), False, "the API server's own token counts, if it sent any"),
    "logprobs": ((dict, list, NULL), False, "saved log-probability data for probability metrics"),
    "index": ((int, NULL), False, "row in a TOFU / MUSE split (open-unlearning's value_by_index)"),
    "gradnorm": ((dict, NULL), False, "GradNorm MIA score per answer key, computed at inference"),
    "reference_avg_loss": ((dict, NULL), False, "a reference model's avg loss per answer key"),
    "error": ((str, NULL), False, "per-record failure (API error, ...): counted, never dropped"),
    "retrieved": ((dict, NULL), False, "the query's retrieval run {doc id: score}"),
    "relevant": ((dict, NULL), False, "the query's judged documents {doc id: grade}"),
}
__doc__ += "\n".join(f"    {k:18} {'/'.join(t.__name__ for t in v[0]):18} "
                     f"{'required' if v[1] else 'optional':8} {v[2]}" for k, v in FIELDS.items())


class RecordError(ValueError):
    """Bad input, located: `str(err)` reads `path:line: problem`."""

    def __init__(self, path: os.PathLike | str, line: int | None, problem: str):
        self.path, self.line, self.problem = str(path), line, problem
        where = f"{self.path}:{line}" if line else self.path
        super().__init__(f"{where}: {problem}")


def read_text_file(path: Path) -> str:
    """A regular UTF-8 text file (a BOM is dropped); else RecordError naming the file (and line)."""
    try:
        raw = read_regular_bytes(path)
    except StorageError as err:
        raise RecordError(path, None, str(err).removeprefix(f"{path}: ")) from None
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as err:
        line = raw.count(b"\n", 0, err.start) + 1
        problem = f"byte 0x{raw[err.start]:02x} is not valid UTF-8; re-save the file as UTF-8"
        raise RecordError(path, line, problem) from None


# A lone surrogate can be parsed but never written back as UTF-8; it can only come from a
# \uD800-\uDFFF escape, so only values whose text has one are walked.
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F][0-9a-fA-F]{2}")


def _lone_surrogate_at(value: object) -> str | None:
    """The field path of the first string holding a lone surrogate, or None."""
    stack = [("", value)]
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


def _scan(text: str, pos: int, skip: str, path: Path, line: int, limit: int | None = None) -> list:
    """(line, value, start) of the JSON values from `pos` on, separated by characters of `skip`."""
    decoder, counted, found = json.JSONDecoder(), pos, []
    while limit is None or len(found) < limit:
        while pos < len(text) and text[pos] in skip:
            pos += 1
        if pos >= len(text):
            break
        line += text.count("\n", counted, pos)  # counting from 0 each time would be quadratic
        counted = pos
        try:
            value, end = decoder.raw_decode(text, pos)
        except json.JSONDecodeError as err:
            # the line where the broken value starts: a torn JSONL line fails only at the next one
            where = "" if err.lineno == line else f" at line {err.lineno}"
            problem = f"not valid JSON ({err.msg}{where}, column {err.colno})"
            raise RecordError(path, line, problem) from None
        except RecursionError:
            problem = "a value is nested too deeply (hundreds of levels of [ or {) to be a record"
            raise RecordError(path, line, problem) from None
        except ValueError as err:  # e.g. an integer of more than 4300 digits
            problem = f"a value cannot be read: {str(err).split(';')[0]}"
            raise RecordError(path, line, problem) from None
        if _SURROGATE_ESCAPE.search(text, pos, end):
            field = _lone_surrogate_at(value)
            if field:
                problem = (f"{field} holds a lone surrogate (an unpaired \\ud800-\\udfff escape), "
                           "which is not valid Unicode; fix the text that produced it")
                raise RecordError(path, line, problem)
        found.append((line, value, pos))
        pos = end
    return found


def iter_json_objects(path: os.PathLike | str) -> Iterable[tuple[int, object]]:
    """(line number, parsed value) of each JSON value: JSON Lines, and TinyEval's two other .jsonl
    shapes, pretty-printed objects one after another and one JSON array of objects."""
    path = Path(path)
    text = read_text_file(path)
    values = _scan(text, 0, " \t\r\n", path, 1)
    if len(values) == 1 and isinstance(values[0][1], list):
        line, items, start = values[0]
        values = _scan(text, start + 1, " \t\r\n,", path, line, limit=len(items))
    for line, value, _ in values:
        yield line, value


def normalize_answers(answers: object) -> list[str]:
    """A bare string is one answer, never iterated character by character."""
    return [answers] if isinstance(answers, str) else list(answers)  # type: ignore[arg-type]


def validate_record(obj: object, path: os.PathLike | str, line: int) -> dict:
    """Check one parsed value against FIELDS; return it with `answers` a list of strings."""
    if not isinstance(obj, dict):
        raise RecordError(path, line, f"expected a JSON object, found {type(obj).__name__}")
    for name, (types, required, _) in FIELDS.items():
        if name not in obj:
            if required:
                raise RecordError(path, line, f"missing required field {name!r}")
            continue
        if not isinstance(obj[name], types) or isinstance(obj[name], bool):
            allowed = " or ".join("null" if t is NULL else t.__name__ for t in types)
            raise RecordError(path, line, f"field {name!r} must be {allowed}, found "
                                          f"{type(obj[name]).__name__}")
    answers = normalize_answers(obj["answers"])
    for name, values in (("answers", answers), ("all_classes", obj.get("all_classes") or ())):
        if not all(isinstance(v, str) for v in values):
            raise RecordError(path, line, f"field {name!r} must hold only strings")
    length = obj.get("length")
    if length is not None and not (math.isfinite(length) and length >= 0):
        raise RecordError(path, line, "field 'length' must be a finite number >= 0 (LongBench's "
                                      f"word or character count), found {length!r}")
    return {**obj, "answers": answers}


def read_records(path: os.PathLike | str, convert=None) -> list[dict]:
    """A whole prediction file, validated; a problem raises RecordError naming file and line, and
    how many other lines are bad (fixed all at once, not one per run).
    `convert`: each parsed value first goes through it (another tool's row -> our record)."""
    records, bad = [], []
    for line, obj in iter_json_objects(path):
        try:
            records.append(validate_record(convert(obj) if convert else obj, path, line))
        except RecordError as err:
            bad.append(err)
    if bad:
        more = ", ".join(str(err.line) for err in bad[1:6]) + (", ..." if len(bad) > 6 else "")
        also = f" (and {len(bad) - 1} more bad line{'s' * (len(bad) > 2)}: {more})" if more else ""
        raise RecordError(path, bad[0].line, bad[0].problem + also)
    if not records:
        raise RecordError(path, None, "file is empty: no prediction records")
    return records


def content_hash(record: dict) -> str:
    """An example's content identity: every field, key order ignored (16 hex digits of sha256)."""
    text = json.dumps(record, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


def file_sha256(path: Path) -> str:
    """A file's identity in sidecars and result files: 16 hex digits of its bytes' sha256."""
    return hashlib.sha256(read_regular_bytes(path)).hexdigest()[:16]


def examples_digest(pairs) -> str:
    """One hash over (id, content hash) pairs: which examples, with which content, in order."""
    digest = hashlib.sha256()
    for rid, sha in pairs:
        digest.update(json.dumps([str(rid), sha or ""], ensure_ascii=False).encode("utf-8"))
    return digest.hexdigest()[:16]


def sidecar_path(pred_path: os.PathLike | str) -> Path:
    """<stem>.run.json beside a record file: the resolved configuration inference wrote."""
    return Path(pred_path).with_suffix(".run.json")


DRY_RUN_SUFFIX = ".prompts.jsonl"  # inference.py dry-run's rendered prompts


def is_dry_run_output(path: os.PathLike | str) -> bool:
    """Whether a *.jsonl is `inference.py dry-run`'s output: the suffix and no run sidecar (a real
    run of a dataset named "x.prompts" writes one)."""
    return str(path).endswith(DRY_RUN_SUFFIX) and not os.path.lexists(sidecar_path(path))


def is_prediction_file(path: os.PathLike | str) -> bool:
    """Whether a *.jsonl in a prediction folder holds predictions: yes, unless it is a dry run's
    prompts or its run sidecar says otherwise (TOFU / MUSE score records: "kind", or "split")."""
    if is_dry_run_output(path):
        return False
    try:  # a sidecar the OS refuses to open stays an error (run_main names it)
        content = json.loads(read_regular_bytes(sidecar_path(path)))
    except (StorageError, ValueError, RecursionError):  # none, or not JSON
        return True
    return not isinstance(content, dict) or (content.get("kind", "predictions") == "predictions"
                                             and "split" not in content)
