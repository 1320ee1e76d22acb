"""A prediction file being written: content-aware resume, torn-line repair, shards, merge, the run sidecar.

`pred/<model>/<dataset>.jsonl` is appended and flushed batch by batch, so a killed run loses at most the batch in
flight. A sharded run (torchrun ranks, or `--shard I/K` processes) appends to its own
`pred/<model>/shards/<dataset>.I-of-K.jsonl` instead. Reopening reads the main file and every shard file of this
dataset (any K), and repairs a torn last line of the file it writes.

Every record carries `example_sha256`, the hash of the dataset example it was made from. An example counts as
done only when some file holds a record for its id, without an `error`, made from the example's CURRENT content.
So after the user edits the data: changed examples are redone, new ones generated, and finishing merges the
files by id into the main file in dataset order, keeping only records of examples still in the dataset with
their current content (a good record beats a failed one) and removing the shard files. Resuming does not depend
on how many shards the earlier run had. `pred/<model>/<dataset>.run.json` (the sidecar) records how the file was
made and what it holds; a resumed run must match its settings, or the user passes --overwrite.

Usage:
    out = PredictionFile(path, expected={e.id: e.sha256 for e in dataset.examples})
    todo = [e for e in examples if e.id not in out.done]
    out.append(records)          # one batch
    merged = merge_predictions(path, order=[...], required=[...], expected={...})
"""
from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path

from Eval.records import RecordError, examples_digest
from Eval.storage import append_lines, read_complete_lines, write_json_atomic, write_jsonl_atomic


def _read_records(path: Path, repair: bool) -> list[dict]:
    """Records of every complete line; a torn last line (a crash mid-write) is cut off when `repair`."""
    records = []
    for number, line in read_complete_lines(path, repair)[0]:
        try:
            record = json.loads(line)
        except (ValueError, RecursionError) as err:  # UnicodeDecodeError is a ValueError
            raise RecordError(path, number, f"unreadable record ({type(err).__name__}: {str(err)[:80]}); fix or "
                                            "remove the line, or rerun with --overwrite") from None
        if not isinstance(record, dict) or "id" not in record:
            raise RecordError(path, number, "not a prediction record with an id; remove the line, or rerun with "
                                            "--overwrite")
        records.append(record)
    return records


def shard_path(path: Path, shard_id: int, num_shards: int) -> Path:
    return path.parent / "shards" / f"{path.stem}.{shard_id}-of-{num_shards}.jsonl"


def shard_paths(path: Path) -> list[Path]:
    """This dataset's shard files only: `mydata.v2.0-of-2.jsonl` is not a shard of `mydata` (an exact match on
    the name, never a glob that a dotted or bracketed dataset name could widen)."""
    folder = path.parent / "shards"
    if not folder.is_dir():
        return []
    pattern = re.compile(re.escape(path.stem) + r"\.(\d+)-of-(\d+)\.jsonl")
    return sorted(p for p in folder.iterdir() if pattern.fullmatch(p.name))


def _rank(record: dict, expected: dict[str, str] | None, model: str | None = None) -> int:
    """Which record of an id to keep: current and good (2) > current and failed (1) > made from other data or by
    another model (0). `model` is the model_sha256 records must carry (None: any model)."""
    current = (expected is None or record.get("example_sha256") == expected.get(str(record.get("id")))) \
        and (model is None or record.get("model_sha256") == model)
    return (1 + (record.get("error") is None)) if current else 0


def unselected_path(path: Path) -> Path:
    """Where records a finished run did not select are kept (a --limit 10 run after a --limit 20 one), so that
    the main file holds exactly what the last run selected and no generated record is lost."""
    return path.parent / "shards" / f"{path.stem}.unselected.jsonl"


def best_records(path: Path, repair: Path | None = None, expected: dict[str, str] | None = None,
                 model: str | None = None) -> dict[str, dict]:
    """id -> the best record over the main file, all shard files and the unselected records (see _rank; earlier
    files win ties)."""
    best: dict[str, dict] = {}
    for source in [path, *shard_paths(path), unselected_path(path)]:
        if not source.exists():
            continue
        for record in _read_records(source, repair=source == repair):
            rid = str(record.get("id"))
            if rid not in best or _rank(record, expected, model) > _rank(best[rid], expected, model):
                best[rid] = record
    return best


def has_records(path: Path) -> bool:
    """Whether the main file or a shard file of this dataset holds any bytes (a sidecar alone means nothing)."""
    return any(p.exists() and p.stat().st_size > 0 for p in [path, *shard_paths(path)])


class PredictionFile:
    """The records written so far for one dataset, seen against the dataset's current examples."""

    def __init__(self, path: Path, overwrite: bool = False, shard_id: int = 0, num_shards: int = 1,
                 expected: dict[str, str] | None = None, model: str | None = None):
        self.path, self.expected, self.model = path, expected, model
        self.write_path = path if num_shards == 1 else shard_path(path, shard_id, num_shards)
        if overwrite:
            every = [*shard_paths(path), unselected_path(path)] if num_shards == 1 else []
            for stale in [self.write_path, *every]:
                stale.unlink(missing_ok=True)
        size = self.write_path.stat().st_size if self.write_path.exists() else 0
        self.records = best_records(path, repair=self.write_path, expected=expected, model=model)
        self.torn_line_repaired = self.write_path.exists() and self.write_path.stat().st_size != size
        self.done = {rid for rid, r in self.records.items() if _rank(r, expected, model) == 2}

    def status(self, ids: list[str]) -> dict[str, int]:
        """How the given examples stand: done, new (no record), changed (a record of older content), made by
        another model (a checkpoint changed in place: its records are redone), failed."""
        counts = {"done": 0, "new": 0, "changed": 0, "model_changed": 0, "failed": 0}
        for rid in ids:
            record = self.records.get(rid)
            rank = -1 if record is None else _rank(record, self.expected, self.model)
            if rank == 0 and _rank(record, self.expected) > 0:
                counts["model_changed"] += 1
            else:
                counts[{2: "done", 1: "failed", 0: "changed", -1: "new"}[rank]] += 1
        return counts

    def append(self, records: list[dict]) -> None:
        lines = [_serialise(record) for record in records]
        append_lines(self.write_path, lines)
        for line in lines:
            saved = json.loads(line)
            if saved.get("error") is None:
                self.done.add(str(saved["id"]))


def _serialise(record: dict) -> str:
    """One JSONL line; an output that cannot be saved (e.g. a lone surrogate from a server) becomes a failed
    record of that example, redone on the next run, instead of stopping the run."""
    try:
        return json.dumps(record, ensure_ascii=False, allow_nan=False) + "\n"
    except (UnicodeEncodeError, ValueError) as err:
        reason = "text that is not valid Unicode" if isinstance(err, UnicodeEncodeError) else str(err)
        failed = {**record, "pred": "", "finish_reason": "error",
                  "error": f"the model's output could not be saved: it holds {reason}"}
        return json.dumps(failed, ensure_ascii=False, allow_nan=False) + "\n"


def merge_predictions(path: Path, order: list[str], required: list[str],
                      expected: dict[str, str] | None = None, model: str | None = None) -> dict | None:
    """Merge the main file, all shard files and the unselected records into the main file, in `order`, keeping
    only records of ids in `order` made from their `expected` content (by `model`, when given), and remove the
    shard files. The main file then holds exactly the `required` ids: records of other current ids (a larger
    --limit before) go to the unselected file, to be reused by a later run. Only when every `required` id has
    such a record; returns {"records", "dropped", "unselected", "digest", "sha256"} then (sha256: of the main
    file's bytes, which eval.py checks), else None. Safe to run twice at once: the main file is replaced
    atomically before any shard file is removed."""
    records, listed = best_records(path, expected=expected, model=model), set(order)
    current = {rid: r for rid, r in records.items() if rid in listed and _rank(r, expected, model) > 0}
    if not all(i in current for i in required):
        return None
    position, wanted = {rid: k for k, rid in enumerate(order)}, set(required)
    ordered = sorted((r for rid, r in current.items() if rid in wanted), key=lambda r: position[str(r["id"])])
    rest = sorted((r for rid, r in current.items() if rid not in wanted), key=lambda r: position[str(r["id"])])
    shards, unselected = shard_paths(path), unselected_path(path)
    # A resumed run with nothing to do leaves a main file that already is the merge: do not rewrite it.
    raw = path.read_bytes() if not shards and not rest and path.exists() else None
    in_place = raw is not None and list(records) == [str(r["id"]) for r in ordered] \
        and raw.count(b"\n") == len(ordered) and raw.endswith(b"\n")
    if rest:  # before the main file loses them
        unselected.parent.mkdir(parents=True, exist_ok=True)
        write_jsonl_atomic(unselected, rest)
    if not in_place:
        write_jsonl_atomic(path, ordered)
    for stale in shards + ([] if rest else [unselected]):
        stale.unlink(missing_ok=True)
    return {"records": len(ordered), "dropped": len(records) - len(current), "unselected": len(rest),
            "digest": examples_digest((r["id"], r.get("example_sha256")) for r in ordered),
            "sha256": hashlib.sha256(path.read_bytes()).hexdigest()[:16]}


def check_resume(sidecar: Path, fingerprint: dict, pred_path: Path) -> None:
    """A resumed file must come from the same model, template and generation settings. A sidecar with no
    records beside it (a run that stopped before its first batch) binds nothing."""
    if not sidecar.exists() or not has_records(pred_path):
        return
    try:
        previous = json.loads(sidecar.read_text(encoding="utf-8")).get("fingerprint", {})
    except (ValueError, AttributeError):
        raise RecordError(sidecar, None, "the run sidecar is unreadable; rerun with --overwrite") from None
    fingerprint = json_form(fingerprint)  # compare as saved: tuples become lists
    for key in ("model", "reference"):  # older sidecars: the models are now checked per record (model_sha256)
        previous.pop(key, None)
    changed = sorted(k for k in set(previous) | set(fingerprint) if previous.get(k) != fingerprint.get(k))
    if changed:
        raise ValueError(f"{sidecar}: the existing predictions were made with different {', '.join(changed)}; "
                         "rerun with --overwrite to start afresh, or choose another --out-dir")


def read_sidecar(sidecar: Path) -> dict:
    """The run sidecar's content, {} when there is none or it cannot be read."""
    try:
        content = json.loads(sidecar.read_text(encoding="utf-8"))
    except (OSError, ValueError, RecursionError):
        return {}
    return content if isinstance(content, dict) else {}


def sidecar_model(sidecar: Path) -> str | None:
    """The model_sha256 the run that wrote the sidecar stamps on its records (None: unknown, any model), for a
    merge done apart from the run (inference.py merge, torchrun's rank 0), which has no model of its own."""
    return read_sidecar(sidecar).get("model_sha256")


def json_form(value):
    """`value` as it reads back from a JSON file (tuples become lists), to compare with what a sidecar holds."""
    return json.loads(json.dumps(value))


def write_sidecar(sidecar: Path, content: dict) -> None:
    write_json_atomic(sidecar, content)


def record_output(sidecar: Path, merged: dict) -> None:
    """Note in the sidecar what the merged main file holds (a merge done apart from the run: torchrun's rank 0,
    inference.py merge), so eval.py can check the file against it."""
    if sidecar.is_file():
        content = json.loads(sidecar.read_text(encoding="utf-8"))
        content["output"] = output_entry(merged)
        write_sidecar(sidecar, content)


def output_entry(merged: dict) -> dict:
    """The sidecar's `output`: how many records the merged file holds, their (id, example) digest, and the
    sha256 of its bytes, so that any later edit of a line is seen (Eval/scoring/provenance.py)."""
    return {"records": merged["records"], "digest": merged["digest"], "sha256": merged["sha256"]}
