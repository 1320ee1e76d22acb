"""What scoring found: a folder's result.json (TinyEval's shape), result_detail.json,
result_usage.json and per_example/, committed together (a pred root's results.md and .csv:
sections/__init__.py). Scoring a subset keeps the other entries in result.json only while their
prediction file and dataset are unchanged.

Usage:
    outputs = folder_outputs(DIR, results, sources, full_run=True)      # nothing written yet
"""
from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import NamedTuple

from Eval.names import name_problem
from Eval.pricing import Price, total_usage, with_cost
from Eval.records import is_prediction_file, sidecar_path
from Eval.scoring.bergen import prediction_path
from Eval.scoring.breakdowns import NOT_WRITTEN
from Eval.scoring.provenance import changed_dataset, file_sha256, inputs_changed
from Eval.scoring.sections import aligned_lines
from Eval.scoring.sections.scores import CLEAN_STATUSES, ci_text, headline, n_text
from Eval.scoring.sections.scores import score_text, status_of
from Eval.storage import (StorageError, json_bytes, jsonl_bytes, read_json_object,
                           regular_file_problem)

RESULT_FILES = ("result.json", "result_detail.json", "result_usage.json")
STALE = ("has predictions that changed since it was scored", "has a dataset that changed since",
         "was scored from a -S, run or config file that changed since")


class FolderOutputs(NamedTuple):
    files: dict[str, bytes]  # relative path -> bytes, committed together
    delete: list[str]
    details: dict[str, dict]  # the merged result_detail.json content
    notes: list[str]


def example_set(records: list[dict]) -> str:
    """Which examples a file holds, order ignored: cells are comparable only when these agree;
    --perturb copies left out (the score is the originals')."""
    keys = []
    for r in (r for r in records if r.get("perturbation") is None):
        rid = r.get("id", r.get("_id"))
        key = [str(rid), r.get("example_sha256")] if rid is not None else \
            [None, r["answers"], r.get("length")]
        keys.append(json.dumps(key, ensure_ascii=False, sort_keys=True))
    return hashlib.sha256("\n".join(sorted(keys)).encode("utf-8")).hexdigest()[:16]


def entry_is_current(folder: Path, name: str, entry: object) -> str | None:
    """Why a kept result entry can no longer stand; None when its prediction file is unchanged."""
    if name_problem(name):
        return "is not a dataset name"
    source = entry.get("source") if isinstance(entry, dict) else None
    path = prediction_path(folder, name)
    if regular_file_problem(path):
        return "has no prediction file any more"
    if not isinstance(source, dict) or "sha256" not in source:
        return "was scored by an older version of eval.py"
    try:
        if file_sha256(path) != source["sha256"]:
            return STALE[0]
        if inputs_changed(folder, source):
            return STALE[2]
    except StorageError:
        return "has no readable prediction file"
    check, (sidecar, _) = entry.get("data_check"), read_json_object(sidecar_path(path))
    was = isinstance(check, dict) and check.get("data_changed") is True  # older: scored again
    return None if was == bool(changed_dataset(sidecar)) else STALE[1]


def folder_outputs(folder: Path, results: list[dict], sources: dict[str, dict], full_run: bool,
                   price: Price | None = None) -> FolderOutputs:
    """Everything eval.py writes for `folder`, as bytes, merged with the entries it keeps. Every
    entry's cost (kept ones too) is this run's `price`, so one file never mixes two price lists."""
    existing, notes = read_json_object(folder / "result_detail.json")
    damaged = bool(notes)
    details, delete, stale = {}, [], {}
    scored = {r["dataset"] for r in results}
    for name, entry in existing.items():
        if name in scored:
            continue
        why = entry_is_current(folder, name, entry) if not full_run else \
            "has no prediction file any more"
        if why is None:
            details[name] = entry
        elif why in STALE:  # kept, out of result.json: `report` scores it again as it was
            stale[name] = entry
            notes.append(f"{folder}: left {name!r} out of result.json: it {why}; python eval.py "
                         "report scores it again as it was scored")
        else:
            notes.append(f"{folder}: dropped the old result of {name!r}: it {why}")
            if not name_problem(name):
                delete.append(f"per_example/{name}.scores.jsonl")
    files = {}
    for r in results:
        path = f"per_example/{r['dataset']}.scores.jsonl"
        files[path] = jsonl_bytes(r["per_example"])
        details[r["dataset"]] = {**{k: v for k, v in r.items() if k != "per_example"},
                                 **sources[r["dataset"]],
                                 "per_example_sha256": hashlib.sha256(files[path]).hexdigest()[:16]}
    usages = {name: with_cost(e["usage"], price) for name, e in sorted(details.items())
              if isinstance(e.get("usage"), dict)}
    details = {name: {**e, "usage": usages[name]} if name in usages else e
               for name, e in sorted(details.items())}
    unscored = sorted(f.stem for f in folder.glob("*.jsonl")
                      if is_prediction_file(f) and f.stem not in details)
    if unscored and damaged and not full_run:  # their results were lost with the damaged file
        notes.append(f"{folder}: no result now for {', '.join(unscored)}; score them with "
                     f"--datasets {','.join(unscored)}, or with no --datasets")
    files["result_detail.json"] = json_bytes(dict(sorted({**details, **stale}.items())))
    files["result.json"] = json_bytes(headline_scores(details))
    total = with_cost(total_usage(list(usages.values())), price)
    plain = {name: {k: v for k, v in u.items() if k != "price"} for name, u in usages.items()}
    files["result_usage.json"] = json_bytes({
        "datasets": plain, "total": {k: v for k, v in total.items() if k != "price"},
        "price": price.describe() if price else None})
    return FolderOutputs(files, delete, details, notes)


def headline_scores(details: dict[str, dict]) -> dict:
    """result.json: {dataset: headline score}; when a file is not clean, every dataset's status
    under ".data_check" (no dataset name starts with "."), so the file says what not to publish."""
    scores: dict = {name: headline(d)["score"] for name, d in details.items()}
    statuses = {name: status_of(d) for name, d in details.items()}
    if any(s not in CLEAN_STATUSES for s in statuses.values()):
        scores[".data_check"] = statuses
    return scores


def dataset_table(results: list[dict]) -> str:
    rows = [("dataset", "metric", "score", "ci95", "n", "dup", "unparsed", "failed", "zeroed",
             "no_refs", "data")]
    for r in results:
        for name, m in r["metrics"].items():
            n = f"{m['queries']} queries" if "queries" in m else n_text(r)  # ranking metrics
            counts = (r["duplicates"], r["extraction"]["failed"], r["failed_records"],
                      sum(m["zeroed_by_exception"].values()), r["no_references"])
            rows.append((r["dataset"], name, score_text(m["score"]), ci_text(m), n,
                         *map(str, counts), status_of(r)))
    return "\n".join(aligned_lines(rows, left={0, 1, 10}))


def dataset_warnings(result: dict) -> list[str]:
    name, lines, thinking = result["dataset"], [], result.get("thinking")
    if result["duplicates"]:
        lines.append(f"warning: {name}: {result['duplicates']} lines repeat an earlier example "
                     "(kept, as the published figures count every line)")
    if result["no_references"] or result["no_classes"]:
        lines.append(f"warning: {name}: {result['no_references']} records have no reference answer "
                     f"and {result['no_classes']} no class list (all_classes); they score 0")
    found = result["data_check"]["warnings"] + (result.get("breakdown") or {}).get("warnings", [])
    lines += [f"warning: {name}: {warning}" for warning in found]
    unranked = {m: s["queries_unranked"] for m, s in result["metrics"].items()
                if s.get("queries_unranked")}
    if unranked:
        lines.append(f"note: {name}: {max(unranked.values())} of {result['n']} queries have no "
                     f"run or no judged document; {', '.join(unranked)} leave them out of the mean "
                     "(trec_eval's rule)")
    unwritten = {why: n for why, n in result["skipped"]["reasons"].items() if NOT_WRITTEN in why}
    not_run = result["skipped"]["count"] - sum(unwritten.values())
    if not_run:
        lines.append(f"warning: {name}: {not_run} records were not run (--truncation skip) and are "
                     "out of n and of every score")
    if unwritten:
        lines.append(f"warning: {name}: {sum(unwritten.values())} records are out of n and of "
                     "every score as LongBench v2 leaves them out: "
                     + "; ".join(f"{n} {why}" for why, n in unwritten.items()))
    if thinking and thinking["unclosed"]:  # LongBench v2 reads its answer from the whole output
        effect = ("scored 0, unparsed" if "strip_think" in result["extraction"]["steps"] else
                  "the answer read from the whole output, block included")
        lines.append(f"warning: {name}: {thinking['unclosed']} of {thinking['outputs']} reasoning "
                     f"outputs never closed their thinking block ({effect}); "
                     f"{thinking['length_in_thinking']} hit the length limit inside it, "
                     f"{thinking['budget_hit']} the thinking budget")
    orphans = (result.get("robustness") or {}).get("copies_without_original")
    if orphans:
        lines.append(f"warning: {name}: {orphans} perturbed copies have no original record; they "
                     "are left out of the worst case")
    return lines
