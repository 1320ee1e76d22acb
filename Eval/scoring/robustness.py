"""Scores of a file written with `inference.py --perturb` (a record with a "perturbation" label is a
copy of its "original_id"): the dataset's score is the originals'; result["robustness"] adds each
perturbation's score and delta, HELM's worst case and right_to_wrong.

Usage:
    result = score_with_perturbations(task, records)   # score_dataset's result, + "robustness"
"""
from __future__ import annotations

import math

from Eval.metrics import METRICS
from Eval.scoring.scorer import score_dataset
from Eval.tasks import Task


def score_with_perturbations(task: Task, records: list[dict],
                             time_limit: float | None = None) -> dict:
    if all(r.get("perturbation") is None for r in records):  # originals only: a plain run's
        return score_dataset(task, records, time_limit)
    groups: dict = {None: []}  # perturbation label (None: the originals) -> [(line, record)]
    for line, record in enumerate(records, 1):
        label = record.get("perturbation")
        groups.setdefault(None if label is None else str(label), []).append((line, record))
    result = _score_lines(task, groups.pop(None), time_limit)
    headline = result["headline_metric"]
    original_score = result["metrics"][headline]["score"]
    # (id, score) of each scored original line: the worst case is over as many as the score
    base = [(str(e["id"]), e["scores"][headline]) for e in result["per_example"] if "scores" in e]
    ids, lowest, perturbations, orphans = {i for i, _ in base}, {}, {}, 0
    per_example = list(result["per_example"])
    for label, lines in groups.items():
        scored = _score_lines(task, lines, time_limit)
        per_example += [{**entry, "perturbation": label} for entry in scored["per_example"]]
        score = scored["metrics"][headline]["score"]
        perturbations[label] = {"n": scored["n"], "score": score,
                                "ci95": scored["metrics"][headline].get("ci95"),
                                "delta": None if score is None or original_score is None
                                else round(score - original_score, 2)}
        for (_, record), entry in zip(lines, scored["per_example"]):
            original = str(record.get("original_id"))
            if "scores" not in entry:
                continue
            if original not in ids:
                orphans += 1
            else:
                lowest[original] = min(lowest.get(original, math.inf), entry["scores"][headline])
    best = METRICS[headline]
    worst = [min(v, lowest.get(i, v)) for i, v in base]
    right = [w for (_, v), w in zip(base, worst) if full_marks(best, v)]
    result["robustness"] = {
        "headline_metric": headline, "original": {"n": len(base), "score": original_score},
        "perturbations": perturbations,
        "worst_case": round(100 * sum(worst) / len(worst), 2) if worst else None,
        "right_to_wrong": sum(1 for w in right if not full_marks(best, w)),
        "right_originals": len(right), "copies_without_original": orphans}
    per_example.sort(key=lambda e: e["line"])
    return {**result, "per_example": per_example}


def _score_lines(task: Task, lines: list[tuple[int, dict]], time_limit: float | None) -> dict:
    result = score_dataset(task, [r for _, r in lines], time_limit)
    for entry, (line, _) in zip(result["per_example"], lines):
        entry["line"] = line
    return result


def full_marks(metric, value: float) -> bool:
    """Whether `value` is the metric's best (a perfect answer's), up to float noise."""
    return math.isclose(value, metric.best, rel_tol=1e-9) or value > metric.best
