"""Every metric in one table, as BERGEN shows its experiments: a row per model and dataset, a column
per metric, then the run's configuration (a BERGEN config.yaml's); shown when a dataset has more
than one metric or a configuration. results.csv gets the same columns."""
from __future__ import annotations

from Eval.scoring.sections import Results, Table, section
from Eval.scoring.sections.judge import judge_entries
from Eval.scoring.sections.scores import n_text, score_text


def extra_columns(by_model: dict[str, dict[str, dict]]) -> tuple[list[str], list[str]]:
    """(metric names, configuration keys), each in the order first met; none when no entry has a
    second metric or a configuration (the table is not shown)."""
    entries = [e for entries in by_model.values() for e in entries.values()]
    if not any(len(e["metrics"]) > 1 or e.get("config") for e in entries):
        return [], []
    metrics, config = {}, {}
    for entry in entries:
        metrics.update(dict.fromkeys(entry["metrics"]))
        config.update(dict.fromkeys(entry.get("config") or {}))
    return list(metrics), list(config)


def extra_cells(entry: dict, metrics: list[str], config: list[str]) -> list[str]:
    """The entry's score under each metric ("" where it has none), then its configuration."""
    scores = [score_text(entry["metrics"][m]["score"]) if m in entry["metrics"] else ""
              for m in metrics]
    return scores + [str((entry.get("config") or {}).get(key, "")) for key in config]


@section("every_metric", order=15)
def every_metric(results: Results) -> list[Table]:
    metrics, config = extra_columns(results.by_model)
    if not metrics:
        return []
    judged: dict[tuple[str, str], dict[str, str]] = {}  # (model, dataset) -> {rubric: score}
    for model, dataset, r in judge_entries(results, []):
        judged.setdefault((model, dataset), {})[str(r.get("rubric"))] = score_text(r.get("score"))
    rubrics = sorted({rubric for found in judged.values() for rubric in found})
    rows = []
    for model, entries in sorted(results.by_model.items()):
        for dataset, entry in sorted(entries.items()):
            cells = extra_cells(entry, metrics, config)
            verdicts = judged.get((model, dataset), {})
            rows.append([model, dataset, *cells[len(metrics):], n_text(entry),
                         *cells[:len(metrics)], *(verdicts.get(r, "") for r in rubrics)])
    return [Table("Every metric (0-100), a row per model and dataset",
                  ["model", "dataset", *config, "n", *metrics, *(f"judge:{r}" for r in rubrics)],
                  rows, numeric_from=2 + len(config))]

