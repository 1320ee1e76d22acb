"""Writing what scoring found: result.json (TinyEval's shape), details, per-example scores, tables.

Files written for a prediction folder DIR (nothing in DIR is ever named *.jsonl by us, so a rerun of
eval.py never mistakes its own output for predictions):
    DIR/result.json               {dataset: headline score}, exactly TinyEval's result file
    DIR/result_detail.json        per dataset: every metric unrounded and rounded, n, LongBench-E length
                                  buckets (empty bucket = null), duplicates, extraction failures, failed
                                  records, zeroed-by-exception counts, metric versions, source file
    DIR/per_example/<ds>.scores.jsonl   one line per prediction line: id, scores, extraction, zeroed reason
and, when several model folders are scored at once, ROOT/results.csv and ROOT/results.md (models x datasets).
"""
from __future__ import annotations

import csv
import io
import json
from pathlib import Path

from Eval.records import write_json_atomic, write_jsonl_atomic


def headline_scores(results: list[dict]) -> dict[str, float | None]:
    return {r["dataset"]: r["metrics"][r["headline_metric"]]["score"] for r in results}


def write_model_results(pred_dir: Path, results: list[dict]) -> None:
    per_example_dir = pred_dir / "per_example"
    per_example_dir.mkdir(exist_ok=True)
    for r in results:
        write_jsonl_atomic(per_example_dir / f"{r['dataset']}.scores.jsonl", r["per_example"])
    details = {r["dataset"]: {k: v for k, v in r.items() if k != "per_example"} for r in results}
    write_json_atomic(pred_dir / "result_detail.json", details)
    write_json_atomic(pred_dir / "result.json", headline_scores(results))


def _cell(value) -> str:
    return "-" if value is None else f"{value:.2f}"


def dataset_table(results: list[dict]) -> str:
    """A readable per-dataset table for the terminal."""
    rows = [("dataset", "metric", "score", "n", "dup", "unparsed", "failed", "zeroed")]
    for r in results:
        for name, m in r["metrics"].items():
            rows.append((r["dataset"], name, _cell(m["score"]), str(r["n"]), str(r["duplicates"]),
                         str(r["extraction"]["failed"]), str(r["failed_records"]),
                         str(sum(m["zeroed_by_exception"].values()))))
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    lines = ["  ".join(c.ljust(w) if i < 2 else c.rjust(w) for i, (c, w) in enumerate(zip(row, widths)))
             for row in rows]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def models_matrix(by_model: dict[str, dict[str, float | None]]) -> tuple[list[str], list[list[str]]]:
    datasets = sorted({d for scores in by_model.values() for d in scores})
    header = ["model", *datasets]
    rows = [[model, *(_cell(scores.get(d)) for d in datasets)] for model, scores in sorted(by_model.items())]
    return header, rows


def write_models_table(root: Path, by_model: dict[str, dict[str, float | None]]) -> str:
    """Write ROOT/results.csv and ROOT/results.md; return the Markdown table."""
    header, rows = models_matrix(by_model)
    buf = io.StringIO()
    csv.writer(buf, lineterminator="\n").writerows([header, *rows])
    markdown = "\n".join(["| " + " | ".join(header) + " |", "|" + "---|" * len(header),
                          *("| " + " | ".join(row) + " |" for row in rows)]) + "\n"
    for name, text in (("results.csv", buf.getvalue()), ("results.md", markdown)):
        tmp = root / (name + ".tmp")
        tmp.write_text(text, encoding="utf-8")
        tmp.replace(root / name)
    return markdown


def dumps(obj) -> str:
    return json.dumps(obj, ensure_ascii=False, indent=4)
