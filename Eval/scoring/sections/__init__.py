"""Report sections: functions from the scored results to Tables, decorated with `@section(NAME,
order=N)` in a module of this package; the terminal, results.md and report.html render them alike.

Usage:
    @section("my_section", order=90)
    def my_section(results: Results) -> list[Table]:
        return [Table("Datasets per model", ["model", "datasets"],
                      [[m, str(len(d))] for m, d in results.by_model.items()])]
"""
from __future__ import annotations

import dataclasses
from pathlib import Path

from Eval.registry import Registry

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


def stale_note(stale: list[str], command: str) -> str:
    """The note under a table of saved results that left some out: their predictions changed."""
    return "" if not stale else (f"left out, made from prediction files that changed or are gone "
                                 f"since: {', '.join(stale)}; run {command} again for them")


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


def aligned_lines(rows: list, left: set[int]) -> list[str]:
    """Rows padded to each column's widest cell (`left` ones left-aligned), a rule under row 1."""
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    lines = ["  ".join(c.ljust(w) if i in left else c.rjust(w)
                       for i, (c, w) in enumerate(zip(row, widths))).rstrip() for row in rows]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return lines


def render_text(table: Table) -> str:
    lines = aligned_lines([table.header, *table.rows], set(range(table.numeric_from)))
    return "\n".join([table.title, *lines] + ([table.note] if table.note else []))


def render_markdown(table: Table) -> str:
    def line(cells: list[str]) -> str:  # a "|" of a name from the data must not end its cell
        return "| " + " | ".join(cell.replace("|", "\\|") for cell in cells) + " |"

    lines = [f"**{table.title}**", "", line(table.header), "|" + "---|" * len(table.header),
             *map(line, table.rows)]
    return "\n".join(lines + (["", table.note] if table.note else []))
