"""Scores of a prediction file written with `inference.py --perturb`: the original examples, each perturbation, and
HELM's robustness figure.

A record with a "perturbation" label is a perturbed copy of the example named by its "original_id"; a record whose
label is null is an original. The dataset's score (result.json, the tables) is the originals' score, so it stays
comparable with a run without --perturb. Beside it, result["robustness"] holds:
    perturbations   {label: {"n", "score" (headline metric), "delta" (score - the originals' score)}}
    worst_case      per original, the lowest headline value over the original and its copies, averaged (x 100):
                    HELM's robustness figure; it is never above the originals' score
    right_to_wrong  originals with full marks (the headline metric's best value, Metric.best: 1.0, or ROUGE's
                    0.999999995) of which some copy has less
    copies_without_original   copies whose original has no scored record (counted, left out of worst_case)

Usage:
    result = score_with_perturbations(task, records)   # score_dataset's result, plus "robustness" when perturbed
"""
from __future__ import annotations

from Eval.metrics import get_metric
from Eval.scoring.scorer import score_dataset
from Eval.tasks import Task


def is_perturbed(records: list[dict]) -> bool:
    return any("perturbation" in r for r in records)


def score_with_perturbations(task: Task, records: list[dict], time_limit: float | None = None) -> dict:
    if not is_perturbed(records):
        return score_dataset(task, records, time_limit)
    originals = [(line, r) for line, r in enumerate(records, 1) if r.get("perturbation") is None]
    result = _score_lines(task, originals, time_limit)
    headline = result["headline_metric"]
    base = _headline_values(result, headline)
    worst = dict(base)
    labels: dict[str, list] = {}
    for line, record in enumerate(records, 1):
        if record.get("perturbation") is not None:
            labels.setdefault(str(record["perturbation"]), []).append((line, record))
    perturbations, orphans, per_example = {}, 0, list(result["per_example"])
    for label, lines in labels.items():
        scored = _score_lines(task, lines, time_limit)
        per_example += [{**entry, "perturbation": label} for entry in scored["per_example"]]
        score = scored["metrics"][headline]["score"]
        original_score = result["metrics"][headline]["score"]
        perturbations[label] = {"n": scored["n"], "score": score, "ci95": scored["metrics"][headline].get("ci95"),
                                "delta": None if score is None or original_score is None
                                else round(score - original_score, 2)}
        for (_, record), value in zip(lines, _per_line(scored, headline)):
            original = str(record.get("original_id"))
            if value is None:
                continue
            if original not in base:
                orphans += 1
            else:
                worst[original] = min(worst[original], value)
    best = get_metric(headline)
    right = [i for i, v in base.items() if best.full_marks(v)]
    result["robustness"] = {
        "headline_metric": headline, "original": {"n": len(base), "score": result["metrics"][headline]["score"]},
        "perturbations": perturbations,
        "worst_case": round(100 * sum(worst.values()) / len(worst), 2) if worst else None,
        "right_to_wrong": sum(1 for i in right if not best.full_marks(worst[i])), "right_originals": len(right),
        "copies_without_original": orphans}
    per_example.sort(key=lambda e: e["line"])
    return {**result, "per_example": per_example}


def _score_lines(task: Task, lines: list[tuple[int, dict]], time_limit: float | None) -> dict:
    """score_dataset over some lines of the file, its per-example line numbers mapped back to the file's."""
    result = score_dataset(task, [r for _, r in lines], time_limit)
    for entry, (line, _) in zip(result["per_example"], lines):
        entry["line"] = line
    return result


def _per_line(result: dict, headline: str) -> list:
    """The headline value of each scored line (None for a skipped one), in order."""
    return [e["scores"][headline] if "scores" in e else None for e in result["per_example"]]


def _headline_values(result: dict, headline: str) -> dict[str, float]:
    return {str(e["id"]): e["scores"][headline] for e in result["per_example"] if "scores" in e}
