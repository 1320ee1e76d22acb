"""A prediction file being written: resume, torn-line repair, shards, the run sidecar.

`pred/<model>/<dataset>.jsonl` is appended and flushed batch by batch, so a killed run loses at most the batch in
flight. A sharded run (torchrun ranks, or `--num-shards K --shard-id I` processes) appends to its own
`pred/<model>/shards/<dataset>.I-of-K.jsonl` instead. Reopening reads the main file and every shard file (any K),
repairs a torn last line of the file it writes, and treats an id as done when some file holds a record for it
without an `error`; failed ids are run again. Finishing merges all files by id into the main file in dataset
order (a good record beats a failed one) and removes the shard files, so resuming does not depend on how many
shards the earlier run had. `pred/<model>/<dataset>.run.json` (the sidecar) records how the file was made; a
resumed run must match it, or the user passes --overwrite.

Usage:
    out = PredictionFile(path, overwrite=False, shard_id=0, num_shards=1)
    todo = [e for e in examples if e.id not in out.done_ids]
    out.append(records)          # one batch
    merge_predictions(path, order=[e.id for e in all_examples], required=[e.id for e in examples])
"""
from __future__ import annotations

import json
import os
from pathlib import Path

from Eval.records import RecordError, write_json_atomic, write_jsonl_atomic


def _read_complete_lines(path: Path, repair: bool) -> list[dict]:
    """Records of every complete line. A torn last line (a crash mid-write) is cut off the file when
    `repair` (the file this process writes); another process's file is only read."""
    raw = path.read_bytes()
    end = raw.rfind(b"\n") + 1
    records, lines = [], raw[:end].split(b"\n")[:-1]
    for number, line in enumerate(lines, 1):
        try:
            records.append(json.loads(line))
        except (json.JSONDecodeError, UnicodeDecodeError) as err:
            raise RecordError(path, number, f"unreadable record ({err}); fix or remove the line, or rerun with "
                                            "--overwrite") from None
    if repair and end < len(raw):
        with open(path, "r+b") as f:
            f.truncate(end)
    return records


def shard_path(path: Path, shard_id: int, num_shards: int) -> Path:
    return path.parent / "shards" / f"{path.stem}.{shard_id}-of-{num_shards}.jsonl"


def shard_paths(path: Path) -> list[Path]:
    return sorted((path.parent / "shards").glob(f"{path.stem}.*-of-*.jsonl"))


def best_records(path: Path, repair: Path | None = None) -> dict[str, dict]:
    """id -> record over the main file and all shard files; a record without `error` beats a failed one."""
    best: dict[str, dict] = {}
    for source in [path, *shard_paths(path)]:
        if not source.exists():
            continue
        for record in _read_complete_lines(source, repair=source == repair):
            rid = str(record.get("id"))
            if rid not in best or (best[rid].get("error") is not None and record.get("error") is None):
                best[rid] = record
    return best


class PredictionFile:
    def __init__(self, path: Path, overwrite: bool = False, shard_id: int = 0, num_shards: int = 1):
        self.path = path
        self.write_path = path if num_shards == 1 else shard_path(path, shard_id, num_shards)
        if overwrite:
            for stale in [self.write_path, *(shard_paths(path) if num_shards == 1 else [])]:
                stale.unlink(missing_ok=True)
        size = self.write_path.stat().st_size if self.write_path.exists() else 0
        records = best_records(path, repair=self.write_path)
        self.torn_line_repaired = self.write_path.exists() and self.write_path.stat().st_size != size
        self.done = {rid for rid, r in records.items() if r.get("error") is None}
        self.failed_to_redo = len(records) - len(self.done)

    @property
    def done_ids(self) -> set[str]:
        return set(self.done)

    def append(self, records: list[dict]) -> None:
        self.write_path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.write_path, "a", encoding="utf-8") as f:
            for record in records:
                f.write(json.dumps(record, ensure_ascii=False) + "\n")
            f.flush()
            os.fsync(f.fileno())
        self.done.update(str(r["id"]) for r in records if r.get("error") is None)


def merge_predictions(path: Path, order: list[str], required: list[str]) -> bool:
    """Merge the main file and all shard files by id into the main file, in `order` (ids the dataset does not
    list go last), and remove the shard files. Only when every `required` id has a record; True if so.
    Safe to run twice at once: the main file is replaced atomically before any shard file is removed."""
    records = best_records(path)
    if not all(i in records for i in required):
        return False
    position = {rid: k for k, rid in enumerate(order)}
    ordered = sorted(records.values(), key=lambda r: position.get(str(r.get("id")), len(order)))
    write_jsonl_atomic(path, ordered)
    for shard in shard_paths(path):
        shard.unlink(missing_ok=True)
    return True


def sidecar_path(pred_path: Path) -> Path:
    return pred_path.with_name(pred_path.stem + ".run.json")


def check_resume(sidecar: Path, fingerprint: dict) -> None:
    """A resumed file must come from the same model, template and generation settings."""
    if not sidecar.exists():
        return
    previous = json.loads(sidecar.read_text(encoding="utf-8")).get("fingerprint", {})
    fingerprint = json.loads(json.dumps(fingerprint))  # compare as saved: tuples become lists
    changed = sorted(k for k in set(previous) | set(fingerprint) if previous.get(k) != fingerprint.get(k))
    if changed:
        raise ValueError(f"{sidecar}: the existing predictions were made with different {', '.join(changed)}; "
                         "rerun with --overwrite to start afresh, or choose another --out-dir")


def write_sidecar(sidecar: Path, content: dict) -> None:
    write_json_atomic(sidecar, content)
