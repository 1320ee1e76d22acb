"""Robustness (inference.py --perturb, Eval/scoring/robustness.py): per dataset, each model's score
on the originals, on each perturbation's copies, HELM's worst case and right -> wrong."""
from __future__ import annotations

from Eval.scoring.sections import Results, Table, section
from Eval.scoring.sections.scores import datasets_of, score_text

NOTE = ("worst case: per example the lowest score over the original and its perturbed copies, "
        "averaged (HELM); right -> wrong: originals with full marks of which some copy scored less")


@section("robustness", order=40)
def robustness(results: Results) -> list[Table]:
    found = []
    for d in datasets_of(results):
        runs = {m: e[d]["robustness"] for m, e in sorted(results.by_model.items())
                if e.get(d, {}).get("robustness")}
        if not runs:
            continue
        labels = sorted({label for rob in runs.values() for label in rob["perturbations"]})
        rows = [[m, score_text(rob["original"]["score"]),
                 *(score_text(rob["perturbations"].get(x, {}).get("score")) for x in labels),
                 score_text(rob["worst_case"]),
                 f"{rob['right_to_wrong']} of {rob['right_originals']}"] for m, rob in runs.items()]
        metric = next(iter(runs.values()))["headline_metric"]
        found.append(Table(f"{d}: robustness ({metric})",
                           ["model", "original", *labels, "worst case", "right -> wrong"], rows,
                           NOTE))
    return found
