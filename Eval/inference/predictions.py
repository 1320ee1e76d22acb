"""A prediction file being written: content-aware resume, torn lines, shard files
(shards/<dataset>.I-of-K.jsonl), merge by id in dataset order, the sidecar. An example is done when
a record of it has no `error` and the current `example_sha256` and `model_sha256`.

Usage:
    out = PredictionFile(path, expected={e.id: e.sha256 for e in dataset.examples})
    merged = merge_predictions(path, order=[...], required=[...], expected={...})
"""

import hashlib
import json
import re
from pathlib import Path

from Eval.records import RecordError, examples_digest, file_sha256, sidecar_path
from Eval.storage import append_lines, jsonl_bytes, read_complete_lines, write_jsonl_atomic


def _read_records(path: Path, repair: bool) -> list[dict]:
    """Records of every complete line; a torn last line (a crash mid-write) is cut when `repair`."""
    records = []
    for number, line in read_complete_lines(path, repair)[0]:
        try:
            record = json.loads(line)
        except (ValueError, RecursionError) as err:  # UnicodeDecodeError is a ValueError
            raise RecordError(path, number, f"unreadable record ({type(err).__name__}: "
                                            f"{str(err)[:80]}); fix or remove the line, or rerun "
                                            "with --overwrite") from None
        if not isinstance(record, dict) or "id" not in record:
            raise RecordError(path, number, "not a prediction record with an id; remove the line, "
                                            "or rerun with --overwrite")
        records.append(record)
    return records


def write_path(path: Path, shard_id: int, num_shards: int) -> Path:
    shard = path.parent / "shards" / f"{path.stem}.{shard_id}-of-{num_shards}.jsonl"
    return path if num_shards == 1 else shard


def shard_paths(path: Path) -> list[Path]:
    """This dataset's shard files, by exact name (`mydata.v2.0-of-2.jsonl` is not `mydata`'s)."""
    pattern = re.compile(re.escape(path.stem) + r"\.(\d+)-of-(\d+)\.jsonl")
    return sorted(p for p in (path.parent / "shards").glob("*") if pattern.fullmatch(p.name))


def unselected_path(path: Path) -> Path:
    """Where a finished run keeps the records it did not select (--limit 10 after --limit 20)."""
    return path.parent / "shards" / f"{path.stem}.unselected.jsonl"


def _rank(record: dict, expected: dict[str, str] | None, model: str | None = None) -> int:
    """current and good (2) > current and failed (1) > of other data or another model (0)."""
    rid = str(record.get("id"))
    current = expected is None or record.get("example_sha256") == expected.get(rid)
    current = current and (model is None or record.get("model_sha256") == model)
    return (1 + (record.get("error") is None)) if current else 0


def best_records(path: Path, repair: Path | None = None, expected: dict[str, str] | None = None,
                 model: str | None = None) -> dict[str, dict]:
    """id -> the best record over the main, shard and unselected files (earlier files win ties).
    With `expected`, an id without a good current record takes a good one of the same content
    (a line inserted in a dataset whose ids are positions moves the examples after it)."""
    best: dict[str, dict] = {}
    good: dict[str, dict] = {}  # example_sha256 -> the first good record of the model
    for source in filter(Path.exists, [path, *shard_paths(path), unselected_path(path)]):
        for record in _read_records(source, repair=source == repair):
            rid = str(record.get("id"))
            rank = _rank(record, expected, model)
            if rid not in best or rank > _rank(best[rid], expected, model):
                best[rid] = record
            if record.get("example_sha256") and _rank(record, None, model) == 2 \
                    and "index" not in record:  # a TOFU / MUSE row's index is its position
                good.setdefault(record["example_sha256"], record)
    for rid, sha in (expected or {}).items():
        if sha in good and (rid not in best or _rank(best[rid], expected, model) < 2):
            best[rid] = {**good[sha], "id": rid}
    return best


class PredictionFile:
    """The records written so far for one dataset, seen against the dataset's current examples."""

    def __init__(self, path: Path, overwrite: bool = False, shard_id: int = 0, num_shards: int = 1,
                 expected: dict[str, str] | None = None, model: str | None = None):
        self.expected, self.model = expected, model
        self.write_path = out = write_path(path, shard_id, num_shards)
        if overwrite:
            every = [*shard_paths(path), unselected_path(path)] if num_shards == 1 else []
            for stale in [out, *every]:
                stale.unlink(missing_ok=True)
        size = out.stat().st_size if out.exists() else 0
        self.records = best_records(path, out, expected, model)
        self.torn_line_repaired = out.exists() and out.stat().st_size != size
        # done when the run starts (what it plans around; records appended later are not added)
        self.done = {rid for rid, r in self.records.items() if _rank(r, expected, model) == 2}

    def status(self, ids: list[str]) -> dict[str, int]:
        """How the examples stand: done, new, changed, made by another model, failed."""
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
        append_lines(self.write_path, [_serialise(record) for record in records])


def _serialise(record: dict) -> str:
    """One JSONL line; an unsavable output (a lone surrogate) becomes a failed record."""
    try:
        return json.dumps(record, ensure_ascii=False, allow_nan=False) + "\n"
    except (UnicodeEncodeError, ValueError) as err:
        reason = "text that is not valid Unicode" if isinstance(err, UnicodeEncodeError) else err
        failed = {**record, "pred": "", "finish_reason": "error",
                  "error": f"the model's output could not be saved: it holds {reason}"}
        return json.dumps(failed, ensure_ascii=False, allow_nan=False) + "\n"


def merge_predictions(path: Path, order: list[str], required: list[str],
                      expected: dict[str, str] | None = None,
                      model: str | None = None) -> dict | None:
    """Merge the dataset's files into the main file, in `order`, when every `required` id has a
    current record (else None); other current records and kept --perturb copies go to the
    unselected file. The main file is replaced atomically first: two merges at once are safe."""
    records, listed = best_records(path, expected=expected, model=model), set(order)
    current = {rid: r for rid, r in records.items() if rid in listed and _rank(r, expected, model)}
    if not all(i in current for i in required):
        return None
    wanted = set(required)
    ordered = [current[rid] for rid in order if rid in current and rid in wanted]
    rest = [current[rid] for rid in order if rid in current and rid not in wanted]
    # good records of --perturb copies of listed examples: kept aside for a later --perturb run
    copies = [r for rid, r in records.items() if rid not in listed and r.get("perturbation")
              and str(r.get("original_id")) in listed and _rank(r, None, model) == 2]
    rest += copies
    shards, unselected = shard_paths(path), unselected_path(path)
    if rest:  # before the main file loses them
        unselected.parent.mkdir(parents=True, exist_ok=True)
        write_jsonl_atomic(unselected, rest)
    # a resumed run with nothing to do leaves a main file that already is the merge: kept as is
    if shards or rest or not path.exists() or path.read_bytes() != jsonl_bytes(ordered):
        write_jsonl_atomic(path, ordered)
    for stale in shards + [sidecar_path(p) for p in shards] + ([] if rest else [unselected]):
        stale.unlink(missing_ok=True)
    outdated = sum(1 for rid in records if rid in listed and rid not in current)
    return {**_entry(ordered, path.read_bytes()), "unselected": len(rest), "outdated": outdated,
            "removed": len(records) - len(current) - len(copies) - outdated}


def other_model(before, now) -> bool:
    """Another backend, or another path and other files (identity() dicts): another model in a
    folder of the same name (echo's run, then hf's; run1/checkpoint-500, run2/checkpoint-500); the
    same path or files: the same model; unknown (API, older runs): no."""
    adapters, paths = ([m.get(key) if isinstance(m, dict) else None for m in (before, now)]
                       for key in ("adapter", "path"))
    if None not in adapters and adapters[0] != adapters[1]:
        return True
    return None not in paths and paths[0] != paths[1] and files_changed(before, now)


def files_changed(before, now) -> bool:
    """Whether both identity() dicts name their files' hash, and the hashes differ."""
    hashes = [m["files"].get("sha256") if isinstance(m, dict) and isinstance(m.get("files"), dict)
              else None for m in (before, now)]
    return None not in hashes and hashes[0] != hashes[1]


def check_resume(path: Path, fingerprint: dict, model: dict | None = None,
                 unknown: tuple = ()) -> bool:
    """A resumed file must come from the settings (less those `unknown`) and model of the run
    sidecar and the shard runs' own (a shard other than 0 writes one beside its file); a sidecar
    with no records beside it binds nothing. True: the file was changed by hand since a run
    finished it (its records cannot all be vouched for, whatever a rerun adds)."""
    shards, main = [p for p in shard_paths(path) if p.stat().st_size], sidecar_path(path)
    for sidecar in filter(Path.exists, map(sidecar_path, shards)):
        _same_settings(path, sidecar, fingerprint, model, unknown)
    if not main.exists() or not (shards or (path.exists() and path.stat().st_size)):
        return False
    run = _same_settings(path, main, fingerprint, model, unknown)
    output = run.get("output")  # what the last finished run wrote (None once a run started since)
    return bool(run.get("edited_after_run")) or isinstance(output, dict) and \
        bool(output.get("sha256")) and path.is_file() and \
        file_sha256(path) != output["sha256"]


def _same_settings(path: Path, sidecar: Path, fingerprint: dict, model: dict | None,
                   unknown: tuple = ()) -> dict:
    try:
        run = json.loads(sidecar.read_text(encoding="utf-8"))
        previous = run.get("fingerprint", {})
    except (ValueError, AttributeError):
        raise RecordError(sidecar, None, "the run sidecar is unreadable; rerun with --overwrite") \
            from None
    if other_model(run.get("model"), model):  # another setting of the same files: per record
        shown = [f"{m['path']} ({m['adapter']} backend)" if m.get("path") else
                 f"the {m['adapter']} backend's" for m in (run["model"], model)]
        raise ValueError(f"{path}: its records were made by another model, {shown[0]}, not this "
                         f"run's {shown[1]}; set --model-name NAME to keep both (or --overwrite to "
                         "replace them)")
    changed = [k for k in changed_settings(previous, json_form(fingerprint)) if k not in unknown]
    if changed and not files_changed(run.get("model"), model):  # changed files: all are redone
        raise ValueError(f"{sidecar}: the existing predictions were made with different "
                         f"{', '.join(changed)}; rerun with --overwrite (--shard runs: delete the "
                         "folder) to start afresh, or choose another --out-dir")
    return run


def changed_settings(previous: dict, fingerprint: dict) -> list[str]:
    """The settings two runs' fingerprints differ in (model, reference: checked per record)."""
    return sorted(k for k in {*previous, *fingerprint} - {"model", "reference"}
                  if previous.get(k) != fingerprint.get(k))


def read_sidecar(path: Path) -> dict:
    """The sidecar of the prediction file `path`; {} when there is none or it cannot be read."""
    try:
        content = json.loads(sidecar_path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError, RecursionError):
        return {}
    return content if isinstance(content, dict) else {}


def records_done(path: Path, expected: dict[str, str], required: list[str]) -> int:
    """How many `required` ids have a good record of their current content (`expected`: id ->
    content hash) by the model of the sidecar's run (None: any)."""
    saved = best_records(path, expected=expected, model=read_sidecar(path).get("model_sha256"))
    return sum(1 for i in required if saved.get(i, {}).get("example_sha256") == expected[i]
               and saved[i].get("error") is None)


def json_form(value):
    """`value` as it reads back from JSON (tuples become lists)."""
    return json.loads(json.dumps(value))


def file_entry(path: Path) -> dict | None:
    """output_entry of the file of a run stopped before its merge (an edit before the resume is
    then seen), first left with one record per id: the last, as a redo is appended; None: none."""
    if not path.is_file():
        return None
    kept = list({str(r["id"]): r for r in _read_records(path, repair=False)}.values())
    write_jsonl_atomic(path, kept)
    return _entry(kept, path.read_bytes())


def _entry(records: list[dict], raw: bytes) -> dict:
    """What the sidecar's `output` says of a file: its records, which examples, its bytes."""
    return {"records": len(records), "sha256": hashlib.sha256(raw).hexdigest()[:16],
            "digest": examples_digest((r["id"], r.get("example_sha256")) for r in records)}


def output_entry(merged: dict) -> dict:
    """The sidecar's `output`: a later edit is seen (Eval/scoring/provenance.py)."""
    return {key: merged[key] for key in ("records", "digest", "sha256")}
