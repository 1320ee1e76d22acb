"""Unlearning (eval.py unlearning): every TOFU_SUMMARY.json / MUSE_SUMMARY.json one or two folders
under the root, and, for masked / diffusion models, the mean label probability at each confidence
rank (most confident first), from an EVAL log's confidence-ordered metric or from score records
carrying confidence_ordered_probs."""
from __future__ import annotations

import json
from pathlib import Path

from Eval.scoring.sections import Results, Table, read_json_object, section

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
                kind = path.name.split("_")[0]
                title = f"{path.parent.relative_to(results.root)}: {kind} summary"
                rows = [[k, _figure(v)] for k, v in sorted(doc.items())]
                found.append(Table(title, ["metric", "value"], rows))
    return found


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


def _from_records(path: Path) -> list[list[float]]:
    lists = []
    try:
        for text in path.read_text(encoding="utf-8").splitlines():
            saved = json.loads(text).get("confidence_ordered_probs") if text.strip() else None
            if not isinstance(saved, dict):
                return lists  # not a masked model's score records
            keys = ["answer"] if "answer" in saved else sorted(saved)
            lists += [lst for k in keys for lst in prob_lists(saved[k])]
    except (OSError, ValueError, AttributeError):
        return []
    return lists


@section("confidence", order=85)
def confidence(results: Results) -> list[Table]:
    found = []
    for pattern in DEPTH if results.root else ():
        for folder in sorted(p for p in results.root.glob(pattern) if p.is_dir()):
            logs = sorted(folder.glob("*_EVAL.json"))
            curves = [c for log in logs for c in _from_log(log)]
            records = sorted(folder.glob("*.jsonl"))
            curves = curves or [(f"{folder.name}/{f.name}", lists)
                                for f in records if (lists := _from_records(f))]
            for label, lists in curves:
                at_rank = ([lst[r] for lst in lists if len(lst) > r]
                           for r in range(max(len(lst) for lst in lists)))
                rows = [[str(r + 1), f"{sum(at) / len(at):.4f}"] for r, at in enumerate(at_rank)]
                found.append(Table(f"{label}: mean label probability by confidence rank "
                                   f"({len(lists)} answers)", ["rank", "mean probability"], rows))
    return found
