"""Score one dataset's prediction records: extraction, per-record metric values, aggregates.

The LongBench loop, kept exactly: per record, score = max(0, max over `answers` of metric(extracted, answer,
all_classes=...)); dataset score = round(100 * sum / n, 2) over EVERY line (duplicated runs included, as the
published figures count them; duplicates are counted and reported, not dropped). Each figure repeats its
reference's float arithmetic, so ties at x.xx5 round the same way: the dataset score sums left to right as
LongBench's scorer() does, each LongBench-E bucket is round(100 * np.mean(bucket), 2) as its scorer_e() does.
A record carrying an `error` (a failed generation) scores 0 on every metric and is counted as failed. A record
carrying `skipped` (its prompt did not fit under inference.py --truncation skip, so it was never run) is out of
n and of every figure, and counted with its reason. Reasoning outputs are counted under `thinking`; a task with a
`breakdown` (LongBench v2) gets its table under `breakdown` (Eval/scoring/breakdowns.py).

Usage:
    from Eval.scoring.scorer import score_dataset
    result = score_dataset(get_task("trec"), read_records("pred/internlm/trec.jsonl"))
    result["metrics"]["classification"]["score"]   # 52.0
"""
from __future__ import annotations

import inspect
import json
from collections import Counter

from Eval.extract import run_extraction, think_state
from Eval.metrics.registry import Zeroed, get_metric
from Eval.scoring.breakdowns import get_breakdown
from Eval.scoring.explain import explain_one, explanation_fields, unscored_explanation
from Eval.scoring.intervals import score_interval
from Eval.tasks import Task

# LongBench-E length buckets: upper bound (exclusive) -> name; `length` is words (en) or characters (zh).
LENGTH_BUCKETS = ((4000, "0-4k"), (8000, "4-8k"), (float("inf"), "8k+"))


def score_text(value: float | None) -> str:
    """A score as every table prints it: two decimals, "-" for none."""
    return "-" if value is None else f"{value:.2f}"


def text_table(rows: list[tuple[str, ...]], left: set[int]) -> list[str]:
    """Rows as the terminal prints them: columns padded to their widest cell, those in `left` left-aligned (names),
    the others right-aligned (numbers), and a rule under the header row."""
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    lines = ["  ".join(c.ljust(w) if i in left else c.rjust(w) for i, (c, w) in enumerate(zip(row, widths)))
             for row in rows]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return lines


def percent(values: list[float]) -> tuple[float | None, float | None]:
    """(round(100 * mean, 2), unrounded 100 * mean) as LongBench's scorer() computes them; (None, None) for no
    values. The loop is LongBench's `total_score += score`: builtin sum() is compensated since Python 3.12 and
    can settle a x.xx5 tie the other way (a 32-line case in tests/test_longbench_edges.py: 33.13 vs 33.12)."""
    if not values:
        return None, None
    total = 0.0
    for value in values:
        total += value
    mean = 100 * total / len(values)
    return round(mean, 2), mean


def bucket_percent(values: list[float]) -> float | None:
    """A LongBench-E bucket's figure as scorer_e() computes it, round(100 * np.mean(values), 2): numpy's pairwise
    sum, and numpy's rounding (rint of x * 100, / 100), each of which can settle a x.xx5 tie differently from
    percent(). None for an empty bucket (LongBench writes NaN). numpy loads only when a bucket has values."""
    if not values:
        return None
    import numpy

    return float(round(100 * numpy.mean(values), 2))


def length_bucket(length) -> str | None:
    if length is None:
        return None
    return next(name for bound, name in LENGTH_BUCKETS if length < bound)


def best_over_answers(metric, prediction: str, answers: list[str], classes,
                      time_limit: float | None = None) -> tuple[float, str | None]:
    """max(0, max over answers); also the reason when the score is 0 because the metric zeroed an exception
    (or, with `time_limit`, because one call took longer than that many seconds)."""
    return best_answer(metric, prediction, answers, classes, time_limit)[:2]


def best_answer(metric, prediction: str, answers: list[str], classes,
                time_limit: float | None = None) -> tuple[float, str | None, int]:
    """best_over_answers, plus the index of the first answer reaching the score (0 when none beats 0): the one
    an explanation is about."""
    score, reason, best = 0.0, None, 0
    for index, answer in enumerate(answers):
        if time_limit is None:
            value = metric(prediction, answer, all_classes=classes)
        else:
            from Eval.scoring.timelimit import SampleTimeLimit, call_with_limit  # only when a limit is asked for

            try:
                value = call_with_limit(metric, time_limit, prediction, answer, all_classes=classes)
            except SampleTimeLimit as err:
                value = Zeroed(f"SampleTimeLimit: {err}")
        if isinstance(value, Zeroed):
            reason = reason or value.reason
        if value > score:  # max(score, value) as LongBench takes it, remembering where it was reached
            score, best = value, index
    return float(score), (reason if score == 0.0 else None), best


def record_key(record: dict):
    """What makes two lines the same example: the id when there is one, else the whole record."""
    rid = record.get("id", record.get("_id"))
    return ("id", str(rid)) if rid is not None else ("record", json.dumps(record, sort_keys=True, ensure_ascii=False))


def duplicate_count(records: list[dict]) -> int:
    """Lines that repeat an earlier example: the same id, or (files without ids) the very same record."""
    return len(records) - len({record_key(r) for r in records})


def uses_classes(metric) -> bool:
    """Whether a metric reads the label set (it names `all_classes` in its signature)."""
    return "all_classes" in inspect.signature(metric.fn).parameters


def score_dataset(task: Task, records: list[dict], time_limit: float | None = None) -> dict:
    """Score records of one dataset with every metric of its task; returns the detailed result dict with
    a `per_example` list (one entry per line, in file order). A record with `skipped` (inference.py
    --truncation skip: never run) is left out of n and of every figure, and counted under `skipped`."""
    metrics = [get_metric(name).bind(dict(task.metric_args)) for name in task.metrics]
    if time_limit is not None:  # one-off loads (jieba's dictionary) must not count against a sample
        for m in metrics:
            m("a", "a", all_classes=["a"])
    # LongBench reads all_classes from the file's last line; per-line values win when present.
    fallback_classes = records[-1].get("all_classes")
    needs_classes = any(uses_classes(m) for m in metrics)
    per_example, values = [], {m.name: [] for m in metrics}
    zeroed = {m.name: Counter() for m in metrics}
    counts, skipped = Counter(), Counter()
    scored, answered = [], []  # the records that count, and whether each had an extracted answer
    for line_no, record in enumerate(records, 1):
        if record.get("skipped"):
            skipped[str(record["skipped"])] += 1
            per_example.append({"line": line_no, "id": record.get("id", record.get("_id")),
                                "skipped": record["skipped"]})
            continue
        classes = record.get("all_classes") or fallback_classes
        entry, extracted = _score_record(task, metrics, record, line_no, (classes, needs_classes), time_limit)
        counts.update(flag for flag in ("failed", "extraction_failed", "no_references", "no_classes") if flag in entry)
        for name, score in entry["scores"].items():
            values[name].append(score)
        for name, reason in entry.get("zeroed", {}).items():
            zeroed[name][reason] += 1
        per_example.append(entry)
        scored.append(record)
        answered.append(extracted is not None)
    result = {
        "dataset": task.name,
        "headline_metric": metrics[0].name,
        "n": len(scored),
        "metrics": {m.name: _metric_summary(m, values[m.name], scored, zeroed[m.name]) for m in metrics},
        "duplicates": duplicate_count(records),
        "extraction": {"steps": list(task.extract), "failed": counts["extraction_failed"]},
        "failed_records": counts["failed"],
        "no_references": counts["no_references"],
        "no_classes": counts["no_classes"],
        "skipped": {"count": sum(skipped.values()), "reasons": dict(skipped)},
    }
    thinking = thinking_counts(scored)
    if thinking:
        result["thinking"] = thinking
    if task.breakdown:
        headline = values[metrics[0].name]
        result["breakdown"] = get_breakdown(task.breakdown)(list(zip(scored, headline, answered)))
    return {**result, "per_example": per_example}


def _score_record(task: Task, metrics: list, record: dict, line_no: int, label_set: tuple,
                  time_limit: float | None) -> tuple[dict, str | None]:
    """(per-example entry, extracted answer or None) of one record that counts; `label_set` is (the record's
    classes, whether a metric of the task reads them)."""
    classes, needs_classes = label_set
    entry = {"line": line_no, "id": record.get("id", record.get("_id")), "scores": {}}
    failed = record.get("error") is not None
    extracted = None if failed else run_extraction(task.extract, record["pred"], record)
    if failed:  # the generation failed, so `pred` (often "", maybe a partial text) is no answer: it scores 0
        entry["failed"] = record["error"]
    elif extracted is None:
        entry["extraction_failed"] = True
    if not record["answers"]:
        entry["no_references"] = True
    if needs_classes and not classes:
        entry["no_classes"] = True
    # Explanations are computed after the score, from the reference that gave it, and never feed back into it.
    explanations = unscored_explanation(record, [m.name for m in metrics]) if extracted is None else {}
    for m in metrics:
        if extracted is None:
            entry["scores"][m.name] = 0.0
            continue
        score, reason, best = best_answer(m, extracted, record["answers"], classes, time_limit)
        entry["scores"][m.name] = score
        if reason:
            entry.setdefault("zeroed", {})[m.name] = reason
        explanations[m.name] = ({"score": 0.0, "text": f"scored 0: {reason}"} if reason else
                                explain_one(m, extracted, record["answers"], best, classes))
    entry.update(explanation_fields(record, extracted, explanations))
    return entry, extracted


def thinking_counts(records: list[dict]) -> dict | None:
    """Reasoning outputs among the scored records, when any has a thinking block (or a "thinking" field):
    outputs with one, blocks never closed (no answer: unparsed), those cut by the length limit inside the block
    (finish_reason "length" while unclosed: a larger max_new_tokens would help), and thinking budgets hit.
    The tags are each record's own (Eval/extract.py think_tags). None when no record has thinking."""
    outputs = unclosed = in_thinking = budget = 0
    for record in records:
        state = think_state(record["pred"], record)
        thinking = record.get("thinking")
        if state is None and not isinstance(thinking, dict):
            continue
        outputs += 1
        if state == "unclosed":
            unclosed += 1
            in_thinking += record.get("finish_reason") == "length"
        budget += isinstance(thinking, dict) and thinking.get("budget_hit") is True
    if not outputs:
        return None
    return {"outputs": outputs, "unclosed": unclosed, "length_in_thinking": in_thinking, "budget_hit": budget}


def _metric_summary(m, scores: list[float], records: list[dict], zeroed: Counter) -> dict:
    score, unrounded = percent(scores)
    buckets: dict[str, list[float]] = {name: [] for _, name in LENGTH_BUCKETS}
    missing = 0
    for value, record in zip(scores, records):
        name = length_bucket(record.get("length"))
        if name is None:
            missing += 1
        else:
            buckets[name].append(value)
    return {
        "score": score,
        "score_unrounded": unrounded,
        "version": m.version,
        "zeroed_by_exception": dict(zeroed),
        "length_buckets": {name: bucket_percent(v) for name, v in buckets.items()},
        "length_missing": missing,
        **score_interval(scores),  # "ci95" [low, high] on the score's 0-100 scale, and "ci95_method"
    }
