"""Paired comparisons (eval.py diff A B): per dataset and metric the two means over the paired items, B - A with
its paired bootstrap interval and McNemar's p, and the counts that say what was compared."""
from __future__ import annotations

from Eval.scoring.sections import Results, Table, section
from Eval.scoring.sections.scores import ci_text, score_text


@section("diff", order=70)
def diff(results: Results) -> list[Table]:
    found = []
    for path in sorted(results.root.glob("diff_*.json")) if results.root else []:
        doc = results.read_json(path)
        if not isinstance(doc, dict) or not isinstance(doc.get("datasets"), dict):
            continue
        rows, notes = [], []
        for name, d in sorted(doc["datasets"].items()):
            for metric, m in (d.get("metrics") or {}).items():
                p = m.get("mcnemar") or {}
                rows.append([name, metric, str(d.get("scored_pairs", d.get("paired"))), score_text(m.get("mean_a")),
                             score_text(m.get("mean_b")), score_text(m.get("diff")), ci_text(m),
                             "-" if not p else f"{p['p']:.4g}"])
            counts = ", ".join(f"{k} {v}" for k, v in (d.get("buckets") or {}).items() if v) or "none"
            left = f", {d['mismatched']} left out (the same id made from different data)" if d.get("mismatched") \
                else ""
            regressions = ", ".join(map(str, (d.get("regressions") or [])[:5])) or "none"
            notes.append(f"{name}: regressions (A right, B not): {regressions}; differing samples: {counts}{left}")
        found.append(Table(f"{doc.get('a', 'A')} vs {doc.get('b', 'B')} ({path.name})",
                           ["dataset", "metric", "paired", str(doc.get("a", "A")), str(doc.get("b", "B")), "B-A",
                            "ci95 of B-A", "McNemar p"], rows, "\n".join(notes), numeric_from=2))
    return found
