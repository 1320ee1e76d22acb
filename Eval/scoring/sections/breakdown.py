"""A dataset's breakdown table (Task.breakdown, Eval/scoring/breakdowns.py: LongBench v2's
result.py row): per model its accuracy row and its compensated row."""
from __future__ import annotations

from Eval.scoring.sections import Results, Table, section
from Eval.scoring.sections.scores import column_sets, datasets_of, marks


@section("breakdown", order=30)
def breakdown(results: Results) -> list[Table]:
    found, reference = [], column_sets(results)
    for d in datasets_of(results):
        cells = {m: e[d] for m, e in sorted(results.by_model.items())
                 if e.get(d, {}).get("breakdown")}
        if not cells:
            continue
        first = next(iter(cells.values()))
        columns, note = first["breakdown"]["columns"], first["breakdown"].get("note", "")
        rows = [[(model if row == "accuracy" else f"{model} ({row})") + marks(e, reference[d]),
                 *("-" if e["breakdown"][row].get(c) is None else f"{e['breakdown'][row][c]:.1f}"
                   for c in columns)]
                for model, e in cells.items() for row in ("accuracy", "compensated")]
        found.append(Table(f"{d}: {first['breakdown']['name']} breakdown of "
                           f"{first['headline_metric']}", ["model", *columns], rows, note))
    return found
