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
and ROOT/results.csv and ROOT/results.md (models x datasets, with the metric and n of every cell, "n=8, 2 skipped"
when records were not run, and cells scored on another set of examples than the rest of their column marked;
then the same matrix of 95% intervals, one compact table per dataset with a breakdown, and a table of each
model's tokens, seconds and cost).

Scoring a subset (--datasets) updates those entries and keeps the others, but only those whose prediction file
is unchanged since they were scored: an entry whose file changed or is gone is dropped, with a note, so no stale
score survives. The three outputs are committed together (Eval/storage.py commit_files): a kill cannot leave
result.json, result_detail.json and per_example/ from two runs.

Usage:
    outputs = folder_outputs(DIR, results, sources, full_run=True)      # nothing written yet
    commit_folder(DIR, outputs)
    markdown, notes = write_models_table(ROOT)
"""
from __future__ import annotations

import csv
import dataclasses
import hashlib
import io
import json
from collections import Counter
from pathlib import Path

from Eval.scoring.robustness import robustness_lines, robustness_tables
from Eval.names import name_problem
from Eval.pricing import Price, cost_text, total_usage, with_cost
from Eval.scoring.provenance import file_sha256
from Eval.scoring.scorer import score_text, text_table
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
CLEAN_STATUSES = ("ok", "unchecked")  # Eval/scoring/provenance.py: the statuses whose numbers stand as they are


def status_of(entry: dict) -> str:
    check = entry.get("data_check")
    return check.get("status", "unchecked") if isinstance(check, dict) else "unchecked"



def ci_text(metric: dict) -> str:
    """A metric's 95% interval as the tables show it, "[46.36, 57.59]"; "-" when it has none (no values, or a
    result written before intervals existed)."""
    ci = metric.get("ci95")
    return "-" if not ci else f"[{ci[0]:.2f}, {ci[1]:.2f}]"


def skipped_count(result: dict) -> int:
    """Records left out of n because inference.py never ran them (--truncation skip); 0 for older results."""
    skipped = result.get("skipped")
    return skipped.get("count", 0) if isinstance(skipped, dict) else 0


def n_text(result: dict) -> str:
    """n as the tables show it: "8", or "8, 2 skipped" when records were left out of it."""
    skipped = skipped_count(result)
    return f"{result['n']}, {skipped} skipped" if skipped else str(result["n"])


def result_lines(result: dict) -> list[str]:
    """What the terminal says about one dataset beyond the table: skipped records, reasoning outputs cut or
    unclosed, each perturbation's score and the worst case (--perturb), and its breakdown (LongBench v2's row)."""
    name, lines = result["dataset"], []
    if skipped_count(result):
        lines.append(f"warning: {name}: {skipped_count(result)} records were not run (--truncation skip) and are "
                     f"out of n and of every score")
    thinking = result.get("thinking")
    if thinking and thinking["unclosed"]:
        lines.append(f"warning: {name}: {thinking['unclosed']} of {thinking['outputs']} reasoning outputs never closed "
                     f"their thinking block (scored 0, unparsed); {thinking['length_in_thinking']} hit the length "
                     f"limit inside it, {thinking['budget_hit']} the thinking budget")
    lines += robustness_lines(result)
    table = result.get("breakdown")
    if table:
        for row in _BREAKDOWN_ROWS:
            cells = ", ".join(f"{c} {_cell_1(table[row][c])}" for c in table["columns"])
            lines.append(f"{name} {row}: {cells}")
    return lines


_BREAKDOWN_ROWS = ("accuracy", "compensated")  # a breakdown's rows shown in the tables (Eval/scoring/breakdowns.py)


def _cell_1(value) -> str:
    return "-" if value is None else f"{value:.1f}"


def dataset_table(results: list[dict]) -> str:
    """A readable per-dataset table for the terminal."""
    rows = [("dataset", "metric", "score", "ci95", "n", "dup", "unparsed", "failed", "zeroed", "no_refs", "data")]
    for r in results:
        for name, m in r["metrics"].items():
            rows.append((r["dataset"], name, score_text(m["score"]), ci_text(m), n_text(r), str(r["duplicates"]),
                         str(r["extraction"]["failed"]), str(r["failed_records"]),
                         str(sum(m["zeroed_by_exception"].values())), str(r["no_references"]),
                         r.get("data_check", {}).get("status", "unchecked")))
    return "\n".join(text_table(rows, left={0, 1, 10}))


def _usage_cells(usage: dict) -> list[str]:
    """examples, prompt / generated / cut tokens, seconds, generated tokens/s and cost, as the tables show them."""
    if not usage.get("counted"):  # files written elsewhere (TinyEval's) carry no token counts
        return [str(usage.get("examples", "-"))] + ["-"] * 6
    rate = usage.get("tokens_per_s")
    return [str(usage["examples"]), str(usage["prompt_tokens"]), str(usage["gen_tokens"]),
            str(usage["truncated_tokens"]), f"{usage['seconds']:.1f}", "-" if rate is None else f"{rate:.1f}",
            cost_text(usage["cost_usd"]) if "cost_usd" in usage else "-"]


USAGE_HEADER = ("examples", "prompt tokens", "generated", "cut", "seconds", "gen tok/s", "cost")


def usage_table(entries: list[dict]) -> str:
    """The terminal's second table: per dataset (and in total) what its records spent, from the result entries'
    `usage`; the cost column only with --price."""
    entries = [e for e in entries if isinstance(e.get("usage"), dict)]
    rows = [("dataset", *USAGE_HEADER)] + [(e["dataset"], *_usage_cells(e["usage"])) for e in entries]
    if len(entries) > 1:
        rows.append(("total", *_usage_cells(total_usage([e["usage"] for e in entries]))))
    if all(row[-1] == "-" for row in rows[1:]):
        rows = [row[:-1] for row in rows]
    return "\n".join(text_table(rows, left={0}))


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


def _reference_sets(by_model: dict[str, dict[str, dict]]) -> dict[str, str]:
    """Per dataset, the example set most models were scored on (ties: the larger n): the column's baseline."""
    reference = {}
    for dataset in {d for entries in by_model.values() for d in entries}:
        cells = [e for entries in by_model.values() for d, e in entries.items() if d == dataset]
        counts = Counter(e.get("examples_sha256") for e in cells)
        reference[dataset] = max(cells, key=lambda e: (counts[e.get("examples_sha256")], e["n"]))["examples_sha256"]
    return reference


def models_table(by_model: dict[str, dict[str, dict]]) -> tuple[str, str]:
    """(Markdown matrix, tidy CSV). Each cell is `score (n=N)`; † marks a cell scored on another set of
    examples than its column's baseline, which a reader must not compare with the rest of the column."""
    datasets = sorted({d for entries in by_model.values() for d in entries})
    reference = _reference_sets(by_model)
    metric_of = {d: next(e["headline_metric"] for m in by_model.values() for k, e in m.items() if k == d)
                 for d in datasets}
    header = ["model", *(f"{d} ({metric_of[d]})" for d in datasets)]
    tidy = [["model", "dataset", "metric", "score", "n", "same_examples_as_column"]]
    rows, intervals, marked, flagged = [], [], False, False
    for model, entries in sorted(by_model.items()):
        row, ci_row = [model], [model]
        for d in datasets:
            e = entries.get(d)
            if e is None:
                row.append("-")
                ci_row.append("-")
                continue
            same = e.get("examples_sha256") == reference[d]
            marked |= not same
            score = e["metrics"][e["headline_metric"]]["score"]
            status = status_of(e)
            flagged |= status not in CLEAN_STATUSES
            shown = "" if status in CLEAN_STATUSES else f", {status}"
            row.append(f"{score_text(score)} (n={n_text(e)}{shown})" + ("" if same else " †"))
            tidy.append([model, d, e["headline_metric"], score_text(score), e["n"], "yes" if same else "no"])
            ci_row.append(ci_text(e["metrics"][e["headline_metric"]]))
        rows.append(row)
        intervals.append(ci_row)
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header), *("| " + " | ".join(r) + " |" for r in rows)]
    if marked:
        lines += ["", "† scored on a different set of examples than the rest of its column (another n, a --limit run, "
                      "or other data): not comparable with it."]
    if flagged:
        lines += ["", "partial / modified / data_changed: the prediction file is not what inference.py wrote for "
                      "the whole current dataset (a --limit run, a file edited after the run, or data changed "
                      "since): see the warnings of eval.py and `data_check` in result_detail.json."]
    if any(skipped_count(e) for entries in by_model.values() for e in entries.values()):
        lines += ["", "n counts the records scored; \"k skipped\": records inference.py did not run (--truncation "
                      "skip, the prompt did not fit), left out of n and of the score."]
    lines += interval_table(header, intervals)
    lines += breakdown_tables(by_model) + robustness_tables(by_model) + models_usage_table(by_model)
    buf = io.StringIO()
    csv.writer(buf, lineterminator="\n").writerows(tidy)
    return "\n".join(lines) + "\n", buf.getvalue()


def interval_table(header: list[str], rows: list[list[str]]) -> list[str]:
    """Markdown lines: the same models x datasets matrix holding each cell's 95% interval (Wilson for 0/1 metrics,
    else a seeded bootstrap; Eval/scoring/intervals.py). A table of its own, so the score cells above keep their
    shape."""
    return ["", "95% intervals of the scores above (Wilson for 0/1 metrics, else a seeded bootstrap over examples):",
            "", "| " + " | ".join(header) + " |", "|" + "---|" * len(header),
            *("| " + " | ".join(r) + " |" for r in rows)]


def breakdown_tables(by_model: dict[str, dict[str, dict]]) -> list[str]:
    """Markdown lines: per dataset with a breakdown, one compact table of models x its columns, a row for each
    of _BREAKDOWN_ROWS (LongBench v2: accuracy, then the compensated row)."""
    lines = []
    for dataset in sorted({d for entries in by_model.values() for d, e in entries.items() if e.get("breakdown")}):
        cells = {model: entries[dataset] for model, entries in sorted(by_model.items())
                 if entries.get(dataset, {}).get("breakdown")}
        first = next(iter(cells.values()))
        columns = first["breakdown"]["columns"]
        note = first["breakdown"].get("note")
        lines += ["", f"**{dataset}** ({first['breakdown']['name']} breakdown of {first['headline_metric']}"
                      + (f"; {note})" if note else ")"), "",
                  "| model | " + " | ".join(columns) + " |", "|" + "---|" * (len(columns) + 1)]
        for model, e in cells.items():
            for row in _BREAKDOWN_ROWS:
                label = model if row == "accuracy" else f"{model} ({row})"
                lines.append(f"| {label} | " + " | ".join(_cell_1(e["breakdown"][row].get(c)) for c in columns) + " |")
    return lines


def models_usage_table(by_model: dict[str, dict[str, dict]]) -> list[str]:
    """Markdown lines: per model, the totals of its datasets' usage (tokens, seconds, cost), when any has one."""
    totals = {}
    for model, entries in sorted(by_model.items()):
        usages = [e["usage"] for e in entries.values() if isinstance(e.get("usage"), dict) and e["usage"]["counted"]]
        if usages:
            totals[model] = total_usage(usages)
    if not totals:
        return []
    header = ["model", *USAGE_HEADER]
    rows = [[model, *_usage_cells(total)] for model, total in totals.items()]
    return ["", "Tokens, seconds and cost of each model's datasets, summed from its prediction records (seconds: "
                "the sum of latency_s; cost: eval.py --price):", "", "| " + " | ".join(header) + " |",
            "|" + "---|" * len(header), *("| " + " | ".join(r) + " |" for r in rows)]


def write_models_table(root: Path) -> tuple[str, list[str]]:
    """Rebuild ROOT/results.md and ROOT/results.csv from every model folder's current results."""
    by_model, notes = collect_models(root)
    markdown, tidy = models_table(by_model)
    commit_files(root, {"results.md": markdown.encode("utf-8"), "results.csv": tidy.encode("utf-8")})
    return markdown, notes
