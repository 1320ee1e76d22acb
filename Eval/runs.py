"""A prediction file being written: resume, torn-line repair, the run sidecar.

`pred/<model>/<dataset>.jsonl` is appended and flushed batch by batch, so a killed run loses at most the batch in
flight. Reopening it repairs a torn last line, keeps every complete record, drops failed records (an `error`
field) so that they are run again, and reports which ids are done. When every example is done the file is
rewritten in dataset order. `pred/<model>/<dataset>.run.json` (the sidecar) records how the file was made; a
resumed run must match it, or the user passes --overwrite.

Usage:
    out = PredictionFile(path, overwrite=False)
    todo = [e for e in examples if e.id not in out.done_ids]
    out.append(records)          # one batch
    out.finish(order=[e.id for e in examples])
"""
from __future__ import annotations

import json
import os
from pathlib import Path

from Eval.records import RecordError, write_json_atomic, write_jsonl_atomic


def _read_complete_lines(path: Path) -> list[dict]:
    """Records of every complete line; a torn last line (a crash mid-write) is cut off the file."""
    raw = path.read_bytes()
    end = raw.rfind(b"\n") + 1
    records, lines = [], raw[:end].split(b"\n")[:-1]
    for number, line in enumerate(lines, 1):
        try:
            records.append(json.loads(line))
        except (json.JSONDecodeError, UnicodeDecodeError) as err:
            raise RecordError(path, number, f"unreadable record ({err}); fix or remove the line, or rerun with "
                                            "--overwrite") from None
    if end < len(raw):
        with open(path, "r+b") as f:
            f.truncate(end)
    return records


class PredictionFile:
    def __init__(self, path: Path, overwrite: bool = False):
        self.path = path
        self.torn_line_repaired = False
        self.failed_to_redo = 0
        kept: list[dict] = []
        if path.exists() and not overwrite:
            size = path.stat().st_size
            records = _read_complete_lines(path)
            self.torn_line_repaired = path.stat().st_size != size
            kept = [r for r in records if r.get("error") is None]
            self.failed_to_redo = len(records) - len(kept)
            if self.failed_to_redo:  # failed records are redone, so drop them from the file now
                write_jsonl_atomic(path, kept)
        elif overwrite and path.exists():
            path.unlink()
        self.records = {str(r["id"]): r for r in kept if "id" in r}

    @property
    def done_ids(self) -> set[str]:
        return set(self.records)

    def append(self, records: list[dict]) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.path, "a", encoding="utf-8") as f:
            for record in records:
                f.write(json.dumps(record, ensure_ascii=False) + "\n")
            f.flush()
            os.fsync(f.fileno())
        self.records.update((str(r["id"]), r) for r in records)

    def finish(self, order: list[str]) -> bool:
        """Rewrite the file in dataset order once every id in `order` is present; True if complete."""
        if not all(i in self.records for i in order):
            return False
        write_jsonl_atomic(self.path, [self.records[i] for i in order])
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
