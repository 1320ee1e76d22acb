"""Whether a prediction file still is what inference.py wrote (its sidecar `<dataset>.run.json`
describes both), for the data it was run on: ok, partial, modified, data_changed or unchecked
(docs/scoring.md says what each means).

Usage:
    check = check_prediction_file(Path("pred/m/custom_en.jsonl"), records)   # status, warnings
"""
from __future__ import annotations

import functools
import os
from pathlib import Path

from Eval.names import name_problem
from Eval.records import RecordError, examples_digest, file_sha256, sidecar_path
from Eval.scoring.bergen import prediction_path, run_file, split_of
from Eval.storage import StorageError, read_json_object


def _coverage(records: list[dict], data: dict) -> str:
    """'5 of the dataset's 25 examples'; for a --perturb run the originals, then with copies."""
    copies = data.get("copies") or 0
    if not copies or not isinstance(data.get("examples"), int):
        return f"{len(records)} of the dataset's {data.get('examples')} examples"
    originals = sum(1 for r in records if r.get("perturbation") is None)
    return (f"{originals} of the dataset's {data['examples'] // (1 + copies)} examples, with their "
            f"{copies} perturbed cop{'y' if copies == 1 else 'ies'} each: {len(records)} of "
            f"{data['examples']} records")


def check_prediction_file(path: Path, records: list[dict]) -> dict:
    sidecar, unreadable = read_json_object(sidecar_path(path))
    if unreadable:  # scored as "unchecked", an edited or partial file would lose its mark
        raise RecordError(sidecar_path(path), None, "a damaged run sidecar (not a JSON object): "
                          f"remake {path.name} (inference.py --overwrite), or delete the sidecar "
                          "to score the file as unchecked")
    data, output = sidecar.get("data"), sidecar.get("output")
    if not isinstance(data, dict):
        return {"status": "unchecked", "warnings": [], "records": len(records)}
    if not isinstance(output, dict):  # a run began and did not finish: killed (or still running)
        why = (f"the run that wrote it did not finish ({len(records)} records; the dataset has "
               f"{data.get('examples')} examples); rerun inference.py to finish it")
        return {"status": "partial", "records": len(records), "warnings": [why],
                "dataset_examples": data.get("examples")}
    digest = examples_digest((r.get("id"), r.get("example_sha256")) for r in records)
    warnings, statuses = [], []
    edited = sidecar.get("edited_after_run") or \
        "sha256" in output and file_sha256(path) != output["sha256"]
    if digest != output.get("digest") or edited:
        statuses.append("modified")
        held = f"{len(records)} records, not the {output.get('records')}" \
            if len(records) != output.get("records") else f"{len(records)} records, as many as"
        warnings.append(f"the file was changed after inference.py wrote it (it holds {held} "
                        "inference.py wrote; lines appended, edited or removed, or another file "
                        "copied over it): its score is not the model's; rerun inference.py "
                        "with --overwrite to remake it")
    elif digest != data.get("digest"):
        statuses.append("partial")
        limit = f" (a --limit {data['limit']} run)" if data.get("limit") else ""
        older = isinstance(data.get("examples"), int) and len(records) >= data["examples"]
        warnings.append(f"{len(records)} records, not all of the dataset's current examples: "
                        "some were made from an earlier version of it, and the run that redoes "
                        "them did not finish; rerun inference.py to finish it" if older else
                        f"the file covers {_coverage(records, data)}{limit}; the score is for "
                        "that part only")
    changed = changed_dataset(sidecar)
    if changed:
        statuses.append("data_changed")
        warnings.append(f"the dataset {changed} changed since these predictions were "
                        "made; rerun inference.py (it redoes only the examples that changed)")
    worst = min(statuses, key=("modified", "data_changed", "partial").index, default="ok")
    return {"status": worst, "warnings": warnings, "data_changed": bool(changed),
            "records": len(records), "dataset_examples": data.get("examples")}


def changed_dataset(sidecar: dict) -> Path | None:
    """The run's dataset file if it changed since: where the run read it, else the path it was
    given (a project moved since: from here); a file gone from both is unknown, not changed.
    MUSE's knowmem runs also read a file of few-shot examples (data["shots"])."""
    data = sidecar.get("data") if isinstance(sidecar.get("data"), dict) else {}
    shots = data.get("shots") if isinstance(data.get("shots"), dict) else {}
    source = (sidecar.get("source") or {}).get("path")
    read = [((data.get("path"), source), data.get("file_sha256"))]
    read += [((shots.get("path"),), shots.get("file_sha256"))] if shots else []
    for given, sha256 in read:
        paths = [Path(p) for p in given if isinstance(p, str) and os.path.isfile(p)]
        try:
            stat = paths[0].stat() if paths else None
            if stat and _cached_sha256(str(paths[0]), stat.st_mtime_ns, stat.st_size) != sha256:
                return paths[0]
        except (OSError, StorageError):
            continue
    return None


@functools.lru_cache(maxsize=256)  # a dataset or a qrels file every model folder's entries read:
def _cached_sha256(path: str, mtime_ns: int, size: int) -> str:  # hashed once while unchanged
    return file_sha256(Path(path))


def not_the_models(check: dict) -> list[str]:
    """The warnings of a data check that say the scores are not the model's on today's data
    (a file edited after the run, or data changed since); a partial file's say nothing of that."""
    return check["warnings"] if check["status"] in ("modified", "data_changed") else []


def folder_name(folder: Path, home: Path) -> str:
    """A prediction folder as a diff / compare file in `home` names it: relative, so the report
    still finds it once the root has moved (an older file's absolute name reads back as it is)."""
    try:
        return os.path.relpath(folder.resolve(), home.resolve())
    except ValueError:  # another drive (Windows): no relative path
        return str(folder.resolve())


def source_problem(folder: Path, name: str, saved_sha: object) -> str | None:
    """Why a saved judge / compare / diff result no longer fits its prediction file, or None."""
    if problem := name_problem(name):
        return problem
    source = prediction_path(folder, name)
    if not source.is_file():
        return f"its prediction file {source} is gone"
    if not isinstance(saved_sha, str):
        return f"it records no sha256 of {source} (made by an older version); make it again"
    if saved_sha != file_sha256(source):
        return f"{source} changed since; make it again"
    return None


def _sha256_or_none(path: Path) -> str | None:
    try:
        stat = path.stat()
        return _cached_sha256(str(path), stat.st_mtime_ns, stat.st_size)
    except (OSError, StorageError):  # gone: a changed input too (the metric's error names it)
        return None


def inputs_of(path: Path, task) -> dict:
    """{"inputs": {file: sha256}} of the files besides `path` its result is computed from, or {}:
    the -S files of its metrics (absolute paths) and a BERGEN folder's ranking run and
    config.yaml (by name: they move with the folder); entry_is_current sees a change to one."""
    from Eval.metrics import METRICS  # the registry imports every metric module

    keys = {key for name in task.metrics for key in METRICS[name].files}
    files = [os.path.abspath(value) for key, value in task.metric_args if key in keys]
    if split_of(path):
        found = [run_file(path.parent, split_of(path)), path.parent / "config.yaml"]
        files += [p.name for p in found if p is not None and p.is_file()]
    return {"inputs": {f: _sha256_or_none(path.parent / f) for f in files}} if files else {}


def inputs_changed(folder: Path, source: dict) -> bool:
    """Whether a file a result entry was computed from (inputs_of) changed or is gone since."""
    inputs = source.get("inputs")
    return isinstance(inputs, dict) and any(_sha256_or_none(folder / name) != sha
                                            for name, sha in inputs.items())
