"""Writing what scoring found: result.json (TinyEval's shape), details, per-example scores, tables.

Files written for a prediction folder DIR (nothing in DIR is ever named *.jsonl by us, so a rerun of
eval.py never mistakes its own output for predictions):
    DIR/result.json               {dataset: headline score}, exactly TinyEval's result file
    DIR/result_detail.json        per dataset: every metric unrounded and rounded with its 95% interval
                                  (ci95, ci95_method; Eval/scoring/intervals.py), n, LongBench-E length
                                  buckets (empty bucket = null), duplicates, extraction failures, failed
                                  records, records without references / classes, zeroed-by-exception counts,
                                  metric versions, skipped records (not run, out of n) with their reasons,
                                  reasoning-output counts, the task's breakdown (LongBench v2's table), the
                                  data check against the run sidecar, and what the entry was computed from
                                  (the prediction file's sha256, the set of examples), and `usage`: the
                                  records' examples, prompt / generated / cut tokens (both --cot passes),
                                  seconds (sum of latency_s), generated tokens/s, the API server's own
                                  counts when present, and with --price cost_usd and the price entry used
    DIR/result_usage.json         the same usage per dataset and its total over the folder's datasets
    DIR/per_example/<ds>.scores.jsonl   one line per prediction line: id, scores, extraction, zeroed reason
and ROOT/results.md (every report section of Eval/scoring/sections/: the models x datasets scores with their
marks, intervals, length buckets, breakdowns, robustness, usage and cost, judge, compare, diff and unlearning
tables) and ROOT/results.csv (one row per model and dataset).

Scoring a subset (--datasets) updates those entries and keeps the others, but only those whose prediction file
is unchanged since they were scored: an entry whose file changed or is gone is dropped, with a note, so no stale
score survives. The three outputs are committed together (Eval/storage.py commit_files): a kill cannot leave
result.json, result_detail.json and per_example/ from two runs.

Usage:
    outputs = folder_outputs(DIR, results, sources, full_run=True)      # nothing written yet
    commit_folder(DIR, outputs)
    text, notes = write_models_table(ROOT)      # ROOT/results.md and .csv; the same tables as terminal text
"""
from __future__ import annotations

import csv
import dataclasses
import hashlib
import io
import json
from pathlib import Path

from Eval.names import name_problem
from Eval.pricing import Price, total_usage, with_cost
from Eval.scoring.provenance import file_sha256
from Eval.scoring.scorer import text_table
from Eval.scoring.sections import Results, render_markdown, render_text, tables
from Eval.scoring.sections.scores import (CLEAN_STATUSES, ci_text, column_sets, n_text, score_text, skipped_count,
                                          status_of)
from Eval.storage import StorageError, commit_files, json_bytes, jsonl_bytes, regular_file_problem

RESULT_FILES = ("result.json", "result_detail.json", "result_usage.json")


@dataclasses.dataclass
class FolderOutputs:
    files: dict[str, bytes]  # relative path -> bytes, committed together
    delete: list[str]
    details: dict[str, dict]  # the merged result_detail.json content
    notes: list[str]


def example_set(records: list[dict]) -> str:
    """Which examples a file holds, order ignored: ids (and content hashes) when present, else each line's
    references and length. Two cells of a table are comparable only when these agree."""
    keys = []
    for r in records:
        rid = r.get("id", r.get("_id"))
        key = [str(rid), r.get("example_sha256")] if rid is not None else [None, r["answers"], r.get("length")]
        keys.append(json.dumps(key, ensure_ascii=False, sort_keys=True))
    return hashlib.sha256("\n".join(sorted(keys)).encode("utf-8")).hexdigest()[:16]


def entry_is_current(folder: Path, name: str, entry: object) -> str | None:
    """Why a kept result entry can no longer stand, or None when its prediction file is unchanged."""
    if name_problem(name):
        return "is not a dataset name"
    source = entry.get("source") if isinstance(entry, dict) else None
    path = folder / f"{name}.jsonl"
    if regular_file_problem(path):
        return "has no prediction file any more"
    if not isinstance(source, dict) or "sha256" not in source:
        return "was scored by an older version of eval.py"
    try:
        return None if file_sha256(path) == source["sha256"] else "has predictions that changed since it was scored"
    except StorageError:
        return "has no readable prediction file"


def read_details(folder: Path) -> tuple[dict, list[str]]:
    path = folder / "result_detail.json"
    if regular_file_problem(path):
        return {}, []
    try:
        details = json.loads(path.read_text(encoding="utf-8"))
        if isinstance(details, dict):
            return details, []
    except (ValueError, RecursionError):
        pass
    return {}, [f"{path}: unreadable; rebuilt from the datasets scored now"]


def folder_outputs(folder: Path, results: list[dict], sources: dict[str, dict], full_run: bool,
                   price: Price | None = None) -> FolderOutputs:
    """Everything eval.py writes for `folder`, as bytes, merged with the entries it keeps; writes nothing.
    `sources[dataset]` holds the prediction file's sha256, its example set and its data check. Every entry's
    cost (kept ones too) is this run's `price`, or none, so the costs of one file never mix two price lists."""
    existing, notes = read_details(folder)
    details, delete = {}, []
    for name, entry in existing.items():
        if any(r["dataset"] == name for r in results):
            continue
        why = "has no prediction file any more" if full_run else entry_is_current(folder, name, entry)
        if why is None:
            details[name] = entry
            continue
        notes.append(f"{folder}: dropped the old result of {name!r}: it {why}"
                     + ("" if full_run or why.startswith(("has no", "is not")) else
                        f"; rescore it with --datasets {name}"))
        if not name_problem(name):
            delete.append(f"per_example/{name}.scores.jsonl")
    files = {}
    for r in results:
        name = r["dataset"]
        files[f"per_example/{name}.scores.jsonl"] = jsonl_bytes(r["per_example"])
        details[name] = {**{k: v for k, v in r.items() if k != "per_example"}, **sources[name],
                         "per_example_sha256": hashlib.sha256(files[f"per_example/{name}.scores.jsonl"])
                         .hexdigest()[:16]}
    details = {name: {**e, "usage": with_cost(e["usage"], price)} if isinstance(e.get("usage"), dict) else e
               for name, e in sorted(details.items())}
    files["result_detail.json"] = json_bytes(details)
    files["result.json"] = json_bytes(headline_scores(details))
    usages = {name: e["usage"] for name, e in details.items() if isinstance(e.get("usage"), dict)}
    total = with_cost(total_usage(list(usages.values())), price)
    plain = {name: {k: v for k, v in u.items() if k != "price"} for name, u in [*usages.items(), ("total", total)]}
    files["result_usage.json"] = json_bytes({"datasets": {name: plain[name] for name in usages},
                                             "total": plain["total"], "price": price.describe() if price else None})
    return FolderOutputs(files, delete, details, notes)


def commit_folder(folder: Path, outputs: FolderOutputs) -> None:
    commit_files(folder, outputs.files, outputs.delete)


def headline_scores(details: dict[str, dict]) -> dict:
    """result.json: {dataset: headline score}, TinyEval's file. When a file is not what inference.py wrote for
    the current data (a status other than ok / unchecked: partial, modified, data_changed), every dataset's
    status is added under ".data_check", a key no dataset can have (names never start with "."), so the file
    itself says which numbers not to publish as they are."""
    scores: dict = {name: d["metrics"][d["headline_metric"]]["score"] for name, d in details.items()}
    statuses = {name: status_of(d) for name, d in details.items()}
    if any(s not in CLEAN_STATUSES for s in statuses.values()):
        scores[STATUS_KEY] = statuses
    return scores


STATUS_KEY = ".data_check"



def result_lines(result: dict) -> list[str]:
    """The warnings the terminal prints about one dataset beyond its table: records not run, reasoning outputs
    that never closed their thinking block, perturbed copies without their original."""
    name, lines = result["dataset"], []
    if skipped_count(result):
        lines.append(f"warning: {name}: {skipped_count(result)} records were not run (--truncation skip) and are "
                     f"out of n and of every score")
    thinking = result.get("thinking")
    if thinking and thinking["unclosed"]:
        lines.append(f"warning: {name}: {thinking['unclosed']} of {thinking['outputs']} reasoning outputs never "
                     f"closed their thinking block (scored 0, unparsed); {thinking['length_in_thinking']} hit the "
                     f"length limit inside it, {thinking['budget_hit']} the thinking budget")
    orphans = (result.get("robustness") or {}).get("copies_without_original")
    if orphans:
        lines.append(f"warning: {name}: {orphans} perturbed copies have no original record; they are left out of "
                     "the worst case")
    return lines


def dataset_table(results: list[dict]) -> str:
    """The terminal's table of one folder just scored: every metric of every dataset, with its counts."""
    rows = [("dataset", "metric", "score", "ci95", "n", "dup", "unparsed", "failed", "zeroed", "no_refs", "data")]
    for r in results:
        for name, m in r["metrics"].items():
            rows.append((r["dataset"], name, score_text(m["score"]), ci_text(m), n_text(r), str(r["duplicates"]),
                         str(r["extraction"]["failed"]), str(r["failed_records"]),
                         str(sum(m["zeroed_by_exception"].values())), str(r["no_references"]),
                         r.get("data_check", {}).get("status", "unchecked")))
    return "\n".join(text_table(rows, left={0, 1, 10}))


# --- models x datasets ----------------------------------------------------------------------------------------
def collect_models(root: Path) -> tuple[dict[str, dict[str, dict]], list[str]]:
    """model -> dataset -> detail entry, for every model folder under ROOT whose entries are still current."""
    by_model, notes = {}, []
    for folder in sorted(p for p in root.iterdir() if p.is_dir() and not p.name.startswith(".")):
        details, _ = read_details(folder)
        current = {}
        for name, entry in details.items():
            why = entry_is_current(folder, name, entry)
            if why is None:
                current[name] = entry
            else:
                notes.append(f"results table: left out {folder.name}/{name}: it {why}; run python eval.py")
        if current:
            by_model[folder.name] = current
    return by_model, notes


def tidy_csv(by_model: dict[str, dict[str, dict]]) -> str:
    """results.csv: one row per model and dataset, the headline score and whether it is comparable."""
    reference = column_sets(Results(by_model))
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(["model", "dataset", "metric", "score", "n", "same_examples_as_column"])
    for model, entries in sorted(by_model.items()):
        for d, e in sorted(entries.items()):
            same = e.get("examples_sha256") == reference[d]
            writer.writerow([model, d, e["headline_metric"], score_text(e["metrics"][e["headline_metric"]]["score"]),
                             e["n"], "yes" if same else "no"])
    return buf.getvalue()


def write_models_table(root: Path) -> tuple[str, list[str]]:
    """Rebuild ROOT/results.md (every report section, Eval/scoring/sections/) and ROOT/results.csv from every
    model folder's current results; returns the terminal's text of the same sections and the notes."""
    by_model, notes = collect_models(root)
    found = tables(Results(by_model, root))
    markdown = "\n\n".join(render_markdown(t) for t in found) + "\n"
    commit_files(root, {"results.md": markdown.encode("utf-8"), "results.csv": tidy_csv(by_model).encode("utf-8")})
    return "\n\n".join(render_text(t) for t in found), notes
