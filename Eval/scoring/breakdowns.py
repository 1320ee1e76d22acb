"""Named breakdowns of a dataset's per-example scores by the record's groups (Task.breakdown):
its "groups" object (inference.py's copy of Task.group_by), else a top-level field (LongBench v2's).

Usage:
    table = BREAKDOWNS["longbench_v2"](scored)   # [(record, headline score, answered?), ...]
"""
from __future__ import annotations

import dataclasses
from collections import Counter

from Eval.registry import Registry
from Eval.tasks import Task

# (record, score of the headline metric, whether an answer was extracted) per scored record
Scored = list[tuple[dict, float, bool]]
BREAKDOWNS = Registry("breakdown", hint="Add one: a function decorated with "
                                        "@BREAKDOWNS.register in Eval/scoring/breakdowns.py.")


def group_value(record: dict, key: str):
    groups = record.get("groups")
    return groups[key] if isinstance(groups, dict) and key in groups else record.get(key)


def _percent_1(total: float, count: int) -> float | None:
    # result.py prints round(100 * acc / count, 1), dividing by zero on an empty column: None here
    return round(100 * total / count, 1) if count else None


V2_COLUMNS = ("Overall", "Easy", "Hard", "Short", "Medium", "Long")


def _v2_row(scored: Scored, compensated: bool) -> tuple[dict, dict]:
    """(figures, counts) of LongBench v2's result.py row, its branches kept: a difficulty other
    than "easy" counts as Hard, a length other than "short" / "medium" as Long. Overall is
    (easy + hard) / n, summed in file order as result.py does."""
    sums = dict.fromkeys(V2_COLUMNS[1:], 0.0)
    counts = dict.fromkeys(V2_COLUMNS[1:], 0)
    for record, score, answered in scored:
        acc = 0.25 if compensated and not answered else score  # result.py's guess among 4
        level = "Easy" if group_value(record, "difficulty") == "easy" else "Hard"
        length = {"short": "Short", "medium": "Medium"}.get(group_value(record, "length"), "Long")
        for column in (level, length):
            sums[column] += acc
            counts[column] += 1
    figures = {"Overall": _percent_1(sums["Easy"] + sums["Hard"], len(scored))}
    figures.update({column: _percent_1(sums[column], counts[column]) for column in V2_COLUMNS[1:]})
    return figures, {"Overall": len(scored), **counts}


# eval.py --v2-variant: the project's ways of scoring LongBench v2, each a change from its own code
V2_VARIANTS = {"count-failures": "empty and failed outputs stay in n (0; compensated 0.25)",
               "strip-thinking": "the answer is picked after the output's thinking block"}
NOT_WRITTEN = "LongBench v2's pred.py writes no record (--v2-variant count-failures counts it)"


def with_v2_variants(task: Task, variants) -> Task:
    if task.breakdown != "longbench_v2":
        return task
    if "count-failures" in variants:
        task = dataclasses.replace(task, leave_out_empty=False)
    if "strip-thinking" in variants and "strip_think" not in task.extract:
        task = dataclasses.replace(task, extract=("strip_think", *task.extract))
    return task


def from_v2_pred_py(row: object) -> object:
    """A row of LongBench v2's pred.py output (results/MODEL.jsonl) as our record: its `response`
    (the output; `response_cot` the reasoning under --cot) is scored again against `answer`; its
    own extraction `pred` and verdict `judge` are kept under "pred_py". Other rows: unchanged."""
    if not isinstance(row, dict) or "answers" in row or \
            not {"response", "answer", "judge"} <= set(row):
        return row
    groups = ("difficulty", "length", "domain", "sub_domain")  # its `length` is short/medium/long
    record = {k: v for k, v in row.items()
              if k not in ("response", "response_cot", "pred", "judge", *groups)}
    record.update(pred=row["response"], answers=row["answer"],
                  groups={k: row[k] for k in groups if k in row},
                  pred_py={"pred": row.get("pred"), "judge": row["judge"]})
    if "response_cot" in row:
        record["cot"] = row["response_cot"]
    return record


def not_written(record: dict) -> str | None:
    """Why LongBench v2's pred.py would have written no record for this output (its `if output ==
    ''`: a failed request returns '' after its tries; under --cot, either pass), or None."""
    if record.get("error") is not None:
        return f"failed output: {NOT_WRITTEN}"
    if "pred_py" in record:  # a row pred.py wrote (its `response` stripped: blank is "")
        return None
    if record.get("cot") == "" or record.get("pred") == "":
        return f"empty {'reasoning' if record.get('cot') == '' else 'output'}: {NOT_WRITTEN}"
    return None


@BREAKDOWNS.register("longbench_v2")
def longbench_v2(scored: Scored) -> dict:
    """LongBench v2's result.py row, the same row "compensated" (no extracted answer counts 0.25),
    and accuracy by domain and by (domain, sub-domain).

    >>> rows = [({"groups": {"difficulty": "easy", "length": "short", "domain": "QA"}}, 1.0, True),
    ...         ({"groups": {"difficulty": "hard", "length": "long", "domain": "QA"}}, 0.0, False)]
    >>> table = longbench_v2(rows)
    >>> table["accuracy"]
    {'Overall': 50.0, 'Easy': 100.0, 'Hard': 0.0, 'Short': 100.0, 'Medium': None, 'Long': 0.0}
    >>> table["compensated"]["Overall"], table["domains"]["QA"]
    (62.5, {'accuracy': 50.0, 'n': 2})
    """
    accuracy, counts = _v2_row(scored, compensated=False)
    compensated, _ = _v2_row(scored, compensated=True)
    table = {"name": "longbench_v2",
             "note": "compensated: an output with no extracted answer counts 0.25",
             "columns": list(V2_COLUMNS), "accuracy": accuracy, "compensated": compensated,
             "counts": counts, "domains": _by_group(scored, "domain"),
             "sub_domains": _by_group(scored, "domain", "sub_domain")}
    # pred.py's own verdicts, kept from its output file: scored again here, they must agree
    differ = [str(r.get("_id", r.get("id"))) for r, score, _ in scored
              if isinstance(r.get("pred_py"), dict) and bool(score) != bool(r["pred_py"]["judge"])]
    if differ:
        table["warnings"] = [f"{len(differ)} records score otherwise than the `judge` pred.py "
                             f"wrote in the file ({', '.join(differ[:5])}"
                             f"{', ...' if len(differ) > 5 else ''}): an edited file, another "
                             "pred.py, or a --v2-variant"]
    return table


def _by_group(scored: Scored, *keys: str) -> dict:
    """{value: {"accuracy": round(100 * sum / n, 1), "n": n}}, sorted; a missing value "unknown".
    With two keys, nested: {domain: {sub-domain: {...}}}."""
    sums, counts = Counter(), Counter()
    for record, score, _ in scored:
        path = tuple("unknown" if v is None else str(v) for v in
                     (group_value(record, key) for key in keys))
        sums[path] += score
        counts[path] += 1
    table: dict = {}
    for path in sorted(sums):
        *outer, last = path
        node = table
        for value in outer:
            node = node.setdefault(value, {})
        node[last] = {"accuracy": _percent_1(sums[path], counts[path]), "n": counts[path]}
    return table
