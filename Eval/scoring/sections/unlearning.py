"""Unlearning (eval.py unlearning): every TOFU / MUSE summary one or two folders under the root,
and for masked / diffusion models the mean label probability at each confidence rank, from an EVAL
log's confidence-ordered metric."""
from __future__ import annotations

from pathlib import Path

from Eval.scoring.sections import Results, Table, section
from Eval.storage import read_json_object

DEPTH = ("*", "*/*")  # ROOT/<model>/ (eval.py unlearning) and ROOT/open-unlearning/<run>/


def _figure(value) -> str:
    if value is None:
        return "null"
    return f"{value:.6g}" if isinstance(value, (int, float)) else str(value)


@section("unlearning", order=80)
def unlearning(results: Results) -> list[Table]:
    found = []
    for pattern in DEPTH if results.root else ():
        for path in sorted(results.root.glob(f"{pattern}/*_SUMMARY.json")):
            doc, unreadable = read_json_object(path)
            if not unreadable:
                kind, folder = path.name.split("_")[0], path.parent.relative_to(results.root)
                rows = [[k, _figure(v)] for k, v in sorted(doc.items())]
                found.append(Table(f"{folder}: {kind} summary", ["metric", "value"], rows,
                                   _out_of_date(path, kind.lower())))
    return found


def _out_of_date(path: Path, suite: str) -> str:
    """A note when score records beside the summary were written after it was made from them."""
    made = path.stat().st_mtime_ns
    newer = [p.name for p in sorted(path.parent.glob(f"{suite}_*.jsonl"))
             if p.stat().st_mtime_ns > made]
    return "" if not newer else (f"out of date: {', '.join(newer)} changed since this summary was "
                                 f"made; run eval.py unlearning {suite} on this folder again")


def prob_lists(value) -> list[list[float]]:
    """A sample's confidence-ordered lists (one option: a list of floats; several: nested)."""
    if not isinstance(value, list) or not value:
        return []
    if all(isinstance(p, (int, float)) for p in value):
        return [[float(p) for p in value]]
    return [lst for v in value for lst in prob_lists(v)]


def _from_log(path: Path) -> list[tuple[str, list]]:
    log, _ = read_json_object(path)
    curves = []
    for name, result in sorted(log.items()):
        if "confidence_ordered" in name and isinstance(result, dict):
            samples = (result.get("value_by_index") or {}).values()
            lists = [lst for v in samples if isinstance(v, dict)
                     for lst in prob_lists(v.get("confidence_ordered_probs"))]
            if lists:
                curves.append((f"{path.parent.name}/{path.name}: {name}", lists))
    return curves


@section("confidence", order=85)
def confidence(results: Results) -> list[Table]:
    found = []
    for pattern in DEPTH if results.root else ():
        for log in sorted(results.root.glob(f"{pattern}/*_EVAL.json")):
            for label, lists in _from_log(log):
                at_rank = ([lst[r] for lst in lists if len(lst) > r]
                           for r in range(max(len(lst) for lst in lists)))
                rows = [[str(r + 1), f"{sum(at) / len(at):.4f}"] for r, at in enumerate(at_rank)]
                found.append(Table(f"{label}: mean label probability by confidence rank "
                                   f"({len(lists)} answers)", ["rank", "mean probability"], rows))
    return found
