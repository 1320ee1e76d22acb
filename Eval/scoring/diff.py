"""`python eval.py diff DIR_A DIR_B`: is B better than A on the same items, and why they differ
(the pairing, the buckets, the file written beside B: docs/scoring.md).

Usage:
    python eval.py diff pred/base pred/tuned [--datasets trec,custom_zh] [--quiet]
"""
from __future__ import annotations

import dataclasses
import json
import sys
from collections import Counter
from pathlib import Path

from Eval.commands import eval_command
from Eval.names import dataset_name_set, model_folder_hint
from Eval.records import RecordError
from Eval.registry import did_you_mean
from Eval.scoring.bergen import dataset_of, read_predictions
from Eval.scoring.explain import head
from Eval.scoring.folders import chosen_task, prediction_files, prediction_folder
from Eval.scoring.intervals import is_binary, mcnemar_exact, paired_difference_interval
from Eval.scoring.provenance import (check_prediction_file, file_sha256, folder_name,
                                      not_the_models)
from Eval.scoring.saved_task import scored_options
from Eval.scoring.scorer import percent, score_dataset
from Eval.scoring.sections import render_text
from Eval.scoring.sections.diff import diff_table
from Eval.storage import StorageError, commit_files, json_bytes, output_lock, read_json_object

BUCKETS = ("one side failed", "prompt differs", "same answer", "output differs",
           "extraction differs", "data differs")
SHOWN = 5  # regressions and mismatched ids per dataset in the printed report; the file has all


def _failure(record: dict):
    if record.get("skipped"):
        return f"skipped: {record['skipped']}"
    return None if record.get("error") is None else f"error: {record['error']}"


def pair_key(record: dict) -> tuple[str, str]:
    """Its id; else example_sha256; else (LongBench / TinyEval lines) the example's content."""
    if record.get("id") is not None:
        return ("id", str(record["id"]))
    if record.get("example_sha256"):
        return ("example", record["example_sha256"])
    content = [record["answers"], record.get("all_classes"), record.get("length"),
               record.get("_id")]
    return ("content", json.dumps(content, ensure_ascii=False))


def _occurrences(records: list[dict]):
    seen: Counter = Counter()
    for record in records:
        key = pair_key(record)
        yield key, seen[key]
        seen[key] += 1


def pair_records(records_a: list[dict], records_b: list[dict]) -> list[tuple[int, int]]:
    in_b = {occurrence: j for j, occurrence in enumerate(_occurrences(records_b))}
    return [(i, in_b[occurrence]) for i, occurrence in enumerate(_occurrences(records_a))
            if occurrence in in_b]


def same_example(rec_a: dict, rec_b: dict) -> bool:
    """False only when both records name their example and the two differ."""
    sha_a, sha_b = rec_a.get("example_sha256"), rec_b.get("example_sha256")
    return not (sha_a and sha_b and sha_a != sha_b)


def _label(record: dict, index: int, first: bool) -> str:
    line = f"line {index + 1}"
    if record.get("id") is not None:
        return str(record["id"]) if first else f"{record['id']} ({line})"
    return str(record["_id"]) if record.get("_id") is not None and first else line


def bucket_of(rec_a: dict, rec_b: dict, entry_a: dict, entry_b: dict, metrics: list[str]):
    """The first of BUCKETS that applies to a pair, or None. A prompt hash only one side has (older
    records) is unknown, not changed."""
    fail_a, fail_b = _failure(rec_a), _failure(rec_b)
    sha_a, sha_b = rec_a.get("prompt_sha256"), rec_b.get("prompt_sha256")
    prompt_differs = sha_a is not None and sha_b is not None and sha_a != sha_b
    if fail_a or fail_b:
        same = fail_a == fail_b and rec_a.get("pred") == rec_b.get("pred") and not prompt_differs
        return None if same else "one side failed"
    if prompt_differs:
        return "prompt differs"
    same_answer = entry_a["extracted"] == entry_b["extracted"]
    if rec_a["pred"] != rec_b["pred"]:
        return "same answer" if same_answer else "output differs"
    if not same_answer:
        return "extraction differs"
    differs = any(entry_a["scores"].get(m) != entry_b["scores"].get(m) for m in metrics)
    return "data differs" if differs else None  # references or classes changed


def metric_comparison(values_a: list[float], values_b: list[float]) -> dict:
    mean_a, unrounded_a = percent(values_a)
    mean_b, unrounded_b = percent(values_b)
    mcnemar = None
    if is_binary(values_a) and is_binary(values_b):
        pairs = Counter(zip(values_a, values_b))  # (A's value, B's value) -> how many
        mcnemar = {"a_only_right": pairs[1.0, 0.0], "b_only_right": pairs[0.0, 1.0],
                   "p": mcnemar_exact(pairs[1.0, 0.0], pairs[0.0, 1.0])}
    return {"n": len(values_a), "mean_a": mean_a, "mean_b": mean_b,
            "diff": None if mean_a is None else round(unrounded_b - unrounded_a, 2),
            "ci95": paired_difference_interval(values_a, values_b), "mcnemar": mcnemar}


def _view(record: dict, entry: dict, headline: str) -> dict:
    return {"pred": head(record.get("pred")), "extracted": head(entry.get("extracted")),
            "score": entry.get("scores", {}).get(headline), "failed": _failure(record)}


def compare_dataset(task_a, records_a: list[dict], task_b, records_b: list[dict]) -> dict:
    result_a, result_b = score_dataset(task_a, records_a), score_dataset(task_b, records_b)
    entries_a, entries_b = result_a["per_example"], result_b["per_example"]
    seen, pairs, mismatched = set(), [], []
    for i, j in pair_records(records_a, records_b):
        label = _label(records_a[i], i, pair_key(records_a[i]) not in seen)
        seen.add(pair_key(records_a[i]))
        if same_example(records_a[i], records_b[j]):
            pairs.append((label, i, j))
        else:
            mismatched.append(label)
    metrics = [m for m in result_a["metrics"] if m in result_b["metrics"]]
    headline = result_a["headline_metric"]
    headline = headline if headline in metrics else metrics[0]
    scored = [(label, entries_a[i]["scores"], entries_b[j]["scores"]) for label, i, j in pairs
              if "scores" in entries_a[i] and "scores" in entries_b[j]]
    # A ranking metric has no value for a query the run or qrels lack: such pairs drop out of it.
    per_metric = {m: metric_comparison([a[m] for _, a, b in scored if m in a and m in b],
                                       [b[m] for _, a, b in scored if m in a and m in b])
                  for m in metrics}
    regressions = [label for label, a, b in scored
                   if headline in a and headline in b and a[headline] > b[headline]]
    buckets, samples = dict.fromkeys(BUCKETS, 0), []
    for label, i, j in pairs:
        bucket = bucket_of(records_a[i], records_b[j], entries_a[i], entries_b[j], metrics)
        if bucket is not None:
            buckets[bucket] += 1
            samples.append({"id": label, "bucket": bucket,
                            "a": _view(records_a[i], entries_a[i], headline),
                            "b": _view(records_b[j], entries_b[j], headline)})
    used = len(pairs) + len(mismatched)  # records of each side that found a partner
    return {"headline_metric": headline, "paired": len(pairs), "scored_pairs": len(scored),
            "mismatched": len(mismatched), "mismatched_ids": mismatched,
            "unmatched": {"a_only": len(records_a) - used, "b_only": len(records_b) - used},
            "metrics": per_metric, "buckets": buckets, "samples": samples,
            "regressions": regressions}


def common_files(dir_a: Path, dir_b: Path, only: set[str] | None,
                 notes: list[str]) -> dict[str, tuple[Path, Path]]:
    """dataset -> (A's prediction file, B's) for the datasets both folders hold (of `only`)."""
    for folder in (dir_a, dir_b):
        if not folder.is_dir():  # a bare name is a model folder of pred/ too (prediction_folder)
            hint = model_folder_hint(Path("pred"), str(folder))
            raise RecordError(folder, None, "no such folder" + (
                f", nor is pred/{folder}.{hint}" if len(folder.parts) == 1 else ""))
    files_a, files_b = ({dataset_of(f): f for f in prediction_files(folder)
                         if only is None or dataset_of(f) in only} for folder in (dir_a, dir_b))
    for name in sorted(only or ()):
        for folder, files in ((dir_a, files_a), (dir_b, files_b)):
            if name not in files:
                held = sorted(dataset_of(f) for f in prediction_files(folder))
                raise RecordError(folder, None, f"no prediction file {name}.jsonl (named in "
                                  f"--datasets){did_you_mean(name, held, lead='.')}")
    for name, folder, other in ((dir_a.name, files_a, files_b), (dir_b.name, files_b, files_a)):
        alone = sorted(set(folder) - set(other))
        if alone:
            notes.append(f"only {name} has {', '.join(alone)}: not compared")
    if not set(files_a) & set(files_b):
        raise RecordError(dir_b, None, f"no dataset in common with {dir_a}")
    return {name: (files_a[name], files_b[name]) for name in sorted(set(files_a) & set(files_b))}


def one_folder_twice(dir_a: Path, dir_b: Path) -> str | None:
    """The typo of one folder named as both A and B (every sample the same, every pair a tie)."""
    if dir_a.resolve() == dir_b.resolve():
        return f"{dir_a} is both DIR_A and DIR_B; name two prediction folders"
    return None


def build_diff(dir_a: Path, dir_b: Path, only: set[str] | None, notes: list[str]) -> dict:
    datasets = {}
    for name, (file_a, file_b) in common_files(dir_a, dir_b, only, notes).items():
        task_a, task_b = (chosen_task(f, notes, *scored_options(f.parent, name)[:3])
                          for f in (file_a, file_b))  # each side as it was last scored
        if not set(task_a.metrics) & set(task_b.metrics):
            raise RecordError(file_b, None, f"scored with {', '.join(task_b.metrics)}, {file_a} "
                              f"with {', '.join(task_a.metrics)}: no metric in common; score one "
                              "again with the other's --metrics")
        records_a, records_b = read_predictions(file_a), read_predictions(file_b)
        for path, records in ((file_a, records_a), (file_b, records_b)):
            notes += [f"{path}: {w}" for w in not_the_models(check_prediction_file(path, records))]
        datasets[name] = {**compare_dataset(task_a, records_a, task_b, records_b),
                          "source_sha256_a": file_sha256(file_a),
                          "source_sha256_b": file_sha256(file_b)}
    home = dir_b.resolve().parent  # where the diff file goes
    return {"a": dir_a.resolve().name, "b": dir_b.resolve().name,
            "a_dir": folder_name(dir_a, home), "b_dir": folder_name(dir_b, home),
            "datasets": datasets}


def _dataset_lines(name: str, d: dict, a: str, b: str) -> list[str]:
    def short(view: dict) -> str:
        return f"{head(view['failed'] or view['pred'] or '', 60)!r} -> {view['score']}"

    counts = ", ".join(f"{bucket} {k}" for bucket, k in d["buckets"].items() if k) or "none"
    mismatched, ids = d["mismatched"], d["mismatched_ids"]
    lines = [f"{name}: {d['paired']} paired ({d['unmatched']['a_only']} only in {a}, "
             f"{d['unmatched']['b_only']} only in {b}"
             f"{f', {mismatched} mismatched' if mismatched else ''}); differing samples: {counts}"]
    if mismatched:
        more = f" and {len(ids) - SHOWN} more" if len(ids) > SHOWN else ""
        lines.append(f"  {mismatched} mismatched pairs left out of every figure: the same id "
                     f"names another example in {a} and {b} (example_sha256 differs): "
                     f"{', '.join(ids[:SHOWN])}{more}; ids made from line positions "
                     "shift when the data gains or loses a line")
    shown = {s["id"]: s for s in d["samples"]}
    for s in (shown[rid] for rid in d["regressions"][:SHOWN] if rid in shown):
        lines.append(f"  regression {s['id']} ({s['bucket']}): {a} {short(s['a'])} | "
                     f"{b} {short(s['b'])}")
    if len(d["regressions"]) > SHOWN:
        lines.append(f"  ... {len(d['regressions']) - SHOWN} more regressions in the file")
    return lines


def add_arguments(parser) -> None:
    parser.add_argument("dir_a", type=prediction_folder, metavar="DIR_A",
                        help="the first prediction folder (the baseline), or a model under pred/")
    parser.add_argument("dir_b", type=prediction_folder, metavar="DIR_B",
                        help="the second prediction folder, or a model under pred/")
    parser.add_argument("--datasets", type=dataset_name_set, default=None,
                        help="comma-separated datasets to compare (default: every dataset both "
                             "hold)")
    parser.add_argument("--quiet", action="store_true", help="no tables: only errors and notes")


@eval_command("diff", help="is B better than A on the same items: paired intervals, McNemar, "
                           "why samples differ")
def run(args) -> int:
    notes: list[str] = []
    if one_folder_twice(args.dir_a, args.dir_b):
        print(f"error: {one_folder_twice(args.dir_a, args.dir_b)}", file=sys.stderr)
        return 2
    try:
        doc = build_diff(args.dir_a, args.dir_b, args.datasets, notes)
    except (RecordError, StorageError, KeyError) as err:  # KeyError: an unknown dataset / metric
        why = err.args[0] if isinstance(err, KeyError) and err.args else err
        print(f"error: nothing was written: {why}", file=sys.stderr)
        return 2
    out = args.dir_b.resolve().parent / f"diff_{doc['a']}_vs_{doc['b']}.json"
    with output_lock(out, "eval.py diff", wait=True):  # read and written by one process
        saved, _ = read_json_object(out)
        datasets, same = doc["datasets"], all(saved.get(k) == doc[k] for k in ("a_dir", "b_dir"))
        if args.datasets and same and isinstance(saved.get("datasets"), dict):  # the others stay
            datasets = dict(sorted({**saved["datasets"], **datasets}.items()))
        commit_files(out.parent, {out.name: json_bytes({**doc, "datasets": datasets})})
    for note in notes:
        print(f"note: {note}")
    if not args.quiet:
        print(render_text(dataclasses.replace(diff_table(doc, out.name), note="")))
        for name, d in doc["datasets"].items():
            print("\n".join(_dataset_lines(name, d, doc["a"], doc["b"])))
        print(f"-> {out}")
    return 0
