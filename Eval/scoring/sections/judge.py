"""LLM-judge results: each model folder's judge_result.json (eval.py judge: the mean verdict over parseable ones,
x 100, and how many were unparseable or failed), and every compare_result.json under the root (eval.py compare:
A's win / tie / lose rates against B, with the win rate's 95% interval)."""
from __future__ import annotations

from Eval.scoring.sections import Results, Table, section


def _number(value) -> str:
    return "-" if not isinstance(value, (int, float)) or isinstance(value, bool) else f"{value:.2f}"


@section("judge", order=60)
def judge(results: Results) -> list[Table]:
    if results.root is None:
        return []
    rows = []
    for model in sorted(results.by_model):
        found = results.read_json(results.root / model / "judge_result.json")
        for dataset, r in sorted(found.items()) if isinstance(found, dict) else []:
            if isinstance(r, dict):
                rows.append([model, dataset, str(r.get("rubric", "-")), _number(r.get("score")),
                             f"{r.get('scored', 0)} of {r.get('n', 0)}", str(r.get("unparseable", 0)),
                             str(r.get("failed", 0))])
    if not rows:
        return []
    return [Table("LLM judge (eval.py judge): mean verdict x 100 over parseable verdicts",
                  ["model", "dataset", "rubric", "score", "parsed", "unparseable", "failed"], rows, numeric_from=3)]


@section("compare", order=65)
def compare(results: Results) -> list[Table]:
    if results.root is None:
        return []
    rows = []
    for path in sorted(results.root.glob("compare_*/compare_result.json")):
        doc = results.read_json(path)
        datasets = doc.get("datasets") if isinstance(doc, dict) else None
        for dataset, r in sorted(datasets.items()) if isinstance(datasets, dict) else []:
            low, high = (r.get("win_ci95") or [None, None])[:2]
            rows.append([path.parent.name, dataset, _number(r.get("win")), f"[{_number(low)}, {_number(high)}]",
                         _number(r.get("tie")), _number(r.get("lose")), str(r.get("scored", 0)),
                         str(r.get("identical", 0))])
    if not rows:
        return []
    return [Table("Pairwise judge (eval.py compare): A against B",
                  ["comparison", "dataset", "win", "win ci95", "tie", "lose", "verdicts", "identical"], rows,
                  "identical: pairs whose two answers are the same text, ties without asking the judge",
                  numeric_from=2)]
