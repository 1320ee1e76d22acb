"""BERGEN experiment folders read as they are (never changed): each `experiments/NAME/` is a row,
each `eval_<split>_out.json` a dataset named after its split. What each file becomes: docs/rag.md.

Usage:
    python eval.py --pred-root experiments      # every experiment folder, one table row each
"""
from __future__ import annotations

import json
import re
from pathlib import Path

from Eval.metrics.retrieval import read_run
from Eval.scoring.breakdowns import from_v2_pred_py
from Eval.records import (RecordError, iter_json_objects, read_records, read_text_file,
                          validate_record)
from Eval.tasks import Task

OUT_FILE = re.compile(r"^eval_([A-Za-z0-9-]+)_out\.json$")
BERGEN_FIELD = {"pred": "response", "answers": "label"}  # our record's field -> BERGEN's
TEXT_METRICS = ("match", "exact_match", "f1", "precision", "recall", "recall_char3gram", "rouge_1",
                "rouge_2", "rouge")


def out_files(folder: Path) -> list[Path]:
    return sorted(f for f in folder.glob("eval_*_out.json") if split_of(f))


def split_of(path: Path) -> str | None:
    """The split an eval_<split>_out.json file holds; None for any other file."""
    found = OUT_FILE.match(path.name)
    return found.group(1) if found else None


def dataset_of(path: Path) -> str:
    """The dataset a prediction file holds: its split for BERGEN's file, else the file stem."""
    return split_of(path) or path.stem


def prediction_path(folder: Path, dataset: str) -> Path:
    """The file holding `dataset`'s predictions: <dataset>.jsonl, else BERGEN's
    eval_<dataset>_out.json when only that exists."""
    bergen = folder / f"eval_{dataset}_out.json"
    plain = folder / f"{dataset}.jsonl"
    return bergen if bergen.is_file() and not plain.exists() and split_of(bergen) else plain


def read_predictions(path: Path) -> list[dict]:
    """The records of a prediction file of any form: ours (TinyEval's, LongBench's), BERGEN's, or
    LongBench v2's pred.py output."""
    return read_out(path) if split_of(path) else read_records(path, from_v2_pred_py)


def run_file(folder: Path, split: str) -> Path | None:
    """The page-level ranking the generator was given: the reranked run, else the retrieved one
    (the run.*.trec files beside them hold passage ids: -S run=FILE -S pages=MAP scores those)."""
    found = (folder / f"eval_{split}_{kind}_run.trec" for kind in ("reranking", "ranking"))
    return next((path for path in found if path.is_file()), None)


def read_out(path: Path) -> list[dict]:
    """The records of one eval_<split>_out.json in our record form, each checked (file, line)."""
    run_path = run_file(path.parent, split_of(path))
    run = read_run(run_path) if run_path else {}
    records = []
    for line, row in iter_json_objects(path):
        if not isinstance(row, dict) or not {"q_id", "response", "label"} <= set(row):
            raise RecordError(path, line, "a BERGEN output row needs q_id, response and label")
        relevant = judged_pages(row.get("ranking_label"), path, line)
        record = {"id": str(row["q_id"]), "pred": row["response"], "answers": row["label"],
                  "question": row.get("question"), "relevant": relevant or None,
                  "retrieved": run.get(str(row["q_id"]))}
        try:
            records.append(validate_record(record, path, line))
        except RecordError as err:  # the message names BERGEN's field, not ours
            problem = re.sub(r"field '(pred|answers)'",
                             lambda found: f"field {BERGEN_FIELD[found[1]]!r}", err.problem)
            raise RecordError(path, line, problem) from None
    if not records:
        raise RecordError(path, None, "file is empty: no prediction records")
    return records


def judged_pages(labels: object, path: Path, line: int) -> dict[str, int]:
    """ranking_label as BERGEN writes it -> {page id: 1}, its qrels; anything else is refused."""
    def page_ids(group: object) -> list:
        return group if isinstance(group, list) else [group]

    groups = [] if labels is None else labels
    if not isinstance(groups, list) or not all(
            isinstance(doc, (str, int)) and not isinstance(doc, bool)
            for group in groups for doc in page_ids(group)):
        raise RecordError(path, line, "ranking_label must be a list of page-id lists, as BERGEN "
                                      f"writes it, found {json.dumps(labels)[:80]}")
    return {str(doc): 1 for group in groups for doc in page_ids(group)}


def bergen_task(path: Path) -> Task:
    """BERGEN's metrics for this split; P_1 and recall_<generation_top_k> when it has a run."""
    ranking = ()
    if run_file(path.parent, split_of(path)):
        top_k = read_config(path.parent).get("generation_top_k", 5)  # BERGEN's default
        if not isinstance(top_k, int) or isinstance(top_k, bool) or top_k < 1:
            raise RecordError(path.parent / "config.yaml", None,
                              f"generation_top_k must be a positive integer, found {top_k!r}")
        ranking = ("P_1", f"recall_{top_k}")
    return Task(split_of(path), TEXT_METRICS + ranking, 0, extract=(),
                description="a BERGEN experiment's split")


def read_config(folder: Path) -> dict:
    """config.yaml of an experiment folder; {} when it has none or it is empty."""
    import yaml

    path = folder / "config.yaml"
    if not path.is_file():
        return {}
    try:
        config = yaml.safe_load(read_text_file(path))  # not UTF-8: an error naming file, line
    except yaml.YAMLError as err:
        raise RecordError(path, None, f"not valid YAML: {err}") from None
    if not isinstance(config, (dict, type(None))):
        raise RecordError(path, None, "must be a mapping of settings (as BERGEN writes it), "
                                      f"found {type(config).__name__}")
    return config or {}


def experiment_config(folder: Path, split: str) -> dict[str, str]:
    """The columns BERGEN's print_results shows beside the metrics (docs/rag.md); {} if none."""
    columns: dict[str, str] = {}
    config = read_config(folder)
    if config:
        for part in ("retriever", "reranker", "generator"):  # print_results: the basename
            name = _at(config, part, "init_args", "model_name")
            columns[part] = Path(name).name if isinstance(name, str) else _as_written(name, "none")
        for key in ("retrieve_top_k", "rerank_top_k", "generation_top_k"):
            columns[key] = str(config.get(key, "-"))
        query = _at(config, "dataset", split, "query", "init_args", "_target_")
        columns["query_dataset"] = (query.rsplit(".", 1)[-1] if isinstance(query, str)
                                    else _as_written(query, "-"))
    timing = folder / f"eval_{split}_generation_time.json"
    if timing.is_file():
        try:
            times = json.loads(read_text_file(timing))
        except ValueError as err:
            raise RecordError(timing, None, f"not valid JSON: {err}") from None
        if isinstance(times, dict) and "Generation time" in times:
            columns["generation_time"] = str(times["Generation time"])
    return columns


def _at(config: dict, *keys: str) -> object:
    """config[k1][k2]...; None where a key is missing, a non-mapping on the way returned itself."""
    value: object = config
    for key in keys:
        if not isinstance(value, dict):
            return value
        value = value.get(key)
    return value


def _as_written(value: object, missing: str) -> str:
    return missing if value is None else json.dumps(value, ensure_ascii=False, default=str)
