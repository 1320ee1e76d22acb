"""Tokens, seconds and cost (with eval.py --price) per model and dataset, from its prediction
records, and each model's total."""
from __future__ import annotations

from Eval.pricing import cost_text, total_usage
from Eval.scoring.sections import Results, Table, section

HEADER = ["model", "dataset", "examples", "prompt tokens", "generated", "cut", "seconds",
          "gen tok/s", "cost"]


def cells(usage: dict) -> list[str]:
    if not usage.get("counted"):  # files written elsewhere (TinyEval's) carry no token counts
        return [str(usage.get("examples", "-"))] + ["-"] * 6
    rate = usage.get("tokens_per_s")
    return [str(usage["examples"]), str(usage["prompt_tokens"]), str(usage["gen_tokens"]),
            str(usage["truncated_tokens"]), f"{usage['seconds']:.1f}",
            "-" if rate is None else f"{rate:.1f}",
            cost_text(usage["cost_usd"]) if "cost_usd" in usage else "-"]


@section("usage", order=50)
def usage(results: Results) -> list[Table]:
    rows = []
    for model, entries in sorted(results.by_model.items()):
        counted = {d: e["usage"] for d, e in sorted(entries.items())
                   if isinstance(e.get("usage"), dict)}
        rows += [[model, d, *cells(u)] for d, u in counted.items()]
        if len(counted) > 1:
            rows.append([model, "total", *cells(total_usage(list(counted.values())))])
    if not any(row[3] != "-" for row in rows):
        return []
    if all(row[-1] == "-" for row in rows):
        return [Table("Tokens and seconds, from the prediction records", HEADER[:-1],
                      [r[:-1] for r in rows], numeric_from=2)]
    return [Table("Tokens, seconds and cost, from the prediction records", HEADER, rows,
                  numeric_from=2)]
