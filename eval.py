"""Stage 2: score saved prediction records. Never runs a model, never imports torch.

Usage:
    python eval.py                       # every model folder under pred/, plus pred/results.{csv,md}
    python eval.py --model internlm      # = --pred-dir pred/internlm
    python eval.py --pred-dir DIR        # every DIR/*.jsonl; the file stem names the dataset (TinyEval)
    python eval.py --pred-dir DIR --datasets trec,multi_news
    python eval.py --unlearning tofu --pred-dir DIR [--retain-logs RETAIN/TOFU_EVAL.json]   # TOFU / MUSE
    python eval.py --from-open-unlearning PATH/TOFU_EVAL.json [--retain-logs PATH] [--out-dir DIR]
    python eval.py --pred-dir DIR --judge JUDGE_MODEL [--rubric graded] [--judge-mode logits]   # LLM judge
    python eval.py --compare DIR_A DIR_B --judge JUDGE_MODEL                                    # pairwise

Writes DIR/result.json ({dataset: score}, TinyEval's file), DIR/result_detail.json and
DIR/per_example/<dataset>.scores.jsonl; see Eval/report.py. Bad input (unknown dataset, malformed line, ...)
prints every problem found with its file and line, exits 2, and writes nothing. The two unlearning modes write
open-unlearning's TOFU_EVAL.json / TOFU_SUMMARY.json (MUSE_*); see Eval/unlearning/cli.py.
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from Eval.metrics.registry import get_metric
from Eval.records import RecordError, read_records
from Eval.report import dataset_table, write_model_results, write_models_table
from Eval.scoring import score_dataset
from Eval.tasks import TASKS, get_task, task_from_dict
from Eval.judge_run import add_judge_args
from Eval.unlearning.suites import RECORD_FILES


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    where = p.add_mutually_exclusive_group()
    where.add_argument("--pred-dir", type=Path, default=None, help="score the *.jsonl files of this folder")
    where.add_argument("--model", default=None, help="score PRED_ROOT/MODEL")
    p.add_argument("--pred-root", type=Path, default=Path("pred"),
                   help="folder of model folders, used by --model and when neither option is given")
    p.add_argument("--datasets", default=None, help="comma-separated dataset names to score (default: all)")
    p.add_argument("--quiet", action="store_true", help="print only errors")
    unl = p.add_argument_group("unlearning (TOFU / MUSE, open-unlearning's files)")
    mode = unl.add_mutually_exclusive_group()
    mode.add_argument("--unlearning", choices=("tofu", "muse"), default=None,
                      help="score the score records --pred-dir/<tofu|muse>_<split>.jsonl")
    mode.add_argument("--from-open-unlearning", type=Path, default=None, metavar="EVAL_JSON",
                      help="re-aggregate a published TOFU_EVAL.json / MUSE_EVAL.json from its per-sample values")
    unl.add_argument("--retain-logs", type=Path, default=None, metavar="EVAL_JSON",
                     help="the retain model's EVAL.json, for forget_quality and privleak")
    unl.add_argument("--out-dir", type=Path, default=None,
                     help="where the unlearning files go (default: --pred-dir, or pred/open-unlearning/<folder>)")
    add_judge_args(p)
    args = p.parse_args(argv)
    if (args.compare or args.judge_mode != "text") and not args.judge:
        p.error("--compare and --judge-mode need --judge MODEL")
    if args.unlearning and (args.pred_dir is None or args.datasets):
        p.error("--unlearning needs --pred-dir, the folder of score records, and takes no --datasets")
    if args.from_open_unlearning and (args.pred_dir or args.model or args.datasets):
        p.error("--from-open-unlearning reads one log; it takes no --pred-dir, --model or --datasets")
    if not (args.unlearning or args.from_open_unlearning) and (args.retain_logs or args.out_dir):
        p.error("--retain-logs and --out-dir go with --unlearning or --from-open-unlearning")
    return args


def find_pred_dirs(args) -> tuple[list[Path], bool]:
    """The folders to score, and whether this is the all-models mode (which also writes the table)."""
    if args.pred_dir is not None:
        return [args.pred_dir], False
    if args.model is not None:
        return [args.pred_root / args.model], False
    if not args.pred_root.is_dir():
        raise FileNotFoundError(f"{args.pred_root}: no such folder; run inference.py first or pass --pred-dir")
    dirs = sorted(d for d in args.pred_root.iterdir()
                  if d.is_dir() and any(f.name not in RECORD_FILES for f in d.glob("*.jsonl")))
    if not dirs:
        raise FileNotFoundError(f"{args.pred_root}: no model folder with *.jsonl prediction files")
    return dirs, True


def task_for_file(path: Path, notes: list[str]):
    """The table's task for the file stem; for a dataset the table lacks, the task inference.py chose and
    saved in the run sidecar (said out loud); otherwise an error with close-name suggestions."""
    sidecar = path.with_name(path.stem + ".run.json")
    if path.stem not in TASKS and sidecar.is_file():
        task = task_from_dict(json.loads(sidecar.read_text(encoding="utf-8"))["task"])
        notes.append(f"{path.stem}: not in Eval/tasks.py; using the task saved in {sidecar.name} "
                     f"(metrics {', '.join(task.metrics)})")
        return task
    return get_task(path.stem)


def load_folder(pred_dir: Path, only: set[str] | None, problems: list[str], notes: list[str]) -> list[tuple]:
    """(task, records) for each prediction file; every problem is appended to `problems`."""
    if not pred_dir.is_dir():
        problems.append(f"{pred_dir}: no such folder")
        return []
    every = sorted(pred_dir.glob("*.jsonl"))
    files = [f for f in every if f.name not in RECORD_FILES]  # TOFU / MUSE score records: --unlearning
    hint = "; its TOFU / MUSE score records are scored by --unlearning" if len(files) < len(every) else ""
    if hint:
        notes.append(f"{pred_dir}: TOFU / MUSE score records left to `python eval.py --unlearning ...`")
    if only is not None:
        files = [f for f in files if f.stem in only]
        for missing in sorted(only - {f.stem for f in files}):
            problems.append(f"{pred_dir}: no prediction file {missing}.jsonl")
    if not files and only is None:
        problems.append(f"{pred_dir}: no *.jsonl prediction files{hint}")
    loaded = []
    for path in files:
        try:
            task = task_for_file(path, notes)
            for name in task.metrics:
                get_metric(name)
            loaded.append((task, read_records(path)))
        except RecordError as err:
            problems.append(str(err))
        except (KeyError, TypeError, ValueError) as err:  # unknown dataset / metric, unreadable sidecar
            problems.append(f"{path}: {err.args[0] if err.args else err}")
    return loaded


def main(argv=None) -> int:
    args = parse_args(argv)
    if args.unlearning or args.from_open_unlearning:
        from Eval.unlearning.cli import main as unlearning_main  # numpy/scipy only when asked for

        return unlearning_main(args)
    if args.compare:
        from Eval.judge_run import run_judge_cli

        return run_judge_cli(args, {})
    only = set(args.datasets.split(",")) if args.datasets else None
    try:
        pred_dirs, all_models = find_pred_dirs(args)
    except FileNotFoundError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    problems: list[str] = []
    notes: list[str] = []
    loaded = {d: load_folder(d, only, problems, notes) for d in pred_dirs}
    if problems:  # validate everything before writing anything
        print("error: nothing was written; fix these first:", *problems, sep="\n  ", file=sys.stderr)
        return 2
    for note in notes:
        print(f"note: {note}")
    by_model = {}
    for pred_dir, items in loaded.items():
        start = time.perf_counter()
        results = [score_dataset(task, records) for task, records in items]
        write_model_results(pred_dir, results)
        by_model[pred_dir.name] = {r["dataset"]: r["metrics"][r["headline_metric"]]["score"] for r in results}
        if not args.quiet:
            print(f"\n{pred_dir}  ({time.perf_counter() - start:.2f} s) -> {pred_dir / 'result.json'}")
            print(dataset_table(results))
            for r in results:
                if r["duplicates"]:
                    print(f"warning: {r['dataset']}: {r['duplicates']} lines repeat an earlier example "
                          "(kept, as the published figures count every line)")
    if all_models:
        table = write_models_table(args.pred_root, by_model)
        if not args.quiet:
            print(f"\nmodels x datasets -> {args.pred_root / 'results.md'}\n{table}")
    if args.judge:  # loads a model (torch for local judges) only now, after every score is written
        from Eval.judge_run import run_judge_cli

        return run_judge_cli(args, {d: [(t.name, r) for t, r in items] for d, items in loaded.items()})
    return 0


if __name__ == "__main__":
    sys.exit(main())
