"""`python eval.py --diff DIR_A DIR_B`: is B better than A on the same items, and why do their samples differ.

Per dataset both folders hold, records are paired by id (ids both sides have; the first line of a repeated id;
records without an id cannot be paired). Each side is scored exactly as eval.py scores it (score_dataset, with the
task eval.py resolves for that file), then per metric over the pairs where neither side was skipped:
    mean_a, mean_b   0-100, as eval.py rounds them (on the paired items only)
    diff             mean_b - mean_a, with a paired percentile bootstrap 95% interval (Eval/scoring/intervals.py)
    mcnemar          for metrics whose values are all 0/1 on both sides: discordant counts and the exact p; else null
Every pair that differs in anything recorded (prompt hash, output, failure, extracted answer, a score) goes in exactly
one bucket, the first that applies in this order:
    "one side failed"     either record has an error or was skipped (a failure says nothing about the prompt)
    "prompt differs"      both records carry prompt_sha256 and the hashes differ (records from before prompt_sha256
                          existed never land here: an unknown prompt is not a changed one)
    "same answer"         the outputs differ but the extracted answers are the same
    "output differs"      the outputs differ and so do the extracted answers
    "extraction differs"  the same output gives different extracted answers (the task's extraction changed)
    "data differs"        same output and answer, different scores (the references or class list changed)
Regressions are pairs where A scored higher than B on the headline metric (for 0/1 metrics: A right, B wrong).
Writes <parent of DIR_B>/diff_<A>_vs_<B>.json and prints a table.

Usage:
    python eval.py --diff pred/base pred/tuned [--datasets trec,custom_zh] [--quiet]
    from Eval.scoring.diff import compare_dataset   # (task_a, records_a, task_b, records_b) -> the dataset's entry
"""
from __future__ import annotations

import sys
from pathlib import Path

from Eval.extract import run_extraction
from Eval.records import RecordError, read_records
from Eval.scoring.intervals import is_binary, mcnemar_exact, paired_difference_interval
from Eval.scoring.scorer import percent, score_dataset, score_text, text_table
from Eval.storage import StorageError, commit_files, json_bytes

BUCKETS = ("one side failed", "prompt differs", "same answer", "output differs", "extraction differs", "data differs")
PRED_HEAD = 300  # characters of an output kept in the file; the rest is cut, marked by "…"
SHOWN_REGRESSIONS = 5  # per dataset in the printed report; the file lists them all


def _head(text, limit: int = PRED_HEAD):
    return text if not isinstance(text, str) or len(text) <= limit else text[:limit] + "…"


def _failure(record: dict):
    """Why a record has no real output (its error or skip reason), or None."""
    if record.get("skipped"):
        return f"skipped: {record['skipped']}"
    return None if record.get("error") is None else f"error: {record['error']}"


def _by_id(records: list[dict], entries: list[dict]) -> tuple[dict, int]:
    """id -> (record, per-example entry), first line of each id; and how many lines could not be paired (no id,
    or a repeat of an id already seen)."""
    paired, loose = {}, 0
    for record, entry in zip(records, entries):
        rid = record.get("id", record.get("_id"))
        if rid is None or str(rid) in paired:
            loose += 1
        else:
            paired[str(rid)] = (record, entry)
    return paired, loose


class _Side:
    """One folder's view of a dataset: its task, its records by id, and what eval.py's scorer made of them."""

    def __init__(self, task, records: list[dict]):
        self.task, self.result = task, score_dataset(task, records)
        self.by_id, self.loose = _by_id(records, self.result["per_example"])

    def extracted(self, record: dict):
        return None if _failure(record) else run_extraction(self.task.extract, record["pred"], record)

    def view(self, rid: str, headline: str) -> dict:
        record, entry = self.by_id[rid]
        scores = entry.get("scores", {})
        return {"pred": _head(record.get("pred")), "extracted": _head(self.extracted(record)),
                "score": scores.get(headline), "failed": _failure(record)}


def bucket_of(rec_a: dict, rec_b: dict, side_a: _Side, side_b: _Side, metrics: list[str]) -> str | None:
    """The one bucket a pair falls in (see the module docstring for the order), or None when nothing differs."""
    fail_a, fail_b = _failure(rec_a), _failure(rec_b)
    sha_a, sha_b = rec_a.get("prompt_sha256"), rec_b.get("prompt_sha256")
    prompt_differs = sha_a is not None and sha_b is not None and sha_a != sha_b
    if fail_a or fail_b:
        same = fail_a == fail_b and rec_a.get("pred") == rec_b.get("pred") and not prompt_differs
        return None if same else "one side failed"
    if prompt_differs:
        return "prompt differs"
    ext_a, ext_b = side_a.extracted(rec_a), side_b.extracted(rec_b)
    if rec_a["pred"] != rec_b["pred"]:
        return "same answer" if ext_a == ext_b else "output differs"
    if ext_a != ext_b:
        return "extraction differs"
    entry_a = side_a.by_id[_rid(rec_a)][1]["scores"]
    entry_b = side_b.by_id[_rid(rec_b)][1]["scores"]
    return "data differs" if any(entry_a[m] != entry_b[m] for m in metrics) else None


def _rid(record: dict) -> str:
    return str(record.get("id", record.get("_id")))


def metric_comparison(values_a: list[float], values_b: list[float]) -> dict:
    """mean_a, mean_b, diff (0-100), its paired 95% interval, and McNemar's test when both sides are 0/1."""
    mean_a, unrounded_a = percent(values_a)
    mean_b, unrounded_b = percent(values_b)
    mcnemar = None
    if is_binary(values_a) and is_binary(values_b):
        a_only = sum(1 for x, y in zip(values_a, values_b) if x == 1.0 and y == 0.0)
        b_only = sum(1 for x, y in zip(values_a, values_b) if x == 0.0 and y == 1.0)
        mcnemar = {"a_only_right": a_only, "b_only_right": b_only, "p": mcnemar_exact(a_only, b_only)}
    return {"mean_a": mean_a, "mean_b": mean_b,
            "diff": None if mean_a is None else round(unrounded_b - unrounded_a, 2),
            "ci95": paired_difference_interval(values_a, values_b), "mcnemar": mcnemar}


def compare_dataset(task_a, records_a: list[dict], task_b, records_b: list[dict]) -> dict:
    """The dataset's entry of diff_<A>_vs_<B>.json (the shape is in the shared contract; see the docstring)."""
    side_a, side_b = _Side(task_a, records_a), _Side(task_b, records_b)
    common = [rid for rid in side_a.by_id if rid in side_b.by_id]  # A's file order
    metrics = [m for m in side_a.result["metrics"] if m in side_b.result["metrics"]]
    headline = side_a.result["headline_metric"] if side_a.result["headline_metric"] in metrics else metrics[0]
    scored = [rid for rid in common if not side_a.by_id[rid][0].get("skipped")
              and not side_b.by_id[rid][0].get("skipped")]
    per_metric = {}
    for m in metrics:
        values_a = [side_a.by_id[rid][1]["scores"][m] for rid in scored]
        values_b = [side_b.by_id[rid][1]["scores"][m] for rid in scored]
        per_metric[m] = metric_comparison(values_a, values_b)
    buckets, samples = {name: 0 for name in BUCKETS}, []
    for rid in common:
        bucket = bucket_of(side_a.by_id[rid][0], side_b.by_id[rid][0], side_a, side_b, metrics)
        if bucket is not None:
            buckets[bucket] += 1
            samples.append({"id": rid, "bucket": bucket, "a": side_a.view(rid, headline),
                            "b": side_b.view(rid, headline)})
    regressions = [rid for rid in scored
                   if side_a.by_id[rid][1]["scores"][headline] > side_b.by_id[rid][1]["scores"][headline]]
    return {"headline_metric": headline, "paired": len(common), "scored_pairs": len(scored),
            "unmatched": {"a_only": len(side_a.by_id) - len(common) + side_a.loose,
                          "b_only": len(side_b.by_id) - len(common) + side_b.loose},
            "metrics": per_metric, "buckets": buckets, "samples": samples, "regressions": regressions}


def diff_path(dir_a: Path, dir_b: Path) -> Path:
    return dir_b.resolve().parent / f"diff_{dir_a.resolve().name}_vs_{dir_b.resolve().name}.json"


def build_diff(dir_a: Path, dir_b: Path, resolve_task, list_files, only: set[str] | None,
               notes: list[str]) -> dict:
    """The whole diff document; raises RecordError / StorageError / KeyError on bad input. `resolve_task` and
    `list_files` are eval.py's task_for_file and prediction_files, so both sides are read as eval.py reads them."""
    for folder in (dir_a, dir_b):
        if not folder.is_dir():
            raise RecordError(folder, None, "no such folder")
    files_a = {f.stem: f for f in list_files(dir_a)}
    files_b = {f.stem: f for f in list_files(dir_b)}
    if only is not None:
        files_a = {k: v for k, v in files_a.items() if k in only}
        files_b = {k: v for k, v in files_b.items() if k in only}
    for name, folder, other in ((dir_a.name, files_a, files_b), (dir_b.name, files_b, files_a)):
        alone = sorted(set(folder) - set(other))
        if alone:
            notes.append(f"only {name} has {', '.join(alone)}: not compared")
    datasets = {}
    for name in sorted(set(files_a) & set(files_b)):
        task_a, task_b = resolve_task(files_a[name], notes), resolve_task(files_b[name], notes)
        datasets[name] = compare_dataset(task_a, read_records(files_a[name]), task_b, read_records(files_b[name]))
    if not datasets:
        raise RecordError(dir_b, None, f"no dataset in common with {dir_a}")
    return {"a": dir_a.resolve().name, "b": dir_b.resolve().name, "datasets": datasets}



def diff_table(doc: dict) -> list[str]:
    """The printed report: one row per dataset and metric, then each dataset's buckets and first regressions."""
    rows = [("dataset", "metric", "paired", doc["a"], doc["b"], "B-A", "ci95 of B-A", "McNemar p")]
    for name, d in doc["datasets"].items():
        for metric, m in d["metrics"].items():
            ci = "-" if m["ci95"] is None else f"[{m['ci95'][0]:.2f}, {m['ci95'][1]:.2f}]"
            p = "-" if m["mcnemar"] is None else f"{m['mcnemar']['p']:.4g}"
            rows.append((name, metric, str(d["scored_pairs"]), score_text(m["mean_a"]), score_text(m["mean_b"]),
                         score_text(m["diff"]), ci, p))
    lines = text_table(rows, left={0, 1})
    for name, d in doc["datasets"].items():
        counts = ", ".join(f"{b} {k}" for b, k in d["buckets"].items() if k) or "none"
        lines.append(f"{name}: {d['paired']} paired ({d['unmatched']['a_only']} only in {doc['a']}, "
                     f"{d['unmatched']['b_only']} only in {doc['b']}); differing samples: {counts}")
        shown = {s["id"]: s for s in d["samples"]}
        for rid in d["regressions"][:SHOWN_REGRESSIONS]:
            s = shown.get(rid)
            if s is not None:
                lines.append(f"  regression {rid} ({s['bucket']}): {doc['a']} {_short(s['a'])} | "
                             f"{doc['b']} {_short(s['b'])}")
        if len(d["regressions"]) > SHOWN_REGRESSIONS:
            lines.append(f"  ... {len(d['regressions']) - SHOWN_REGRESSIONS} more regressions in the file")
    return lines


def _short(view: dict) -> str:
    text = view["failed"] or view["pred"] or ""
    text = text if len(text) <= 60 else text[:60] + "…"
    return f"{text!r} -> {view['score']}"


def run_diff(dir_a: Path, dir_b: Path, resolve_task, list_files, only: set[str] | None = None,
             quiet: bool = False) -> int:
    """eval.py's --diff: compare, write the file, print the table; 2 and nothing written on bad input."""
    notes: list[str] = []
    try:
        doc = build_diff(dir_a, dir_b, resolve_task, list_files, only, notes)
    except (RecordError, StorageError) as err:
        print(f"error: nothing was written: {err}", file=sys.stderr)
        return 2
    except KeyError as err:  # an unknown dataset / metric, named with close ones
        print(f"error: nothing was written: {err.args[0] if err.args else err}", file=sys.stderr)
        return 2
    out = diff_path(dir_a, dir_b)
    commit_files(out.parent, {out.name: json_bytes(doc)})
    for note in notes:
        print(f"note: {note}")
    if not quiet:
        print("\n".join(diff_table(doc)))
        print(f"-> {out}")
    return 0
