"""The task of a dataset with no row in Eval/tasks.py, as inference.py saved it in the run sidecar
(`"task"`), checked field by field (anyone may edit the sidecar) before eval.py scores with it.

Usage:
    task = saved_task(Path("pred/m/my_qa.jsonl"), Path("pred/m/my_qa.run.json"))  # folders.py
"""
from __future__ import annotations

import dataclasses
import json
from pathlib import Path

from Eval.extract import EXTRACTORS
from Eval.metrics.registry import METRICS
from Eval.names import name_problem
from Eval.records import RecordError
from Eval.storage import StorageError, read_regular_bytes
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
