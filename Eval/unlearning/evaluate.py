"""eval.py unlearning: TOFU / MUSE figures from our score records, or from a published log.

Usage:
    python eval.py unlearning tofu --pred-dir DIR [--retain-logs RETAIN/TOFU_EVAL.json]   # DIR/tofu_*.jsonl
    python eval.py unlearning --from-open-unlearning PATH/TOFU_EVAL.json [--retain-logs PATH] [--out-dir DIR]
    reaggregate(Path("TOFU_EVAL.json"), retain_logs=Path("retain90/TOFU_EVAL.json")).summary["forget_quality"]

Both recompute every aggregate from the per-sample values and write NAME_EVAL.json and
NAME_SUMMARY.json; bad input raises RecordError before anything is written. numpy and scipy load
only when a mode runs.
"""
from __future__ import annotations

import argparse
import importlib
import numbers
import sys
import time
from pathlib import Path

from Eval.commands import eval_command
from Eval.records import RecordError
from Eval.unlearning import files
from Eval.unlearning.splits import roles

ENCODING_KEY = "answer_encoding"  # not a metric: which tokens of each answer were labelled (score_records.py)


def benchmark(suite: str):
    """Eval/unlearning/tofu.py or muse.py: NAME, LEAVES, TOP_LEVEL, evaluate(run)."""
    return importlib.import_module(f"Eval.unlearning.{suite}")


def computed(where: str, name: str, fn, *args, **params):
    """fn(*args, **params), its failure a RecordError naming `where` and the metric."""
    try:
        return fn(*args, **params)
    except (ValueError, KeyError, TypeError) as err:
        raise RecordError(where, None, f"{name}: cannot compute ({type(err).__name__}: {err})") from None


class Run:
    """One evaluation's results, each computed once; `why` one is missing; `notes` for the user."""

    def __init__(self, results: dict, why: dict, retain=(None, None), source="", warn=None,
                 required=()):
        self.results, self.why, (self.retain, self.retain_path) = results, why, retain
        self.source, self.required, self.inputs, self.fallbacks = str(source), required, {}, {}
        self._warn = warn or (lambda message: print(f"warning: {message}", file=sys.stderr))
        self.notes, self.warnings, self.eval_log, self.summary, self.suite = [], [], {}, {}, ""

    def warn(self, message: str) -> None:
        self.notes.append(message)
        self.warnings.append(message)
        self._warn(message)

    def put(self, name: str, fn, *inputs: str, retain: tuple[str, str] | None = None, **params) -> None:
        """results[name] = fn(*inputs' results[, retain entry]); retain: (metric, fallback)."""
        missing = next((i for i in inputs if i not in self.results), None)
        if missing is not None:
            self.why[name] = f"needs {missing}: {self.why.get(missing, 'no per-sample values')}"
            return
        args, self.inputs[name] = [self.results[i] for i in inputs], inputs
        if retain is not None:
            args.append((self.retain or {}).get(retain[0]))
            if args[-1] is None:
                self.fallbacks[name] = retain[1]
                if self.retain is not None:  # no logs at all: finish() says it once for every metric
                    self.warn(f"{name}: the retain-model logs {self.retain_path} hold no {retain[0]!r}; "
                              f"{retain[1]} (open-unlearning's fallback)")
        where = self.source + ("" if self.retain is None else f" (retain logs {self.retain_path})")
        self.results[name] = computed(where, name, fn, *args, **params)

    def finish(self, suite: str, top_level: tuple[str, ...]) -> tuple[dict, dict]:
        """eval_log: the top-level metrics computed and their inputs; summary: their agg_values."""
        done = [n for n in top_level if n in self.results]
        self.notes += [f"skipped {n}: {self.why.get(n)}" for n in top_level if n not in self.results]
        for metric in self.required:
            if metric in self.why:
                raise RecordError(self.source, None, f"{metric} cannot be recomputed: {self.why[metric]}")
        if not done:
            raise RecordError(self.source, None, f"no {suite} metric can be computed: " + "; ".join(self.notes))
        fallbacks = [f"{n} ({self.fallbacks[n]})" for n in done if n in self.fallbacks]
        if self.retain is None and fallbacks:
            self.warn(f"no retain-model logs (--retain-logs): {', '.join(fallbacks)}")
        kept, todo = set(), done + [n for n in self.required if n in self.results]
        while todo:  # the metrics kept and, recursively, their inputs
            name = todo.pop()
            if name not in kept:
                kept.add(name)
                todo += self.inputs.get(name, ())
        self.suite, self.eval_log = suite, {n: r for n, r in self.results.items() if n in kept}
        self.summary = {n: self.results[n]["agg_value"] for n in done if self.results[n]["agg_value"] is not None}
        return self.eval_log, self.summary


def record_leaves(suite: str, pred_dir: Path) -> tuple[dict, dict, dict]:
    """(results, why, answer encoding) of the leaves, from DIR/<suite>_<split>.jsonl."""
    from Eval.unlearning import samples

    if not pred_dir.is_dir():
        raise RecordError(pred_dir, None, "no such folder")
    paths = {split: pred_dir / f"{suite}_{split}.jsonl" for split in roles(suite)}
    records = {s: files.load_records(p) for s, p in paths.items() if p.is_file()}
    if not records:
        raise RecordError(pred_dir, None, f"no {suite.upper()} score records: expected "
                                          f"{', '.join(p.name for p in paths.values())}")
    results, why = {}, {}
    for name, (split, kind, key) in benchmark(suite).LEAVES.items():
        sides = split if isinstance(split, tuple) else (split,)
        sample, where = samples.KINDS[kind][0], ", ".join(str(paths[s]) for s in sides)
        try:
            values = [_samples(name, sample, key, paths[s], records.get(s)) for s in sides]
        except samples.Missing as err:  # a file, or a field no record of it has
            why[name] = str(err)
            continue
        values = tuple(values) if isinstance(split, tuple) else values[0]
        results[name] = computed(where, name, samples.leaf_result, kind, values)
    return results, why, _answer_encoding(records, paths)


def _samples(name: str, sample, key: str, path: Path, rows: list | None) -> dict:
    from Eval.unlearning.samples import Missing

    if sample is None:
        raise Missing("needs a model at scoring time; not computable from saved records")
    if rows is None:
        raise Missing(f"no {path.name}")
    values, lacking = {}, []
    for line, record in rows:
        try:
            values[str(record["index"])] = sample(record, key)
        except Missing as err:
            lacking.append((line, err))
        except ValueError as err:
            raise RecordError(path, line, f"{name}: {err}") from None
    if len(lacking) == len(rows):
        raise Missing(f"no {lacking[0][1]} in {path.name}")
    if lacking:
        raise RecordError(path, lacking[0][0], f"record lacks {lacking[0][1]}, which other records of "
                                               f"this file have ({name} needs it)")
    return values


def _answer_encoding(records: dict, paths: dict) -> dict:
    # {"value": the labels' one encoding or "mixed", "by_file": {file: encoding or "not recorded"}}
    by_file = {}
    for split, rows in records.items():
        found = sorted({r.get(ENCODING_KEY, "not recorded") for _, r in rows} - {"plain"})
        if found:
            by_file[paths[split].name] = found[0] if len(found) == 1 else "mixed"
    values = set(by_file.values())
    return {"value": values.pop() if len(values) == 1 else "mixed", "by_file": by_file}


def log_leaves(suite: str, log: dict, path: Path) -> tuple[dict, dict]:
    """(results, why) of the leaves, from an EVAL log's value_by_index entries, each checked."""
    from Eval.unlearning import samples

    results, why = {}, {}
    for name, (split, kind, _) in benchmark(suite).LEAVES.items():
        fields = samples.KINDS[kind][2]
        if name not in log:
            why[name] = f"not in {Path(path).name}"
            continue
        if isinstance(split, tuple):
            values = tuple(_checked(log[name].get(side), f"{name}.{side}", fields, path)
                           for side in ("forget", "holdout"))
        else:
            values = _checked(log[name], name, fields, path)
        results[name] = computed(path, name, samples.leaf_result, kind, values)
    return results, why


def _checked(entry, label: str, fields: tuple, path: Path) -> dict:
    values = entry.get("value_by_index") if isinstance(entry, dict) else None
    if not isinstance(values, dict) or not values:
        raise RecordError(path, None, f"{label}: no per-sample values (value_by_index) to recompute from")
    for idx, sample in values.items():
        if sample is None:
            continue  # the reference drops None samples; so do the aggregates
        bad = [f for f in fields if not isinstance(sample, dict) or not _is_value(sample.get(f, ""))]
        if bad:
            raise RecordError(path, None, f"{label}.value_by_index[{idx!r}]: {bad[0]!r} is missing or not a number")
    return values


def _is_value(x) -> bool:
    if isinstance(x, list):
        return all(_is_value(v) for v in x)
    return x is None or (isinstance(x, numbers.Real) and not isinstance(x, bool))


def _retain_log(path: Path | None, suite: str) -> tuple[dict | None, Path | None]:
    if path is None:
        return None, None
    path = files.find_log(path)
    log = files.load_log(path, "retain-model log")
    if files.detect_suite(log, path) != suite:  # a MUSE retrain log cannot serve a TOFU run, nor vice versa
        raise RecordError(path, None, f"this retain-model log is not a {suite.upper()} log")
    return log, path


def score_records(suite: str, pred_dir: Path, retain_logs: Path | None = None, warn=None) -> Run:
    """Score our own records DIR/<suite>_<split>.jsonl (their layout: Eval/inference/score_records.py)."""
    retain = _retain_log(retain_logs, suite)
    results, why, encoding = record_leaves(suite, Path(pred_dir))
    outcome = Run(results, why, retain, pred_dir, warn)
    benchmark(suite).evaluate(outcome)
    if encoding["by_file"]:
        outcome.eval_log[ENCODING_KEY] = encoding
        theirs = (retain[0] or {}).get(ENCODING_KEY, {}).get("value")
        if encoding["value"] == "mixed":
            outcome.warn(f"answer labels were encoded differently across files ({encoding['by_file']}): the "
                         "probabilities are not comparable; rerun inference.py with one --answer-encoding")
        elif theirs and theirs != encoding["value"]:
            outcome.warn(f"the retain-model logs labelled answers as {theirs!r}, these records as "
                         f"{encoding['value']!r}: forget_quality compares the two; rerun one with the other's encoding")
    return outcome


def reaggregate(log_path: Path, retain_logs: Path | None = None, warn=None) -> Run:
    """Recompute every aggregate and composite of a published EVAL log from its value_by_index entries."""
    log_path = files.find_log(log_path)
    log = files.load_log(log_path)
    suite = files.detect_suite(log, log_path)
    retain = _retain_log(retain_logs, suite)
    outcome = Run(*log_leaves(suite, log, log_path), retain, log_path, warn, required=list(log))
    benchmark(suite).evaluate(outcome)
    for name in log:
        if name == ENCODING_KEY:  # our own log read back: kept as it is, not a metric
            outcome.eval_log[name] = log[name]
        elif name not in outcome.eval_log:  # e.g. a metric of a newer open-unlearning: kept, but said to be a copy
            outcome.eval_log[name] = log[name]
            outcome.notes.append(f"{name}: not a known {outcome.suite} metric; copied unchanged, not recomputed")
    return outcome


def report(outcome: Run, paths: tuple[Path, Path], seconds: float) -> str:
    """The console report: each top-level figure, null ones explained, then the notes."""
    lines = [f"{outcome.suite} ({seconds:.2f} s) -> {paths[0]}, {paths[1]}"]
    top = [n for n in benchmark(outcome.suite.lower()).TOP_LEVEL if n in outcome.eval_log]
    width = max(len(n) for n in top)
    for name in top:
        value = outcome.eval_log[name]["agg_value"]
        shown = "null (left out of the summary)" if value is None else f"{value:.6g}"
        if name in outcome.fallbacks or any(n.startswith(f"{name}: ") for n in outcome.notes):
            shown += "  (see note)"  # a fallback was used, e.g. no retain-model logs
        lines.append(f"  {name:{width}}  {shown}")
    if ENCODING_KEY in outcome.eval_log:
        lines.append(f"  answer labels: {outcome.eval_log[ENCODING_KEY]['value']} (inference.py --answer-encoding)")
    return "\n".join(lines + [f"note: {n}" for n in outcome.notes if n not in outcome.warnings])  # warnings once


# --- the command line (eval.py) ----------------------------------------------------------------------------
def add_arguments(parser: argparse.ArgumentParser) -> None:
    """eval.py unlearning's options."""
    parser.add_argument("suite", nargs="?", choices=("tofu", "muse"), default=None,
                        help="score the score records PRED_DIR/<tofu|muse>_<split>.jsonl of inference.py unlearning")
    parser.add_argument("--pred-dir", type=Path, default=None, help="the folder of score records (default: none)")
    parser.add_argument("--from-open-unlearning", type=Path, default=None, metavar="EVAL_JSON",
                        help="instead: re-aggregate a published TOFU_EVAL.json / MUSE_EVAL.json from its per-sample "
                             "values (default: off)")
    parser.add_argument("--retain-logs", type=Path, default=None, metavar="EVAL_JSON",
                        help="the retain model's EVAL.json, for forget_quality and privleak (default: none: "
                             "forget_quality null, privleak against AUC 0.5)")
    parser.add_argument("--out-dir", type=Path, default=None,
                        help="where the two files go (default: --pred-dir, or pred/open-unlearning/<log's folder>)")
    parser.add_argument("--quiet", action="store_true", help="print only errors")


@eval_command("unlearning", help="TOFU / MUSE: score our score records, or re-aggregate a published log")
def run(args: argparse.Namespace) -> int:
    """Write NAME_EVAL.json and NAME_SUMMARY.json; exit code."""
    if bool(args.from_open_unlearning) == bool(args.suite) or (args.suite and args.pred_dir is None):
        print("error: give tofu|muse --pred-dir DIR, or --from-open-unlearning EVAL_JSON", file=sys.stderr)
        return 2
    start, quiet = time.perf_counter(), getattr(args, "quiet", False)
    warn = (lambda message: None) if quiet else None  # --quiet: errors only
    try:
        if args.from_open_unlearning is not None:
            source = files.find_log(args.from_open_unlearning)
            outcome = reaggregate(source, args.retain_logs, warn)
            out_dir = args.out_dir or Path("pred") / "open-unlearning" / source.resolve().parent.name
            if (Path(out_dir) / source.name).resolve() == source.resolve():
                raise RecordError(out_dir, None, f"would overwrite the log being read ({source.name}); pass another "
                                                 "--out-dir")
        else:
            outcome = score_records(args.suite, args.pred_dir, args.retain_logs, warn)
            out_dir = args.out_dir or args.pred_dir
    except RecordError as err:
        print(f"error: nothing was written: {err}", file=sys.stderr)
        return 2
    paths = files.write_outputs(Path(out_dir), outcome.suite, outcome.eval_log, outcome.summary)
    if not quiet:
        print(report(outcome, paths, time.perf_counter() - start))
    return 0
