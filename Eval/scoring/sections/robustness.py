"""Robustness (inference.py --perturb, Eval/scoring/robustness.py): per dataset, each model's score
on the originals, on each perturbation's copies, HELM's worst case and right -> wrong."""
from __future__ import annotations

from collections import Counter

from Eval.scoring.sections import Results, Table, section
from Eval.scoring.sections.scores import CLEAN_STATUSES, datasets_of, score_text, status_of

NOTE = ("worst case: per example the lowest score over the original and its perturbed copies, "
        "averaged (HELM); right -> wrong: originals with full marks of which some copy scored less")


@section("robustness", order=40)
def robustness(results: Results) -> list[Table]:
    found = []
    for d in datasets_of(results):
        entries = {m: e[d] for m, e in sorted(results.by_model.items())
                   if e.get(d, {}).get("robustness")}
        if not entries:
            continue
        runs = {m: e["robustness"] for m, e in entries.items()}
        labels = sorted({label for rob in runs.values() for label in rob["perturbations"]})
        metrics = Counter(rob["headline_metric"] for rob in runs.values())
        metric = metrics.most_common(1)[0][0]  # a row scored with another says its own
        rows = [[_row_label(m, entries[m], metric), score_text(rob["original"]["score"]),
                 *(score_text(rob["perturbations"].get(x, {}).get("score")) for x in labels),
                 score_text(rob["worst_case"]),
                 f"{rob['right_to_wrong']} of {rob['right_originals']}"] for m, rob in runs.items()]
        found.append(Table(f"{d}: robustness ({metric})",
                           ["model", "original", *labels, "worst case", "right -> wrong"], rows,
                           NOTE))
    return found


def _row_label(model: str, entry: dict, metric: str) -> str:
    """The model, with the row's own metric when it is not the title's, and a file's mark
    (modified, partial, ...) as the scores table gives it."""
    own, status = entry["robustness"]["headline_metric"], status_of(entry)
    marks = [m for m in (own, status) if m not in (metric, *CLEAN_STATUSES)]
    return f"{model} ({', '.join(marks)})" if marks else model
