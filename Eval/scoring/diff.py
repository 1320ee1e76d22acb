"""`python eval.py diff DIR_A DIR_B`: is B better than A on the same items, and why they differ.

Pairing, per dataset both folders hold. A record is paired by a key: its `id` (written by
inference.py); else the example it answers: its `example_sha256` when it has one, or, for
LongBench / TinyEval lines (no id), its references, class list, length and `_id`. The k-th record
of a key in A is paired with the k-th record of that key in B, so two copies of one file pair line
for line even where lines repeat, and a line inserted in B shifts nothing. A pair is named by its
id; an id-less pair by its `_id`, else "line N" (its record number in A: the line, in a JSON Lines
file). Records left without a partner are counted as `unmatched` (a_only, b_only).
A pair whose records both carry `example_sha256`, and the hashes differ, is two different questions
under one id (ids made from line positions, `custom_en-3`, shift when the data gains or loses a
line). It is never compared: it is counted as `mismatched`, its ids are listed (`mismatched_ids`),
and it is left out of the means, the interval, McNemar, the buckets and the regressions.

Each side is scored exactly as eval.py scores it (score_dataset, with the task eval.py resolves for
that file), then per metric over the pairs where neither side was skipped:
    mean_a, mean_b   0-100, as eval.py rounds them (on the paired items only)
    diff             mean_b - mean_a, with a paired percentile bootstrap 95% interval
                     (Eval/scoring/intervals.py)
    mcnemar          for metrics whose values are all 0/1 on both sides: discordant counts and the
                     exact p; else null
Every pair that differs in anything recorded (prompt hash, output, failure, extracted answer, a
score) goes in exactly one bucket, the first that applies in this order:
    "one side failed"     either record has an error or was skipped (a failure says nothing about
                          the prompt)
    "prompt differs"      both records carry prompt_sha256 and the hashes differ (records from
                          before prompt_sha256 existed never land here: unknown is not changed)
    "same answer"         the outputs differ but the extracted answers are the same
    "output differs"      the outputs differ and so do the extracted answers
    "extraction differs"  the same output gives different extracted answers (extraction changed)
    "data differs"        same output and answer, different scores (references or classes changed)
Regressions are pairs where A scored higher than B on the headline metric (for 0/1 metrics: A
right, B wrong). Writes <parent of DIR_B>/diff_<A>_vs_<B>.json and prints a table.

Usage:
    python eval.py diff pred/base pred/tuned [--datasets trec,custom_zh] [--quiet]
    from Eval.scoring.diff import compare_dataset  # (task_a, records_a, task_b, records_b)
    from Eval.scoring.diff import pair_records     # (records_a, records_b) -> [(i in A, j in B)]
"""
from __future__ import annotations

import json
import sys
from collections import Counter
from pathlib import Path

from Eval.extract import run_extraction
from Eval.records import RecordError, read_records
from Eval.commands import eval_command
from Eval.scoring.folders import dataset_names, prediction_files, task_for_file
from Eval.scoring.intervals import is_binary, mcnemar_exact, paired_difference_interval
from Eval.scoring.scorer import percent, score_dataset, score_text, text_table
from Eval.storage import StorageError, commit_files, json_bytes

BUCKETS = ("one side failed", "prompt differs", "same answer", "output differs",
           "extraction differs", "data differs")
PRED_HEAD = 300  # characters of an output kept in the file; the rest is cut, marked by "…"
SHOWN_REGRESSIONS = 5  # per dataset in the printed report; the file lists them all
SHOWN_MISMATCHED = 5  # ids of mismatched pairs in the printed report; the file lists them all


def _head(text, limit: int = PRED_HEAD):
    return text if not isinstance(text, str) or len(text) <= limit else text[:limit] + "…"


def _failure(record: dict):
    """Why a record has no real output (its error or skip reason), or None."""
    if record.get("skipped"):
        return f"skipped: {record['skipped']}"
    return None if record.get("error") is None else f"error: {record['error']}"


def pair_key(record: dict) -> tuple[str, str]:
    """What a record is paired by: its id; else the content of the example it answers."""
    if record.get("id") is not None:
        return ("id", str(record["id"]))
    if record.get("example_sha256"):
        return ("example", record["example_sha256"])
    # TinyEval / LongBench lines carry no id: what they answer is their references, class list and
    # length (and LongBench's `_id`), which a copy of the same file repeats exactly
    content = [record["answers"], record.get("all_classes"), record.get("length"),
               record.get("_id")]
    return ("content", json.dumps(content, ensure_ascii=False))


def _occurrences(records: list[dict]) -> list[tuple[tuple[str, str], int]]:
    """(key, k) per record: it is the k-th record (from 0) of its file with that key."""
    seen: Counter = Counter()
    keys = []
    for record in records:
        key = pair_key(record)
        keys.append((key, seen[key]))
        seen[key] += 1
    return keys


def pair_records(records_a: list[dict], records_b: list[dict]) -> list[tuple[int, int]]:
    """(index in A, index in B) of every pair, in A's order: the k-th record of a key in A with the
    k-th record of that key in B. Example hashes are not checked here (compare_dataset does)."""
    in_b = {occurrence: j for j, occurrence in enumerate(_occurrences(records_b))}
    return [(i, in_b[occurrence]) for i, occurrence in enumerate(_occurrences(records_a))
            if occurrence in in_b]


def _label(record: dict, index: int, first: bool) -> str:
    """How a pair is named in the file and the report (see the module docstring)."""
    line = f"line {index + 1}"
    if record.get("id") is not None:
        return str(record["id"]) if first else f"{record['id']} ({line})"
    if record.get("_id") is not None and first:
        return str(record["_id"])
    return line


def same_example(rec_a: dict, rec_b: dict) -> bool:
    """False only when both records name the example they answer and the two differ; an unknown
    hash (records from LongBench, or from before example_sha256) is not a different one."""
    sha_a, sha_b = rec_a.get("example_sha256"), rec_b.get("example_sha256")
    return not (sha_a and sha_b and sha_a != sha_b)


class _Side:
    """One folder's view of a dataset: its task, its records, and eval.py's scores of each line."""

    def __init__(self, task, records: list[dict]):
        self.task, self.records = task, records
        self.result = score_dataset(task, records)
        self.entries = self.result["per_example"]  # one per line, in file order

    def scores(self, index: int) -> dict:
        return self.entries[index].get("scores", {})

    def skipped(self, index: int) -> bool:
        return bool(self.records[index].get("skipped"))

    def extracted(self, index: int):
        record = self.records[index]
        if _failure(record):
            return None
        return run_extraction(self.task.extract, record["pred"], record)

    def view(self, index: int, headline: str) -> dict:
        record = self.records[index]
        return {"pred": _head(record.get("pred")), "extracted": _head(self.extracted(index)),
                "score": self.scores(index).get(headline), "failed": _failure(record)}


def bucket_of(i: int, j: int, side_a: _Side, side_b: _Side, metrics: list[str]) -> str | None:
    """The one bucket the pair (line i of A, line j of B) falls in (the module docstring gives
    the order), or None when nothing differs."""
    rec_a, rec_b = side_a.records[i], side_b.records[j]
    fail_a, fail_b = _failure(rec_a), _failure(rec_b)
    sha_a, sha_b = rec_a.get("prompt_sha256"), rec_b.get("prompt_sha256")
    prompt_differs = sha_a is not None and sha_b is not None and sha_a != sha_b
    if fail_a or fail_b:
        same = fail_a == fail_b and rec_a.get("pred") == rec_b.get("pred") and not prompt_differs
        return None if same else "one side failed"
    if prompt_differs:
        return "prompt differs"
    ext_a, ext_b = side_a.extracted(i), side_b.extracted(j)
    if rec_a["pred"] != rec_b["pred"]:
        return "same answer" if ext_a == ext_b else "output differs"
    if ext_a != ext_b:
        return "extraction differs"
    scores_a, scores_b = side_a.scores(i), side_b.scores(j)
    return "data differs" if any(scores_a[m] != scores_b[m] for m in metrics) else None


def metric_comparison(values_a: list[float], values_b: list[float]) -> dict:
    """mean_a, mean_b, diff (0-100), its paired 95% interval, and McNemar's test when both sides
    are 0/1."""
    mean_a, unrounded_a = percent(values_a)
    mean_b, unrounded_b = percent(values_b)
    mcnemar = None
    if is_binary(values_a) and is_binary(values_b):
        a_only = sum(1 for x, y in zip(values_a, values_b) if x == 1.0 and y == 0.0)
        b_only = sum(1 for x, y in zip(values_a, values_b) if x == 0.0 and y == 1.0)
        mcnemar = {"a_only_right": a_only, "b_only_right": b_only,
                   "p": mcnemar_exact(a_only, b_only)}
    return {"mean_a": mean_a, "mean_b": mean_b,
            "diff": None if mean_a is None else round(unrounded_b - unrounded_a, 2),
            "ci95": paired_difference_interval(values_a, values_b), "mcnemar": mcnemar}


def _split_pairs(side_a: _Side, side_b: _Side) -> tuple[list[tuple], list[str]]:
    """(label, i, j) of the pairs of the same example, and the labels of the mismatched ones."""
    seen: set[tuple[str, str]] = set()
    pairs, mismatched = [], []
    for i, j in pair_records(side_a.records, side_b.records):
        rec_a, key = side_a.records[i], pair_key(side_a.records[i])
        label = _label(rec_a, i, key not in seen)
        seen.add(key)
        if same_example(rec_a, side_b.records[j]):
            pairs.append((label, i, j))
        else:
            mismatched.append(label)
    return pairs, mismatched


def compare_dataset(task_a, records_a: list[dict], task_b, records_b: list[dict]) -> dict:
    """The dataset's entry of diff_<A>_vs_<B>.json (see the module docstring)."""
    side_a, side_b = _Side(task_a, records_a), _Side(task_b, records_b)
    pairs, mismatched = _split_pairs(side_a, side_b)
    metrics = [m for m in side_a.result["metrics"] if m in side_b.result["metrics"]]
    headline = side_a.result["headline_metric"]
    headline = headline if headline in metrics else metrics[0]
    scored = [(label, i, j) for label, i, j in pairs
              if not side_a.skipped(i) and not side_b.skipped(j)]
    per_metric = {m: metric_comparison([side_a.scores(i)[m] for _, i, _ in scored],
                                       [side_b.scores(j)[m] for _, _, j in scored])
                  for m in metrics}
    buckets, samples = {name: 0 for name in BUCKETS}, []
    for label, i, j in pairs:
        bucket = bucket_of(i, j, side_a, side_b, metrics)
        if bucket is not None:
            buckets[bucket] += 1
            samples.append({"id": label, "bucket": bucket, "a": side_a.view(i, headline),
                            "b": side_b.view(j, headline)})
    regressions = [label for label, i, j in scored
                   if side_a.scores(i)[headline] > side_b.scores(j)[headline]]
    used = len(pairs) + len(mismatched)  # records of each side that found a partner
    return {"headline_metric": headline, "paired": len(pairs), "scored_pairs": len(scored),
            "mismatched": len(mismatched), "mismatched_ids": mismatched,
            "unmatched": {"a_only": len(records_a) - used, "b_only": len(records_b) - used},
            "metrics": per_metric, "buckets": buckets, "samples": samples,
            "regressions": regressions}


def diff_path(dir_a: Path, dir_b: Path) -> Path:
    return dir_b.resolve().parent / f"diff_{dir_a.resolve().name}_vs_{dir_b.resolve().name}.json"


def build_diff(dir_a: Path, dir_b: Path, only: set[str] | None,
               notes: list[str]) -> dict:
    """The whole diff document; raises RecordError / StorageError / KeyError on bad input.
    `resolve_task` and `list_files` are eval.py's task_for_file and prediction_files, so both sides
    are read as eval.py reads them."""
    for folder in (dir_a, dir_b):
        if not folder.is_dir():
            raise RecordError(folder, None, "no such folder")
    files_a = {f.stem: f for f in prediction_files(dir_a)}
    files_b = {f.stem: f for f in prediction_files(dir_b)}
    if only is not None:
        files_a = {k: v for k, v in files_a.items() if k in only}
        files_b = {k: v for k, v in files_b.items() if k in only}
    for name, folder, other in ((dir_a.name, files_a, files_b), (dir_b.name, files_b, files_a)):
        alone = sorted(set(folder) - set(other))
        if alone:
            notes.append(f"only {name} has {', '.join(alone)}: not compared")
    datasets = {}
    for name in sorted(set(files_a) & set(files_b)):
        task_a, task_b = task_for_file(files_a[name], notes), task_for_file(files_b[name], notes)
        datasets[name] = compare_dataset(task_a, read_records(files_a[name]),
                                         task_b, read_records(files_b[name]))
    if not datasets:
        raise RecordError(dir_b, None, f"no dataset in common with {dir_a}")
    return {"a": dir_a.resolve().name, "b": dir_b.resolve().name, "datasets": datasets}


def diff_table(doc: dict) -> list[str]:
    """The printed report: a row per dataset and metric, then each dataset's pairing, buckets and
    first regressions."""
    rows = [("dataset", "metric", "paired", doc["a"], doc["b"], "B-A", "ci95 of B-A", "McNemar p")]
    for name, d in doc["datasets"].items():
        for metric, m in d["metrics"].items():
            ci = "-" if m["ci95"] is None else f"[{m['ci95'][0]:.2f}, {m['ci95'][1]:.2f}]"
            p = "-" if m["mcnemar"] is None else f"{m['mcnemar']['p']:.4g}"
            rows.append((name, metric, str(d["scored_pairs"]), score_text(m["mean_a"]),
                         score_text(m["mean_b"]), score_text(m["diff"]), ci, p))
    lines = text_table(rows, left={0, 1})
    for name, d in doc["datasets"].items():
        lines += _dataset_lines(name, d, doc["a"], doc["b"])
    return lines


def _dataset_lines(name: str, d: dict, a: str, b: str) -> list[str]:
    counts = ", ".join(f"{bucket} {k}" for bucket, k in d["buckets"].items() if k) or "none"
    mismatched = d.get("mismatched", 0)
    lines = [f"{name}: {d['paired']} paired ({d['unmatched']['a_only']} only in {a}, "
             f"{d['unmatched']['b_only']} only in {b}"
             f"{f', {mismatched} mismatched' if mismatched else ''}); differing samples: {counts}"]
    if mismatched:
        ids = d["mismatched_ids"]
        more = f" and {len(ids) - SHOWN_MISMATCHED} more" if len(ids) > SHOWN_MISMATCHED else ""
        lines.append(f"  {mismatched} mismatched pairs left out of every figure: the same id "
                     f"names another example in {a} and {b} (example_sha256 differs): "
                     f"{', '.join(ids[:SHOWN_MISMATCHED])}{more}; ids made from line positions "
                     "shift when the data gains or loses a line")
    shown = {s["id"]: s for s in d["samples"]}
    for rid in d["regressions"][:SHOWN_REGRESSIONS]:
        s = shown.get(rid)
        if s is not None:
            lines.append(f"  regression {rid} ({s['bucket']}): {a} {_short(s['a'])} | "
                         f"{b} {_short(s['b'])}")
    if len(d["regressions"]) > SHOWN_REGRESSIONS:
        more = len(d["regressions"]) - SHOWN_REGRESSIONS
        lines.append(f"  ... {more} more regressions in the file")
    return lines


def _short(view: dict) -> str:
    text = view["failed"] or view["pred"] or ""
    text = text if len(text) <= 60 else text[:60] + "…"
    return f"{text!r} -> {view['score']}"


def run_diff(dir_a: Path, dir_b: Path, only: set[str] | None = None,
             quiet: bool = False) -> int:
    """eval.py diff: compare, write the file, print the table; 2 and nothing written on bad
    input."""
    notes: list[str] = []
    try:
        doc = build_diff(dir_a, dir_b, only, notes)
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


def add_arguments(parser) -> None:
    parser.add_argument("dir_a", type=Path, metavar="DIR_A", help="the first prediction folder (the baseline)")
    parser.add_argument("dir_b", type=Path, metavar="DIR_B", help="the second prediction folder")
    parser.add_argument("--datasets", type=dataset_names, default=None,
                        help="comma-separated datasets to compare (default: every dataset both hold)")
    parser.add_argument("--quiet", action="store_true", help="print only errors")


@eval_command("diff", help="is B better than A on the same items: paired intervals, McNemar, why samples differ")
def run(args) -> int:
    return run_diff(args.dir_a, args.dir_b, args.datasets, args.quiet)
