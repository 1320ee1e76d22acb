"""LLM-judge results: each model folder's judge_result.json (eval.py judge: the mean verdict over
parseable ones, x 100, and how many were unparseable or failed), and every compare_result.json
under the root (eval.py compare: A's win / tie / lose rates against B, the win rate's interval)."""
from __future__ import annotations

from Eval.scoring.sections import Results, Table, section
from Eval.scoring.sections.scores import score_text
from Eval.storage import read_json_object


def judge_entries(results: Results):
    """(model, dataset, entry) of every model folder's judge_result.json, in name order."""
    for model in sorted(results.by_model) if results.root else []:
        found, _ = read_json_object(results.root / model / "judge_result.json")
        for dataset, entry in sorted(found.items()):
            if isinstance(entry, dict):
                yield model, dataset, entry


@section("judge", order=60)
def judge(results: Results) -> list[Table]:
    rows = [[model, dataset, str(r.get("rubric", "-")), score_text(r.get("score")),
             f"{r.get('scored', 0)} of {r.get('n', 0)}", str(r.get("unparseable", 0)),
             str(r.get("failed", 0))] for model, dataset, r in judge_entries(results)]
    return [Table("LLM judge (eval.py judge): mean verdict x 100 over parseable verdicts",
                  ["model", "dataset", "rubric", "score", "parsed", "unparseable", "failed"], rows,
                  numeric_from=3)] if rows else []


@section("compare", order=65)
def compare(results: Results) -> list[Table]:
    rows = []
    for path in sorted(results.root.glob("compare_*/compare_result.json")) if results.root else []:
        datasets = read_json_object(path)[0].get("datasets")
        for dataset, r in sorted(datasets.items()) if isinstance(datasets, dict) else []:
            low, high = (r.get("win_ci95") or [None, None])[:2]
            rows.append([path.parent.name, dataset, score_text(r.get("win")),
                         f"[{score_text(low)}, {score_text(high)}]", score_text(r.get("tie")),
                         score_text(r.get("lose")), str(r.get("scored", 0)),
                         str(r.get("identical", 0))])
    return [Table("Pairwise judge (eval.py compare): A against B",
                  ["comparison", "dataset", "win", "win ci95", "tie", "lose", "verdicts",
                   "identical"], rows,
                  "identical: pairs whose two answers are the same text, ties without asking the "
                  "judge", numeric_from=2)] if rows else []
