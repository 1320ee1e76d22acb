"""`python eval.py judge`: an LLM judge grades each prediction of a folder against its references.

Usage:
    python eval.py judge --judge /path/to/judge-model [--model M | --pred-dir DIR] [--rubric graded] [--judge-mode logits]
    python eval.py judge --judge SERVED_NAME --judge-backend api -M base_url=http://127.0.0.1:11434/v1 -M tokenizer=PATH

Writes DIR/judge/<dataset>.<rubric>.jsonl (per record: id, score or null, raw verdict, cached, error when the call
failed), DIR/judge_result.json ({dataset: entry}; an entry holds the mean over parseable verdicts x 100, the counts
and ids of unparseable and failed verdicts, from_cache, model_calls, and what it was computed from: rubric,
rubric_sha, mode, judge (a short hash of the judge's identity), judge_adapter, source_sha256 of
DIR/<dataset>.jsonl), and the cache DIR/judge/cache.jsonl. The result file is merged per dataset: a run replaces
the entries it judged and keeps the others, except those whose prediction file is gone or changed since (dropped,
with a note). Every output is written only after all verdicts are computed. The judge model is loaded here,
only when asked, so plain scoring never imports torch. The rubric, the verdict parsing and the cache:
Eval/scoring/judge.py.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Callable

from Eval.commands import eval_command
from Eval.extract import run_extraction
from Eval.models.base import BaseLLM
from Eval.names import check_name, name_problem
from Eval.records import RecordError
from Eval.scoring.judge import (NO_VERDICT, PROMPTS, Judge, Rubric, VerdictCache, add_judge_model_arguments,
                                load_judge_model, load_rubric, question_of, summarize)
from Eval.scoring.provenance import file_sha256
from Eval.storage import write_json_atomic, write_jsonl_atomic
from Eval.tasks import TASKS


def counts_text(r: dict) -> str:
    return (f"unparseable {r['unparseable']}, failed {r['failed']}, from cache {r['from_cache']}, "
            f"model calls {r['model_calls']}")


def print_failed(where: str, r: dict) -> None:
    if r["failed"]:
        print(f"  {where}: {r['failed']} verdicts failed (ids {r['failed_ids'][:10]}); they are not cached, so "
              "rerunning the same command asks the judge again for exactly those")


def prediction(record: dict, dataset: str) -> str:
    # The judge sees what the metrics see: the task's extraction (e.g. reasoning blocks removed).
    task = TASKS.get(dataset)
    text = run_extraction(task.extract, record["pred"], record) if task else record["pred"]
    return "" if text is None else text


def record_id(record: dict, position: int):
    return record.get("id", record.get("_id", position + 1))


def open_cache(path: Path, say: Callable[[str], None]) -> VerdictCache:
    cache = VerdictCache(path)
    if cache.repaired:
        say(f"note: {path}: cut off a torn last line (a run killed while writing); its verdict is asked again")
    return cache


def merge_results(path: Path, fresh: dict, why_stale: Callable[[str, object], str | None],
                  say: Callable[[str], None], inside: str | None = None) -> tuple[dict, dict]:
    """The entries of the result file at `path` (under key `inside`, or at the top) that this run did not
    judge and that are still valid, plus `fresh`; and the old entries left out. An unreadable file is replaced."""
    old: dict = {}
    if path.is_file():
        try:
            saved = json.loads(path.read_text(encoding="utf-8"))
            old = saved.get(inside, {}) if inside else saved
            if not isinstance(old, dict):
                raise ValueError("not a JSON object")
        except (ValueError, AttributeError) as err:
            say(f"note: {path}: unreadable ({err}); it is replaced by this run's results")
            old = {}
    merged, dropped = {}, {}
    for name, entry in old.items():
        why = None if name in fresh else why_stale(name, entry)
        if why:
            say(f"note: {path}: dropped the result of {name!r}: {why}")
        (dropped if name in fresh or why else merged)[name] = entry
    merged.update(fresh)
    return dict(sorted(merged.items())), dropped


def source_problem(folder: Path, name: str, saved_sha: object) -> str | None:
    """Why a saved result no longer describes folder/<name>.jsonl, or None when it still does."""
    if name_problem(name):
        return name_problem(name)
    source = folder / f"{name}.jsonl"
    if not source.is_file():
        return f"its prediction file {source} is gone"
    if not isinstance(saved_sha, str):
        return f"it records no sha256 of {source} (judged by an older version); judge it again"
    if saved_sha != file_sha256(source):
        return f"{source} changed since it was judged; judge it again"
    return None


def judge_folder(pred_dir: Path, datasets: list[tuple[str, list[dict]]], model: BaseLLM, rubric: Rubric,
                 mode: str, max_length: int | None, say: Callable[[str], None] = print) -> dict:
    """Judge each (dataset, records) of pred_dir; write the per-record files and merge judge_result.json, only
    after every verdict is computed. Returns this run's entries."""
    judge_dir = pred_dir / "judge"
    judge = Judge(model, rubric, mode, open_cache(judge_dir / "cache.jsonl", say), max_length)
    rows, results = {}, {}
    for name, records in datasets:
        source_sha = file_sha256(pred_dir / f"{check_name(name, f'dataset of {pred_dir}')}.jsonl")
        judge.model_calls = judge.from_cache = 0
        fields = [{"question": question_of(r), "references": " | ".join(r["answers"]),
                   "prediction": prediction(r, name)} for r in records]
        verdicts = judge.verdicts(fields)
        ids = [record_id(r, k) for k, r in enumerate(records)]
        rows[name] = [{"id": i, "score": v["score"], "raw": v["raw"], "cached": v["cached"],
                       **({"error": v["error"]} if v.get("error") else {})} for i, v in zip(ids, verdicts)]
        results[name] = {**summarize(verdicts, ids), "from_cache": judge.from_cache,
                         "model_calls": judge.model_calls, **judge.provenance(), "source_sha256": source_sha}
    result_path = pred_dir / "judge_result.json"
    merged, dropped = merge_results(result_path, results, lambda name, entry: source_problem(
        pred_dir, name, entry.get("source_sha256") if isinstance(entry, dict) else None), say)
    judge_dir.mkdir(parents=True, exist_ok=True)
    for name, entry in dropped.items():  # a per-record file no entry describes any more would go stale unseen
        old_rubric = entry.get("rubric") if isinstance(entry, dict) else None
        replaced = results.get(name, {}).get("rubric") == old_rubric  # the same file, rewritten below
        if not (replaced or name_problem(name) or name_problem(old_rubric)):
            (judge_dir / f"{name}.{old_rubric}.jsonl").unlink(missing_ok=True)
    for name, name_rows in rows.items():
        write_jsonl_atomic(judge_dir / f"{name}.{rubric.name}.jsonl", name_rows)
    write_json_atomic(result_path, merged)
    return results


def add_arguments(parser) -> None:
    from Eval.scoring.folders import add_folder_arguments

    add_judge_model_arguments(parser)
    parser.add_argument("--rubric", default="binary", help="prompts/judge_<RUBRIC>.txt")
    add_folder_arguments(parser)


@eval_command("judge", help="an LLM judge grades each prediction against its references")
def run(args) -> int:
    from Eval.scoring.folders import find_pred_dirs, load_folder

    problems, notes = [], []
    try:
        pred_dirs, _ = find_pred_dirs(args.pred_dir, args.model, args.pred_root, notes)
        loaded = {d: load_folder(d, args.datasets, problems, notes) for d in pred_dirs}
        if problems:
            raise ValueError("; ".join(problems))
        rubric = load_rubric(args.rubric, PROMPTS)
        model = load_judge_model(args)
        for folder, items in loaded.items():
            datasets = [(task.name, records) for task, records, _ in items]
            results = judge_folder(folder, datasets, model, rubric, args.judge_mode, args.judge_max_length)
            for name, r in results.items():
                head = f"judge {r['score']} over {r['scored']}" if r["scored"] else f"judge {NO_VERDICT} over 0"
                print(f"{folder.name}/{name}: {head} of {r['n']} verdicts ({counts_text(r)})")
                print_failed(f"{folder.name}/{name}", r)
        return 0
    except (FileNotFoundError, ValueError, OSError, RecordError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
