"""What a dataset is scored with, as saved: the task of a dataset with no row in Eval/tasks.py, as
inference.py saved it in the run sidecar (`"task"`), checked field by field (anyone may edit the
sidecar) before eval.py scores with it; and the options a result entry was scored with.

Usage:
    task = saved_task(Path("pred/m/my_qa.jsonl"), Path("pred/m/my_qa.run.json"))  # folders.py
    metrics, metric_args, variants, time_limit = scored_options(Path("pred/m"), "my_qa")
"""
from __future__ import annotations

import dataclasses
import json
from pathlib import Path

from Eval.extract import EXTRACTORS
from Eval.metrics.registry import METRICS
from Eval.names import name_problem
from Eval.pricing import is_number
from Eval.records import RecordError
from Eval.scoring.breakdowns import V2_VARIANTS
from Eval.storage import StorageError, read_json_object, read_regular_bytes
from Eval.tasks import Task


def saved_task(path: Path, sidecar: Path) -> Task:
    """The task saved in the prediction file's run sidecar; RecordError naming the sidecar when
    it cannot be read or is not a usable task."""
    try:
        saved = json.loads(read_regular_bytes(sidecar))
        task_data = saved.get("task") if isinstance(saved, dict) else None
        saved_name = task_data.get("name") if isinstance(task_data, dict) else None
        if saved_name is not None and name_problem(saved_name):  # a path: the data is damaged
            raise ValueError(f"task.name {saved_name!r} is not a dataset name "
                             f"({name_problem(saved_name)})")
        return task_from_dict(task_data, path.stem)
    except (StorageError, ValueError, RecursionError, KeyError) as err:
        why = f"cannot tell how to score {path.name}: {err.args[0] if err.args else err}"
        raise RecordError(sidecar, None, why) from None


def task_from_dict(data: object, name: str) -> Task:
    """A Task saved by inference.py in a run sidecar, checked field by field (it may have been
    edited); ValueError says which is wrong. `name` (the file's stem) names the dataset, always."""
    if not isinstance(data, dict):
        raise ValueError("'task' must be an object with the dataset's metrics, found "
                         f"{type(data).__name__}")
    for field in dataclasses.fields(Task):  # parsed JSON: a bool is no int here
        value = data.get(field.name)
        if field.name == "name" or field.name not in data:
            continue
        if field.type in ("int", "bool", "str") and type(value).__name__ != field.type:
            raise ValueError(f"task.{field.name} must be {field.type}, found {value!r}")
        if field.type == "tuple[str, ...]" and not (
                isinstance(value, list) and all(isinstance(x, str) for x in value)):
            raise ValueError(f"task.{field.name} must be a list of strings, found {value!r}")
    if not data.get("metrics"):
        raise ValueError("task.metrics must be a non-empty list of metric names, found "
                         f"{data.get('metrics')!r}")
    for metric_name in data["metrics"]:
        METRICS[metric_name]  # KeyError with close names
    if any(step not in EXTRACTORS for step in data.get("extract", [])):
        raise ValueError("task.extract must list extraction steps of Eval/extract.py "
                         f"({', '.join(sorted(EXTRACTORS))}), found {data['extract']!r}")
    fields = {f.name for f in dataclasses.fields(Task)} - {"name"}
    values = {k: tuple(v) if isinstance(v, list) else v for k, v in data.items() if k in fields}
    return Task(**{"max_new_tokens": 0, **values, "name": name})


def as_scored(entry: object) -> tuple:
    """(metrics, -S pairs, --v2-variant, --sample-time-limit) a result entry was scored with;
    the task's defaults for what it does not say (entries of older versions, a damaged file)."""
    if not isinstance(entry, dict) or not isinstance(entry.get("metrics"), dict):
        return None, (), (), None
    run = entry.get("scored_with") if isinstance(entry.get("scored_with"), dict) else {}
    pairs = run.get("metric_args", [])
    pairs = pairs if isinstance(pairs, list) and all(
        isinstance(kv, list) and len(kv) == 2 and all(isinstance(x, str) for x in kv)
        for kv in pairs) else []
    variants = [v for v in run.get("v2_variant", []) if v in V2_VARIANTS] \
        if isinstance(run.get("v2_variant"), list) else []
    limit = run.get("sample_time_limit")
    limit = float(limit) if is_number(limit) and limit > 0 else None
    return tuple(entry["metrics"]) or None, tuple(map(tuple, pairs)), tuple(variants), limit


def scored_options(folder: Path, dataset: str) -> tuple:
    """as_scored of the dataset's entry in the folder's result_detail.json."""
    details, _ = read_json_object(folder / "result_detail.json")
    return as_scored(details.get(dataset))
