"""LongBench-E's length buckets: each model's headline score by input length (words for English,
characters for Chinese); an empty bucket is "-" (a bucket that scores 0 shows 0.00)."""
from __future__ import annotations

from Eval.scoring.scorer import LENGTH_BUCKETS
from Eval.scoring.sections import Results, Table, section
from Eval.scoring.sections.scores import column_sets, datasets_of, headline, marks, score_text

NAMES = [name for _, name in LENGTH_BUCKETS]


@section("length_buckets", order=25)
def length_buckets(results: Results) -> list[Table]:
    found, reference = [], column_sets(results)
    for d in datasets_of(results):
        rows = []
        for model, entries in sorted(results.by_model.items()):
            buckets = headline(entries[d]).get("length_buckets") or {} if d in entries else {}
            if any(buckets.get(name) is not None for name in NAMES):
                rows.append([model + marks(entries[d], reference[d]), entries[d]["headline_metric"],
                             *(score_text(buckets.get(name)) for name in NAMES)])
        if rows:
            found.append(Table(f"{d}: LongBench-E length buckets", ["model", "metric", *NAMES],
                               rows, numeric_from=2))
    return found
