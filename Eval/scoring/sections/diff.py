"""Paired comparisons (eval.py diff A B): per dataset and metric the two means over the paired
items, B - A with its paired bootstrap interval and McNemar's p, and what was compared."""
from __future__ import annotations

import os
import shlex
from pathlib import Path

from Eval.scoring.provenance import source_problem
from Eval.scoring.sections import Results, Table, section, stale_note
from Eval.scoring.sections.scores import ci_text, score_text
from Eval.storage import read_json_object


def diff_table(doc: dict, name: str, home: Path | None = None) -> Table:
    """The table of a diff file; given the file's folder `home`, the datasets whose A or B file
    changed since are left out (eval.py diff itself shows what it has just computed)."""
    a, b = str(doc.get("a", "A")), str(doc.get("b", "B"))
    rows, notes, stale = [], [], []
    for dataset, d in sorted(doc["datasets"].items()):
        if home and any(doc.get(f"{side}_dir") and  # older diff files name no folder
                        source_problem(home / str(doc[f"{side}_dir"]), dataset,
                                       d.get(f"source_sha256_{side}")) for side in "ab"):
            stale.append(dataset)
            continue
        for metric, m in (d.get("metrics") or {}).items():
            p = m.get("mcnemar") or {}
            n = m.get("n", d.get("scored_pairs", d.get("paired")))  # a ranking metric: fewer
            rows.append([dataset, metric, str(n),
                         score_text(m.get("mean_a")), score_text(m.get("mean_b")),
                         score_text(m.get("diff")), ci_text(m), "-" if not p else f"{p['p']:.4g}"])
        counts = ", ".join(f"{k} {v}" for k, v in (d.get("buckets") or {}).items() if v) or "none"
        left = f", {d['mismatched']} left out (the same id made from different data)" \
            if d.get("mismatched") else ""
        regressions = ", ".join(map(str, (d.get("regressions") or [])[:5])) or "none"
        notes.append(f"{dataset}: regressions (A right, B not): {regressions}; differing samples: "
                     f"{counts}{left}")
    if stale:  # from the root's parent, whatever folder the page was made in: no machine path
        root = home.resolve().name
        folders = (shlex.quote(os.path.normpath(Path(root, str(doc[f"{side}_dir"]))))
                   for side in "ab")
        notes.append(stale_note(stale, "python eval.py diff " + " ".join(folders))
                     + f" (from the folder holding {root}/)")
    return Table(f"{a} vs {b} ({name})", ["dataset", "metric", "paired", a, b, "B-A",
                                          "ci95 of B-A", "McNemar p"], rows, "\n".join(notes),
                 numeric_from=2)


@section("diff", order=70)
def diff(results: Results) -> list[Table]:
    found = []
    for path in sorted(results.root.glob("diff_*.json")) if results.root else []:
        doc, _ = read_json_object(path)
        if isinstance(doc.get("datasets"), dict):
            found.append(diff_table(doc, path.name, home=path.parent))
    return found
