"""Score one dataset's prediction records: extraction, per-record metric values, aggregates.

The LongBench loop, kept exactly: per record max(0, max over `answers` of metric(extracted, answer,
all_classes=...)); dataset score round(100 * sum / n, 2) over EVERY line, duplicates counted. An
`error` record scores 0; a `skipped` one (and LongBench v2's empty or failed output,
Task.leave_out_empty) is out of n and of every figure.

Usage:
    result = score_dataset(TASKS["trec"], read_records("pred/internlm/trec.jsonl"))
"""
from __future__ import annotations

import functools
import inspect
import json
import operator
from collections import Counter

from Eval.extract import run_extraction
from Eval.metrics.registry import METRICS, Zeroed
from Eval.metrics.retrieval import add_ranked, ranking_values
from Eval.scoring.breakdowns import BREAKDOWNS, not_written
from Eval.scoring.explain import explain_one, head, unscored_explanation
from Eval.scoring.intervals import score_interval
from Eval.scoring.timelimit import SampleTimeLimit, call_with_limit
from Eval.tasks import Task
from Eval.thinking import thinking_counts

# LongBench-E length buckets: upper bound (exclusive) -> name; `length`: words (en), characters (zh)
LENGTH_BUCKETS = ((4000, "0-4k"), (8000, "4-8k"), (float("inf"), "8k+"))
FLAGS = ("failed", "extraction_failed", "no_references", "no_classes")  # counted per dataset


def percent(values: list[float]) -> tuple[float | None, float | None]:
    """(round(100 * mean, 2), 100 * mean) as LongBench's scorer() computes them: its sum left to
    right, as builtin sum() is compensated (Python 3.12+) and can settle a x.xx5 tie otherwise."""
    if not values:
        return None, None
    mean = 100 * functools.reduce(operator.add, values, 0.0) / len(values)
    return round(mean, 2), mean


def bucket_percent(values: list[float]) -> float | None:
    """A LongBench-E bucket as scorer_e() computes it (numpy's pairwise sum can settle a x.xx5 tie
    unlike percent()); None for an empty bucket (LongBench writes NaN)."""
    if not values:
        return None
    import numpy

    return float(round(100 * numpy.mean(values), 2))


def best_over_answers(metric, prediction: str, answers: list[str], classes,
                      time_limit: float | None = None) -> tuple[float, str | None, int]:
    """max(0, max over answers), 0 on a time-out; why a 0 was zeroed; the first best one's index."""
    score, reason, best = 0.0, None, 0
    for index, answer in enumerate(answers):
        try:  # no limit: a plain call
            value = call_with_limit(metric, time_limit, prediction, answer, all_classes=classes)
        except SampleTimeLimit as err:  # the sample scores 0, whatever another answer scored
            return 0.0, f"SampleTimeLimit: {err}", index
        if isinstance(value, Zeroed):
            reason = reason or value.reason
        if value > score:  # max(score, value) as LongBench takes it, remembering where
            score, best = value, index
    return float(score), (reason if score == 0.0 else None), best


def duplicate_count(records: list[dict]) -> int:
    keys = set()
    for r in records:
        rid = r.get("id", r.get("_id"))
        keys.add(("id", str(rid)) if rid is not None else
                 ("record", json.dumps(r, sort_keys=True, ensure_ascii=False)))
    return len(records) - len(keys)


def score_dataset(task: Task, records: list[dict], time_limit: float | None = None) -> dict:
    metrics = [METRICS[name].bind(dict(task.metric_args)) for name in task.metrics]
    text_metrics = [m for m in metrics if not m.per_query]
    if time_limit is not None:  # one-off loads (jieba's dictionary) must not count against a sample
        for m in text_metrics:
            m("a", "a", all_classes=["a"])
    # LongBench reads all_classes from the file's last line; per-line values win when present.
    fallback_classes = records[-1].get("all_classes")
    needs_classes = any("all_classes" in inspect.signature(m.fn).parameters for m in text_metrics)
    per_example, skipped, scored = [], Counter(), []  # scored: (record, entry) of those that count

    def left_out_of(record: dict):  # not run (--truncation skip), or LongBench v2 never writes it
        return record.get("skipped") or (task.leave_out_empty and not_written(record))

    # Ranking metrics score the whole run at once (the records scored below, in order); a query
    # without a run or qrels has no value.
    ranked = ranking_values([m for m in metrics if m.per_query],
                            [r for r in records if not left_out_of(r)])
    for line_no, record in enumerate(records, 1):
        left_out = left_out_of(record)
        if left_out:
            skipped[str(left_out)] += 1
            per_example.append({"line": line_no, "id": record.get("id", record.get("_id")),
                                "skipped": left_out})
            continue
        classes = record.get("all_classes") or fallback_classes
        entry = _score_record(task, text_metrics, record, line_no, classes,
                              needs_classes and not classes, time_limit)
        per_example.append(entry)
        scored.append((record, entry))
    add_ranked(ranked, [entry for _, entry in scored])
    counts = Counter(flag for _, entry in scored for flag in FLAGS if flag in entry)
    result = {"dataset": task.name, "headline_metric": metrics[0].name, "n": len(scored),
              "metrics": {m.name: _metric_summary(m, [(r, e) for r, e in scored
                                                      if m.name in e["scores"]])
                          for m in metrics},
              "duplicates": duplicate_count(records),
              "extraction": {"steps": list(task.extract), "failed": counts["extraction_failed"]},
              "failed_records": counts["failed"], "no_references": counts["no_references"],
              "no_classes": counts["no_classes"],
              "skipped": {"count": sum(skipped.values()), "reasons": dict(skipped)}}
    for name in ranked:  # trec_eval's mean: over the queries both the run and the qrels hold
        queries = sum(name in e["scores"] for _, e in scored)
        result["metrics"][name].update(queries=queries, queries_unranked=len(scored) - queries)
    thinking = thinking_counts([r for r, _ in scored])
    if thinking:
        result["thinking"] = thinking
    if task.breakdown:
        headline = [(r, e["scores"][metrics[0].name], e["extracted"] is not None)
                    for r, e in scored if metrics[0].name in e["scores"]]
        result["breakdown"] = BREAKDOWNS[task.breakdown](headline)
    return {**result, "per_example": per_example}


def _score_record(task: Task, metrics: list, record: dict, line_no: int, classes,
                  no_classes: bool, time_limit: float | None) -> dict:
    """The per-example entry; `no_classes`: a metric reads the class list, and there is none."""
    entry = {"line": line_no, "id": record.get("id", record.get("_id")), "scores": {}}
    failed = record.get("error") is not None
    extracted = None if failed else run_extraction(task.extract, record["pred"], record)
    if failed:  # the generation failed: `pred` (often "", maybe a partial text) is no answer
        entry["failed"] = record["error"]
    elif extracted is None:
        entry["extraction_failed"] = True
    if not record["answers"]:
        entry["no_references"] = True
    if no_classes:
        entry["no_classes"] = True
    # Explanations come after the score, from the reference that gave it, and never change it.
    explanations = {} if extracted is not None else \
        unscored_explanation(record, [m.name for m in metrics])
    for m in metrics:
        if extracted is None:
            entry["scores"][m.name] = 0.0
            continue
        score, reason, best = best_over_answers(m, extracted, record["answers"], classes,
                                                time_limit)
        entry["scores"][m.name] = score
        if reason:
            entry.setdefault("zeroed", {})[m.name] = reason
        explanations[m.name] = ({"score": 0.0, "text": f"scored 0: {reason}"} if reason else
                                explain_one(m, extracted, record["answers"], best, classes))
    entry.update(pred=head(record.get("pred")), extracted=extracted,
                 answers=record.get("answers"), explanations=explanations)
    return entry


def _metric_summary(m, rows: list[tuple[dict, dict]]) -> dict:
    """The figures of metric m over (record, entry) rows that hold a score of it."""
    scores = [entry["scores"][m.name] for _, entry in rows]
    zeroed = Counter(entry["zeroed"][m.name] for _, entry in rows
                     if m.name in entry.get("zeroed", {}))
    score, unrounded = percent(scores)
    buckets: dict[str, list[float]] = {name: [] for _, name in LENGTH_BUCKETS}
    lengths = [(value, r["length"]) for value, (r, _) in zip(scores, rows)
               if r.get("length") is not None]
    for value, length in lengths:
        buckets[next(name for bound, name in LENGTH_BUCKETS if length < bound)].append(value)
    return {"score": score, "score_unrounded": unrounded, "version": m.version,
            "zeroed_by_exception": dict(zeroed),
            "length_buckets": {name: bucket_percent(v) for name, v in buckets.items()},
            "length_missing": len(scores) - len(lengths),
            **score_interval(scores)}  # "ci95" [low, high] on the 0-100 scale, and "ci95_method"
