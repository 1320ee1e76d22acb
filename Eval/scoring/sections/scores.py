"""The headline table, models x datasets, each cell `score (n=N)` with its marks (", 2 skipped", a
data-check status such as ", partial", † for other examples than its column's); and its intervals.
"""
from __future__ import annotations

from collections import Counter

from Eval.scoring.sections import Results, Table, section

CLEAN_STATUSES = ("ok", "unchecked")  # the data-check statuses whose numbers stand as they are


def status_of(entry: dict) -> str:
    check = entry.get("data_check")
    return check.get("status", "unchecked") if isinstance(check, dict) else "unchecked"


def score_text(value) -> str:
    number = isinstance(value, (int, float)) and not isinstance(value, bool)
    return f"{value:.2f}" if number else "-"


def ci_text(metric: dict) -> str:
    ci = metric.get("ci95")
    return "-" if not ci else f"[{ci[0]:.2f}, {ci[1]:.2f}]"


def skipped_count(entry: dict) -> int:
    skipped = entry.get("skipped")
    return skipped.get("count", 0) if isinstance(skipped, dict) else 0


def n_text(entry: dict) -> str:
    skipped = [f"{skipped_count(entry)} skipped"] if skipped_count(entry) else []
    status = status_of(entry)
    return ", ".join([str(headline_n(entry)), *skipped]
                     + ([] if status in CLEAN_STATUSES else [status]))


def headline_n(entry: dict) -> int:
    """What the headline is a mean over: the records, or a ranking metric's ranked queries."""
    queries = headline(entry).get("queries")
    return queries if isinstance(queries, int) else entry["n"]


def datasets_of(results: Results) -> list[str]:
    return sorted({d for entries in results.by_model.values() for d in entries})


def headline(entry: dict) -> dict:
    return entry["metrics"][entry["headline_metric"]]


def column_sets(results: Results) -> dict[str, str]:
    """Per dataset, the example set most models were scored on (ties: the larger n)."""
    reference = {}
    for dataset in datasets_of(results):
        cells = [e[dataset] for e in results.by_model.values() if dataset in e]
        counts = Counter(e.get("examples_sha256") for e in cells)
        best = max(cells, key=lambda e: (counts[e.get("examples_sha256")], e["n"]))
        reference[dataset] = best.get("examples_sha256")
    return reference


def column_metrics(results: Results) -> dict[str, str]:
    """Per dataset, the headline metric most models were scored with (ties: the first model's)."""
    return {d: Counter(results.by_model[m][d]["headline_metric"] for m in sorted(results.by_model)
                       if d in results.by_model[m]).most_common(1)[0][0]
            for d in datasets_of(results)}


def _header(metrics: dict[str, str]) -> list[str]:
    return ["model", *(f"{d} ({metric})" for d, metric in metrics.items())]


def other_metric(entry: dict, column_metric: str) -> str | None:
    """The metric of a cell scored with another one than its column's (eval.py --metrics)."""
    return None if entry["headline_metric"] == column_metric else entry["headline_metric"]


def _score_cell(entry: dict, column_metric: str, mark: str) -> str:
    """'51.00 (n=25, partial)', with the cell's own metric first when it is not the column's."""
    metric = other_metric(entry, column_metric)
    named = f"{metric}, " if metric else ""
    return f"{score_text(headline(entry)['score'])} ({named}n={n_text(entry)}){mark}"


def _interval_cell(entry: dict, column_metric: str) -> str:
    metric = other_metric(entry, column_metric)
    return ci_text(headline(entry)) + (f" ({metric})" if metric else "")


def marks(entry: dict, reference: str) -> str:
    """What the other tables add to a model's figures, as its scores cell says it (NOTES): the
    data-check status when it is not clean, † for examples other than the column's."""
    status = status_of(entry)
    flag = "" if status in CLEAN_STATUSES else f" ({status})"
    return flag + ("" if entry.get("examples_sha256") == reference else " †")


NOTES = {
    "metric": "a metric named in a cell is the one that cell was scored with, not its column's "
              "(eval.py --metrics): not comparable with the column.",
    "marked": "† scored on a different set of examples than the rest of its column (another n, a "
              "--limit run, or other data): not comparable with it.",
    "flagged": "partial / modified / data_changed: the prediction file is not what inference.py "
               "wrote for the whole current dataset (a --limit run, a file edited after the run, "
               "or data changed since): see the warnings of eval.py and `data_check` in "
               "result_detail.json.",
    "skipped": "n counts the records scored; \"k skipped\": records inference.py did not run "
               "(--truncation skip, the prompt did not fit), or LongBench v2 outputs its pred.py "
               "writes no record of (empty or failed), left out of n and of the score."}


@section("scores", order=10)
def scores(results: Results) -> list[Table]:
    if not results.by_model:
        return []
    reference, metrics, rows = column_sets(results), column_metrics(results), []
    for model, entries in sorted(results.by_model.items()):
        row = [model]
        for d in datasets_of(results):
            e = entries.get(d)
            mark = "" if e is None or e.get("examples_sha256") == reference[d] else " †"
            row.append("-" if e is None else _score_cell(e, metrics[d], mark))
        rows.append(row)
    every = [(d, e) for entries in results.by_model.values() for d, e in entries.items()]
    seen = {"metric": any(other_metric(e, metrics[d]) for d, e in every),
            "marked": any(e.get("examples_sha256") != reference[d] for d, e in every),
            "flagged": any(status_of(e) not in CLEAN_STATUSES for _, e in every),
            "skipped": any(skipped_count(e) for _, e in every)}
    note = "\n".join(text for key, text in NOTES.items() if seen[key])
    return [Table("Scores (0-100), models x datasets", _header(metrics), rows, note)]


@section("intervals", order=20)
def intervals(results: Results) -> list[Table]:
    if not results.by_model:
        return []
    metrics, reference = column_metrics(results), column_sets(results)
    rows = [[model, *(_interval_cell(entries[d], metrics[d]) + marks(entries[d], reference[d])
                      if d in entries else "-" for d in datasets_of(results))]
            for model, entries in sorted(results.by_model.items())]
    return [Table("95% intervals of the scores above (Wilson for 0/1 metrics, else a seeded "
                  "bootstrap over examples)", _header(metrics), rows)]
