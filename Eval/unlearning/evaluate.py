"""The two unlearning entry points of eval.py, and the functions behind them.

Usage:
    python eval.py --unlearning tofu --pred-dir DIR [--retain-logs RETAIN/TOFU_EVAL.json]
        scores our score records DIR/tofu_*.jsonl -> DIR/TOFU_EVAL.json, DIR/TOFU_SUMMARY.json
    python eval.py --from-open-unlearning PATH/TOFU_EVAL.json [--retain-logs PATH] [--out-dir DIR]
        re-aggregates a published log from its per-sample values -> DIR/TOFU_EVAL.json, DIR/TOFU_SUMMARY.json
        (TOFU or MUSE is told from the log's metrics; DIR defaults to pred/open-unlearning/<log's folder>)

    from Eval.unlearning.evaluate import score_records, reaggregate
    outcome = reaggregate(Path(".../TOFU_EVAL.json"), retain_logs=Path(".../retain90/TOFU_EVAL.json"))
    outcome.summary["forget_quality"]

Bad input (a malformed record or log, a missing field, an unreadable retain log) raises RecordError before
anything is written; main() prints it and returns 2.
"""
from __future__ import annotations

import dataclasses
import sys
import time
from pathlib import Path

from Eval.records import RecordError
from Eval.unlearning import files
from Eval.unlearning.engine import LogSource, RecordSource, Run
from Eval.unlearning.suites import SUITES


@dataclasses.dataclass
class Outcome:
    suite: str              # "TOFU" / "MUSE"
    eval_log: dict          # NAME_EVAL.json contents
    summary: dict           # NAME_SUMMARY.json contents
    notes: list[str]        # warnings, fallbacks, skipped metrics
    run: Run


def _reference_logs(path: Path | None, suite: str) -> tuple[dict | None, Path | None]:
    if path is None:
        return None, None
    path = files.find_log(path)
    log = files.load_log(path, "retain-model log")
    if files.detect_suite(log, path) != suite:  # a MUSE retrain log cannot serve a TOFU run, nor vice versa
        raise RecordError(path, None, f"this retain-model log is not a {suite.upper()} log")
    return log, path


# Not a metric: which tokens of each answer were labelled (Eval/unlearning/inference.py ANSWER_ENCODINGS). An
# object, as every entry of an EVAL log is; open-unlearning's own logs have none.
ENCODING_KEY = "answer_encoding"


def answer_encoding(source: RecordSource) -> dict:
    """{"value": the one encoding of the answer labels (or "mixed"), "by_file": {file: encoding}}; records written
    before the field existed say "not recorded"."""
    by_file = {}
    for split, rows in source.records.items():
        found = sorted({r.get("answer_encoding", "not recorded") for _, r in rows} - {"plain"})
        if found:
            by_file[source.suite.file_name(split)] = found[0] if len(found) == 1 else "mixed"
    values = set(by_file.values())
    return {"value": values.pop() if len(values) == 1 else "mixed", "by_file": by_file}


def score_records(suite: str, pred_dir: Path, retain_logs: Path | None = None, warn=None) -> Outcome:
    """Score our own records DIR/<suite>_<split>.jsonl (layout: Eval/unlearning/suites.py)."""
    spec = SUITES[suite]
    reference, ref_path = _reference_logs(retain_logs, suite)
    run = Run(spec, RecordSource(spec, Path(pred_dir)), reference, ref_path, warn)
    eval_log, summary = run.evaluate()
    encoding = answer_encoding(run.source)
    if encoding["by_file"]:
        eval_log[ENCODING_KEY] = encoding
        theirs = (reference or {}).get(ENCODING_KEY, {}).get("value")
        if encoding["value"] == "mixed":
            run.warn(f"answer labels were encoded differently across files ({encoding['by_file']}): the "
                     "probabilities are not comparable; rerun inference.py with one --answer-encoding")
        elif theirs and theirs != encoding["value"]:
            run.warn(f"the retain-model logs labelled answers as {theirs!r}, these records as "
                     f"{encoding['value']!r}: forget_quality compares the two; rerun one with the other's encoding")
    return Outcome(spec.name, eval_log, summary, run.notes, run)


def reaggregate(log_path: Path, retain_logs: Path | None = None, warn=None) -> Outcome:
    """Recompute every aggregate and composite of a published EVAL log from its value_by_index entries."""
    log_path = files.find_log(log_path)
    log = files.load_log(log_path)
    suite = files.detect_suite(log, log_path)
    spec = SUITES[suite]
    reference, ref_path = _reference_logs(retain_logs, suite)
    run = Run(spec, LogSource(spec, log, log_path), reference, ref_path, warn)
    eval_log, summary = run.evaluate()
    for name in log:
        if name == ENCODING_KEY:  # our own log read back: kept as it is, not a metric
            eval_log[name] = log[name]
        elif name not in spec.metrics:  # e.g. a metric of a newer open-unlearning: kept, but say it is a copy
            eval_log[name] = log[name]
            run.notes.append(f"{name}: not a known {spec.name} metric; copied unchanged, not recomputed")
    return Outcome(spec.name, eval_log, summary, run.notes, run)


def format_outcome(outcome: Outcome, paths: tuple[Path, Path], seconds: float) -> str:
    """The console report: each top-level figure, null ones explained, then the notes."""
    lines = [f"{outcome.suite} ({seconds:.2f} s) -> {paths[0]}, {paths[1]}"]
    top = [n for n in SUITES[outcome.suite.lower()].top_level if n in outcome.eval_log]
    width = max(len(n) for n in top)
    for name in top:
        value = outcome.eval_log[name]["agg_value"]
        shown = "null (left out of the summary)" if value is None else f"{value:.6g}"
        if name in outcome.run.fallbacks or any(n.startswith(f"{name}: ") for n in outcome.notes):
            shown += "  (see note)"  # a fallback was used, e.g. no retain-model logs
        lines.append(f"  {name:{width}}  {shown}")
    if ENCODING_KEY in outcome.eval_log:
        lines.append(f"  answer labels: {outcome.eval_log[ENCODING_KEY]['value']} (inference.py --answer-encoding)")
    lines += [f"note: {n}" for n in outcome.notes if n not in outcome.run.warnings]  # warnings: shown once
    return "\n".join(lines)


def _default_out_dir(log_path: Path) -> Path:
    return Path("pred") / "open-unlearning" / files.find_log(log_path).resolve().parent.name


def main(args) -> int:
    """eval.py's unlearning modes; `args` holds from_open_unlearning, unlearning, pred_dir, retain_logs,
    out_dir and quiet."""
    start = time.perf_counter()
    warn = (lambda message: None) if args.quiet else None  # --quiet: errors only
    try:
        if args.from_open_unlearning is not None:
            outcome = reaggregate(args.from_open_unlearning, args.retain_logs, warn)
            out_dir = args.out_dir or _default_out_dir(args.from_open_unlearning)
            source = files.find_log(args.from_open_unlearning)
            if (Path(out_dir) / source.name).resolve() == source.resolve():
                raise RecordError(out_dir, None, f"would overwrite the log being read ({source.name}); pass another "
                                                 "--out-dir")
        else:
            outcome = score_records(args.unlearning, args.pred_dir, args.retain_logs, warn)
            out_dir = args.out_dir or args.pred_dir
    except RecordError as err:
        print(f"error: nothing was written: {err}", file=sys.stderr)
        return 2
    paths = files.write_outputs(Path(out_dir), outcome.suite, outcome.eval_log, outcome.summary)
    if not args.quiet:
        print(format_outcome(outcome, paths, time.perf_counter() - start))
    return 0
