"""eval.py unlearning: TOFU / MUSE figures from our score records, or from a published log.

Usage:
    python eval.py unlearning tofu --pred-dir DIR [--retain-logs RETAIN/TOFU_EVAL.json]
    python eval.py unlearning --from-open-unlearning PATH/TOFU_EVAL.json [--retain-logs PATH]
"""
from __future__ import annotations

import argparse
import importlib
import json
import sys
import time
from pathlib import Path

from Eval.commands import eval_command
from Eval.names import folder_hint
from Eval.records import RecordError, iter_json_objects
from Eval.storage import write_bytes_atomic

ENCODING_KEY = "answer_encoding"  # not a metric: which tokens of the answers were labelled
# Keys only one suite's log holds: enough to tell a TOFU log from a MUSE one whatever its name.
_MARKERS = {"tofu": ("forget_truth_ratio", "forget_Q_A_Prob", "model_utility",
                     "forget_Q_A_PARA_Prob"),
            "muse": ("forget_knowmem_ROUGE", "retain_knowmem_ROUGE", "forget_verbmem_ROUGE")}


def load_records(path: Path) -> list[tuple[int, dict]]:
    """(line, record) of each record of a split file, sorted by its integer `index`."""
    seen = {}
    for line, obj in iter_json_objects(path):
        index = obj.get("index") if isinstance(obj, dict) else None
        if not isinstance(index, int) or isinstance(index, bool):
            raise RecordError(path, line, "missing integer field 'index' (the row's position in "
                                          "the split)")
        if index in seen:
            raise RecordError(path, line, f"index {index} repeats line {seen[index][0]}")
        seen[index] = line, obj
    if not seen:
        raise RecordError(path, None, "file is empty: no score records")
    return [seen[index] for index in sorted(seen)]


def load_log(path: Path, what: str = "EVAL log") -> dict:
    logs = [log for _, log in iter_json_objects(path)]
    if len(logs) != 1 or not isinstance(logs[0], dict) or not logs[0] \
            or not all(isinstance(result, dict) for result in logs[0].values()):
        raise RecordError(path, None, f"an {what} must be one non-empty JSON object of metric "
                                      "name -> result object")
    return logs[0]


def find_log(path: Path, suite: str | None = None) -> Path:
    """A log path as given, or the (suite's) <SUITE>_EVAL.json inside a folder."""
    if not Path(path).is_dir():
        return Path(path)
    names = [f"{name.upper()}_EVAL.json" for name in ((suite,) if suite else ("tofu", "muse"))]
    found = [Path(path, name) for name in names if Path(path, name).is_file()]
    if len(found) > 1:
        raise RecordError(path, None, f"holds both {names[0]} and {names[1]}: name the one to read")
    if not found:
        raise RecordError(path, None, f"a folder without {' or '.join(names)}")
    return found[0]


def detect_suite(log: dict, path: Path) -> str:
    """'tofu' or 'muse', from the metrics the log holds, else from a TOFU_/MUSE_ file name."""
    hits = [name for name, keys in _MARKERS.items() if any(k in log for k in keys)]
    if len(hits) == 1:
        return hits[0]
    for name in _MARKERS:
        if Path(path).name.upper().startswith(name.upper() + "_"):
            return name
    raise RecordError(path, None, "cannot tell whether this is a TOFU or a MUSE log: it holds none "
                                  f"(or both) of {', '.join(_MARKERS['tofu'] + _MARKERS['muse'])}")


def write_outputs(out_dir: Path, name: str, eval_log: dict, summary: dict) -> tuple[Path, Path]:
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = out_dir / f"{name}_EVAL.json", out_dir / f"{name}_SUMMARY.json"
    for path, content in zip(paths, (eval_log, summary)):
        text = json.dumps({k: content[k] for k in sorted(content)}, indent=4,
                          default=lambda value: value.tolist())  # numpy scalars and arrays
        write_bytes_atomic(path, text.encode("utf-8"))
    return paths


def computed(where, name: str, fn, *args, **params):
    try:
        return fn(*args, **params)
    except (ValueError, KeyError, TypeError) as err:
        raise RecordError(where, None, f"{name}: cannot compute ({type(err).__name__}: {err})") \
            from None


class Run:
    """One evaluation of a suite: `results` by metric, `why` each other one is not, the notes."""

    def __init__(self, suite: str, source, retain_logs: Path | None = None, warn=None):
        self.suite, self.source, self.retain = suite, str(source), None
        self.bench = importlib.import_module(f"Eval.unlearning.{suite}")  # tofu.py or muse.py
        self.warn = warn or (lambda message: print(f"warning: {message}", file=sys.stderr))
        self.results, self.why, self.inputs, self.fallbacks, self.notes = {}, {}, {}, {}, []
        self.retain_path = retain_logs and find_log(retain_logs, suite)
        if self.retain_path:
            self.retain = load_log(self.retain_path, "retain-model log")
            if detect_suite(self.retain, self.retain_path) != suite:  # MUSE's for TOFU
                raise RecordError(self.retain_path, None,
                                  f"this retain-model log is not a {suite.upper()} log")

    def put(self, name: str, fn, *inputs: str, retain: tuple[str, str] | None = None,
            **params) -> None:
        """results[name] = fn(the inputs' results[, the retain log's `retain[0]`]), or why not."""
        missing = [i for i in inputs if i not in self.results]
        if missing:
            self.why[name] = f"needs {missing[0]}: {self.why[missing[0]]}"
            return
        args, where, self.inputs[name] = [self.results[i] for i in inputs], self.source, inputs
        if retain is not None:
            args.append((self.retain or {}).get(retain[0]))
            where += f" (retain logs {self.retain_path})" if self.retain is not None else ""
            if args[-1] is None:
                self.fallbacks[name] = retain[1]
            if args[-1] is None and self.retain is not None:  # none at all: finish() says it once
                self.warn(f"{name}: the retain-model logs {self.retain_path} hold no "
                          f"{retain[0]!r}; {retain[1]} (open-unlearning's fallback)")
        self.results[name] = computed(where, name, fn, *args, **params)

    def finish(self, values_of, required=()) -> None:
        """Leaves from values_of(name, split, kind, key), composites, then eval_log and summary."""
        from Eval.unlearning import samples

        for name, (split, kind, key) in self.bench.LEAVES.items():
            try:
                values, where = values_of(name, split, kind, key)
            except samples.Missing as err:
                self.why[name] = str(err)
                continue
            self.results[name] = computed(where, name, samples.leaf_result, kind, values)
        self.bench.composites(self)
        done = [n for n in self.bench.TOP_LEVEL if n in self.results]
        self.notes += [f"skipped {n}: {self.why[n]}" for n in self.bench.TOP_LEVEL if n not in done]
        for name in required:
            if name in self.why:
                raise RecordError(self.source, None, f"{name} cannot be recomputed: "
                                                     f"{self.why[name]}")
        if not done:
            raise RecordError(self.source, None, f"no {self.suite.upper()} metric can be "
                                                 f"computed: {'; '.join(self.notes)}")
        fallbacks = [f"{n} ({self.fallbacks[n]})" for n in done if n in self.fallbacks]
        if self.retain is None and fallbacks:
            self.warn(f"no retain-model logs (--retain-logs): {', '.join(fallbacks)}")
        kept = set(done).union(n for n in required if n in self.results)
        for name in reversed(self.results):  # inputs come first: kept metrics' inputs, recursively
            if name in kept:
                kept.update(self.inputs.get(name, ()))
        self.eval_log = {n: r for n, r in self.results.items() if n in kept}
        self.summary = {n: self.results[n]["agg_value"] for n in done
                        if self.results[n]["agg_value"] is not None}

    def report(self, paths: tuple[Path, Path], seconds: float) -> str:
        lines = [f"{self.suite.upper()} ({seconds:.2f} s) -> {paths[0]}, {paths[1]}"]
        top = [n for n in self.bench.TOP_LEVEL if n in self.eval_log]
        width = max(len(n) for n in top)
        for name in top:
            value = self.eval_log[name]["agg_value"]
            shown = "null (left out of the summary)" if value is None else f"{value:.6g}"
            mark = "  (see note)" if name in self.fallbacks else ""  # the warning said which
            lines.append(f"  {name:{width}}  {shown}{mark}")
        if ENCODING_KEY in self.eval_log:
            lines.append(f"  answer labels: {self.eval_log[ENCODING_KEY]['value']} "
                         "(inference.py --answer-encoding)")
        return "\n".join(lines + [f"note: {n}" for n in self.notes])


def _samples(name: str, kind: str, key: str, path: Path, rows: list | None) -> dict:
    """{index: sample entry} of one split file; Missing if absent from every record."""
    from Eval.unlearning.samples import KINDS, Missing

    if KINDS[kind][0] is None:
        raise Missing("needs a model at scoring time; not computable from saved records")
    if rows is None:
        raise Missing(f"no {path.name}")
    values, lacking = {}, []
    for line, record in rows:
        try:
            values[str(record["index"])] = KINDS[kind][0](record, key)
        except Missing as err:
            lacking.append((line, err))
        except (ValueError, TypeError, LookupError) as err:
            raise RecordError(path, line, f"{name}: {err}") from None
    if len(lacking) == len(rows):
        raise Missing(f"no {lacking[0][1]} in {path.name}")
    if lacking:
        raise RecordError(path, lacking[0][0], f"record lacks {lacking[0][1]}, which other records "
                                               f"of this file have ({name} needs it)")
    return values


def score_records(suite: str, pred_dir: Path, retain_logs: Path | None = None, warn=None) -> Run:
    """Score our records DIR/<suite>_<split>.jsonl; warn of a file that is not all of its run."""
    from Eval.scoring.provenance import check_prediction_file

    run, pred_dir = Run(suite, pred_dir, retain_logs, warn), Path(pred_dir)
    if not pred_dir.is_dir():
        raise RecordError(pred_dir, None, f"no such folder{folder_hint(pred_dir)}")
    paths = {split: pred_dir / f"{suite}_{split}.jsonl" for split in run.bench.SPLITS}
    records = {s: load_records(p) for s, p in paths.items() if p.is_file()}
    if not records:
        raise RecordError(pred_dir, None, f"no {suite.upper()} score records: expected "
                                          f"{', '.join(p.name for p in paths.values())}")
    run.file_status = {}
    for split, rows in records.items():
        check = check_prediction_file(paths[split], [record for _, record in rows])
        run.file_status[paths[split].name] = check["status"]
        if check["status"] not in ("ok", "unchecked"):
            run.warn(f"{paths[split]}: {'; '.join(check['warnings'])}; the figures computed from "
                     "it are not the full run's")

    def values_of(name, split, kind, key):
        sides = split if isinstance(split, tuple) else (split,)
        values = [_samples(name, kind, key, paths[s], records.get(s)) for s in sides]
        where = ", ".join(str(paths[s]) for s in sides)
        return (tuple(values) if isinstance(split, tuple) else values[0]), where

    run.finish(values_of)
    by_file = {}  # each file's one encoding of the answer labels, or "mixed"
    for split, rows in records.items():  # MUSE knowmem labels no answer (ROUGE only): skipped
        found = {r.get(ENCODING_KEY, "not recorded") for _, r in rows
                 if r.get("logprobs") and r.get(ENCODING_KEY) != "plain"}
        if found:
            by_file[paths[split].name] = found.pop() if len(found) == 1 else "mixed"
    if by_file:
        values = set(by_file.values())
        ours = values.pop() if len(values) == 1 else "mixed"
        run.eval_log[ENCODING_KEY] = {"value": ours, "by_file": by_file}
        theirs = (run.retain or {}).get(ENCODING_KEY, {}).get("value")
        if ours == "mixed" or theirs not in (None, ours):
            run.warn(f"answer labels were encoded differently (records: {by_file}; retain-model "
                     f"logs: {theirs or 'not recorded'}): the probabilities are not comparable; "
                     "rerun inference.py with one --answer-encoding")
    return run


def reaggregate(log_path: Path, retain_logs: Path | None = None, warn=None) -> Run:
    from Eval.unlearning.samples import KINDS, Missing

    log_path = find_log(log_path)
    log = load_log(log_path)
    run = Run(detect_suite(log, log_path), log_path, retain_logs, warn)

    def checked(entry, label: str, fields: tuple) -> dict:  # value_by_index, each with `fields`
        values = entry.get("value_by_index") if isinstance(entry, dict) else None
        if not isinstance(values, dict) or not values:
            raise RecordError(log_path, None, f"{label}: no per-sample values (value_by_index) to "
                                              "recompute from")
        for idx, sample in values.items():  # None samples are dropped, as the reference does
            missing = [f for f in fields if sample is not None and f not in sample]
            if missing:
                raise RecordError(log_path, None, f"{label}.value_by_index[{idx!r}]: "
                                                  f"{missing[0]!r} is missing")
        return values

    def values_of(name, split, kind, key):
        if name not in log:
            raise Missing(f"not in {log_path.name}")
        if isinstance(split, tuple):
            return tuple(checked(log[name].get(side), f"{name}.{side}", KINDS[kind][2])
                         for side in ("forget", "holdout")), log_path
        return checked(log[name], name, KINDS[kind][2]), log_path

    run.finish(values_of, required=list(log))
    for name in log:
        if name not in run.eval_log:  # our own answer_encoding; a newer open-unlearning's metric
            run.eval_log[name] = log[name]
            if name != ENCODING_KEY:
                run.notes.append(f"{name}: not a known {run.suite.upper()} metric; copied "
                                 "unchanged, not recomputed")
    return run


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("suite", nargs="?", choices=("tofu", "muse"), default=None,
                        help="score PRED_DIR/<suite>_<split>.jsonl, inference.py unlearning's")
    parser.add_argument("--pred-dir", type=Path, default=None,
                        help="the folder of score records (default: none)")
    parser.add_argument("--from-open-unlearning", type=Path, default=None, metavar="EVAL_JSON",
                        help="instead: re-aggregate a published TOFU_EVAL.json / MUSE_EVAL.json "
                             "from its per-sample values (default: off)")
    parser.add_argument("--retain-logs", type=Path, default=None, metavar="EVAL_JSON",
                        help="the retain model's EVAL.json (or its folder), for forget_quality and "
                             "privleak (default: none: forget_quality null; privleak: AUC 0.5)")
    parser.add_argument("--out-dir", type=Path, default=None, help="where the two files go "
                        "(default: --pred-dir, or pred/open-unlearning/<log's folder, or the "
                        "one above evals/>)")
    parser.add_argument("--quiet", action="store_true", help="no table: notes, warnings, errors")


@eval_command("unlearning", help="TOFU / MUSE: score our records, or re-aggregate a published log")
def run(args: argparse.Namespace) -> int:
    if bool(args.from_open_unlearning) == bool(args.suite) or (args.suite and not args.pred_dir):
        print("error: give tofu|muse --pred-dir DIR, or --from-open-unlearning EVAL_JSON",
              file=sys.stderr)
        return 2
    start = time.perf_counter()
    try:  # warnings are said with --quiet too: they change what a figure means
        if args.from_open_unlearning is not None:
            source = find_log(args.from_open_unlearning)
            outcome = reaggregate(source, args.retain_logs)
            run_dir = source.resolve().parent  # unlearn runs write saves/unlearn/<task>/evals/
            run_dir = run_dir.parent if run_dir.name == "evals" else run_dir
            out_dir = args.out_dir or Path("pred", "open-unlearning", run_dir.name)
            if (out_dir / source.name).resolve() == source.resolve():
                raise RecordError(out_dir, None, f"would overwrite the log being read "
                                                 f"({source.name}); pass another --out-dir")
        else:
            outcome = score_records(args.suite, args.pred_dir, args.retain_logs)
            out_dir = args.out_dir or args.pred_dir
    except RecordError as err:
        print(f"error: nothing was written: {err}", file=sys.stderr)
        return 2
    paths = write_outputs(out_dir, outcome.suite.upper(), outcome.eval_log, outcome.summary)
    report = outcome.report(paths, time.perf_counter() - start).splitlines()
    for line in (line for line in report if not args.quiet or line.startswith("note: ")):
        print(line)
    return 0
