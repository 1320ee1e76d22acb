"""Report sections: functions from the scored results to Tables, decorated with `@section(NAME,
order=N)` in a module of this package; the terminal, results.md and report.html render them alike.

Usage:
    text, notes = write_models_table(ROOT)   # ROOT/results.md and .csv, and the same as text
    @section("my_section", order=90)
    def my_section(results: Results) -> list[Table]:
        return [Table("Datasets per model", ["model", "datasets"],
                      [[m, str(len(d))] for m, d in results.by_model.items()])]
"""
from __future__ import annotations

import csv
import dataclasses
import io
import unicodedata
from pathlib import Path

from Eval.registry import Registry
from Eval.storage import commit_files, output_lock, read_json_object

SECTIONS = Registry("report section", discover="Eval.scoring.sections",
                    hint="Add one: a function decorated with @section in a module of "
                         "Eval/scoring/sections/.")


@dataclasses.dataclass
class Table:
    title: str
    header: list[str]
    rows: list[list[str]]
    note: str = ""
    numeric_from: int = 1  # columns from this one on are numbers (right-aligned)


@dataclasses.dataclass
class Results:
    """Each model folder's current result_detail.json entries; the pred root (None: outside one)."""
    by_model: dict[str, dict[str, dict]]
    root: Path | None = None


def stale_note(stale: list[str], command: str, unreadable: list[str] = ()) -> str:
    """The note under a table of saved results that left some out: their predictions changed, or
    their result file cannot be read (a damaged file is said, never dropped unseen)."""
    notes = [f"left out, made from prediction files that changed or are gone since: "
             f"{', '.join(stale)}; run {command} again for them"] if stale else []
    if unreadable:
        notes.append(f"left out, not readable as JSON: {', '.join(unreadable)}; run {command} "
                     "again")
    return "\n".join(notes)


def section(name: str, order: int):
    def register(build):
        SECTIONS.register(name, (order, build))
        return build
    return register


def tables(results: Results) -> list[Table]:
    found = []
    for name in sorted(SECTIONS, key=lambda name: (SECTIONS[name][0], name)):
        found += SECTIONS[name][1](results)
    return found


def columns(text: str) -> int:
    """The terminal columns `text` takes: a wide (CJK) character two, a combining mark none."""
    return sum(0 if unicodedata.combining(c) else 2 if unicodedata.east_asian_width(c) in "WF"
               else 1 for c in text)


def aligned_lines(rows: list, left: set[int]) -> list[str]:
    """Rows padded to each column's widest cell (`left` ones left-aligned), a rule under row 1."""
    widths = [max(columns(row[i]) for row in rows) for i in range(len(rows[0]))]
    pad = [[" " * (w - columns(c)) for c, w in zip(row, widths)] for row in rows]
    lines = ["  ".join(c + p if i in left else p + c
                       for i, (c, p) in enumerate(zip(row, gaps))).rstrip()
             for row, gaps in zip(rows, pad)]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return lines


def render_text(table: Table) -> str:
    lines = aligned_lines([table.header, *table.rows], set(range(table.numeric_from)))
    return "\n".join([table.title, *lines] + ([table.note] if table.note else []))


def _inline(text: str) -> str:
    """Text from the data on one markdown line: no line break, raw HTML or cell-ending "|"."""
    return " ".join(text.splitlines()).replace("<", "&lt;").replace("|", "\\|")


def render_markdown(table: Table) -> str:
    def line(cells: list[str]) -> str:
        return "| " + " | ".join(map(_inline, cells)) + " |"

    lines = [f"**{_inline(table.title)}**", "", line(table.header),
             "|" + "---|" * len(table.header), *map(line, table.rows)]
    return "\n".join(lines + (["", _inline(table.note)] if table.note else []))


# The tables of a pred root: ROOT/results.md and ROOT/results.csv

def collect_models(root: Path) -> tuple[dict[str, dict[str, dict]], list[str]]:
    """Each model folder's current entries (those whose prediction file and dataset are as they
    were scored), and a note for each left out."""
    from Eval.scoring.report import entry_is_current  # report.py renders these sections

    by_model, notes = {}, []
    for folder in sorted(p for p in root.iterdir() if p.is_dir() and not p.name.startswith(".")):
        details, _ = read_json_object(folder / "result_detail.json")
        whys = {name: entry_is_current(folder, name, entry) for name, entry in details.items()}
        notes += [f"results table: left out {folder.name}/{name}: it {why}; run python eval.py"
                  for name, why in whys.items() if why]
        current = {name: entry for name, entry in details.items() if whys[name] is None}
        if current:
            by_model[folder.name] = current
    return by_model, notes


def tidy_csv(by_model: dict[str, dict[str, dict]]) -> str:
    """results.csv: a row per model and dataset, with the every-metric table's extra columns."""
    from Eval.scoring.sections.every_metric import extra_cells, extra_columns  # (a cycle)
    from Eval.scoring.sections.scores import (column_sets, headline, headline_n, score_text,
                                              status_of)

    reference = column_sets(Results(by_model))
    metrics, config = extra_columns(by_model)
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(["model", "dataset", "metric", "score", "n", "same_examples_as_column",
                     "data_check", *metrics, *config])  # data_check: results.md's mark
    for model, entries in sorted(by_model.items()):
        for d, e in sorted(entries.items()):
            same = e.get("examples_sha256") == reference[d]
            writer.writerow([model, d, e["headline_metric"], score_text(headline(e)["score"]),
                             headline_n(e), "yes" if same else "no", status_of(e),
                             *extra_cells(e, metrics, config)])
    return buf.getvalue()


def write_models_table(root: Path) -> tuple[str, list[str]]:
    """Rebuild ROOT/results.md and .csv; returns the terminal's text of the same sections, notes."""
    with output_lock(root / "results.md", "eval.py", wait=True):  # read and written by one
        by_model, notes = collect_models(root)
        found = tables(Results(by_model, root))
        markdown = "\n\n".join(render_markdown(t) for t in found) + "\n"
        commit_files(root, {"results.md": markdown.encode("utf-8"),
                            "results.csv": tidy_csv(by_model).encode("utf-8")})
    return "\n\n".join(render_text(t) for t in found), notes
