"""LLM-judge results: each model folder's judge_result.json (eval.py judge: the mean verdict over
parseable ones, x 100, and how many were unparseable or failed), and every compare_result.json
under the root (eval.py compare: A's win / tie / lose rates against B, the win rate's interval)."""
from __future__ import annotations

from pathlib import Path

from Eval.scoring.provenance import source_problem
from Eval.scoring.sections import Results, Table, section, stale_note
from Eval.scoring.sections.scores import score_text
from Eval.storage import read_json_object


def judge_entries(results: Results, stale: list[str], unreadable: list[str] | None = None):
    """(model, dataset, entry) of every model folder's judge_result.json, in name order, for the
    prediction files that are still the ones judged; "model/dataset" of the others into `stale`,
    the files that cannot be read into `unreadable`."""
    for model in sorted(results.by_model) if results.root else []:
        folder = results.root / model
        found, problems = read_json_object(folder / "judge_result.json")
        if problems and unreadable is not None:
            unreadable.append(f"{model}/judge_result.json")
        for dataset, entry in sorted(found.items()):
            if not isinstance(entry, dict):
                continue
            if not source_problem(folder, dataset, entry.get("source_sha256")):
                yield model, dataset, entry
            else:
                stale.append(f"{model}/{dataset}")


@section("judge", order=60)
def judge(results: Results) -> list[Table]:
    stale: list[str] = []
    unreadable: list[str] = []
    rows = [[model, dataset, str(r.get("rubric", "-")), score_text(r.get("score")),
             f"{r.get('scored', 0)} of {r.get('n', 0)}", str(r.get("unparseable", 0)),
             str(r.get("failed", 0))]
            for model, dataset, r in judge_entries(results, stale, unreadable)]
    note = stale_note(stale, "eval.py judge", unreadable)
    return [Table("LLM judge (eval.py judge): mean verdict x 100 over parseable verdicts",
                  ["model", "dataset", "rubric", "score", "parsed", "unparseable", "failed"], rows,
                  note, numeric_from=3)] if rows or note else []


def compared_problem(dir_a: Path, dir_b: Path, dataset: str, entry: object) -> str | None:
    """Why a compare_result.json entry no longer fits A's or B's prediction file, or None."""
    entry = entry if isinstance(entry, dict) else {}
    return (source_problem(dir_a, dataset, entry.get("source_sha256_a"))
            or source_problem(dir_b, dataset, entry.get("source_sha256_b")))


@section("compare", order=65)
def compare(results: Results) -> list[Table]:
    rows, stale, unreadable = [], [], []
    for path in sorted(results.root.glob("compare_*/compare_result.json")) if results.root else []:
        doc, problems = read_json_object(path)
        if problems:
            unreadable.append(f"{path.parent.name}/{path.name}")
        datasets = doc.get("datasets")
        for dataset, r in sorted(datasets.items()) if isinstance(datasets, dict) else []:
            if compared_problem(path.parent / str(doc.get("a")), path.parent / str(doc.get("b")),
                                dataset, r):
                stale.append(f"{path.parent.name}/{dataset}")
                continue
            low, high = (r.get("win_ci95") or [None, None])[:2]
            rows.append([path.parent.name, dataset, score_text(r.get("win")),
                         f"[{score_text(low)}, {score_text(high)}]", score_text(r.get("tie")),
                         score_text(r.get("lose")), str(r.get("scored", 0)),
                         str(r.get("identical", 0))])
    return [Table("Pairwise judge (eval.py compare): A against B",
                  ["comparison", "dataset", "win", "win ci95", "tie", "lose", "verdicts",
                   "identical"], rows,
                  "\n".join(filter(None, ["identical: pairs whose two answers are the same text, "
                                          "ties without asking the judge",
                                          stale_note(stale, "eval.py compare", unreadable)])),
                  numeric_from=2)] if rows or stale or unreadable else []
