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
    python eval.py --diff DIR_A DIR_B    # paired: B - A with 95% intervals, McNemar, why samples differ
    python eval.py --explain DATASET:ID [--model M]   # why one example scored what it did (ID or #LINE); writes nothing
    python eval.py --explain-unlearning TOFU_EVAL.json forget_truth_ratio:0   # a TOFU / MUSE per-sample value
    python eval.py --model M --worst N   # score, then print each dataset's N lowest-scored examples, explained
    python eval.py --report html         # PRED_ROOT/report.html from the files already there; scores nothing
    python eval.py --model M --price prices.json   # + the cost of each dataset's tokens (Eval/pricing.py)

Writes DIR/result.json ({dataset: score}, TinyEval's file), DIR/result_detail.json and
DIR/per_example/<dataset>.scores.jsonl, DIR/result_usage.json (tokens, seconds and cost per dataset and in total,
from the records), all or nothing; see Eval/scoring/report.py. Scoring a subset (--datasets) keeps
the other datasets' results while their prediction files are unchanged. Each file is checked against its run
sidecar (Eval/scoring/provenance.py): a partial file, one edited after inference, or one whose dataset has changed since
is reported. Bad input (unknown dataset, malformed line, ...) prints every problem found with its file and line,
exits 2, and writes nothing. The two unlearning modes write
open-unlearning's TOFU_EVAL.json / TOFU_SUMMARY.json (MUSE_*); see Eval/unlearning/evaluate.py.
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from Eval.args import HelpFormatter, name_list, positive_float, positive_int, run_main
from Eval.scoring.judge_commands import add_judge_args
from Eval.names import check_name, name_problem
from Eval.pricing import PriceError, price_for, usage_of
from Eval.scoring.provenance import check_prediction_file, file_sha256
from Eval.records import RecordError, is_dry_run_output, is_prediction_file, read_records, sidecar_path
from Eval.scoring.breakdowns import get_breakdown
from Eval.scoring.report import (RESULT_FILES, commit_folder, dataset_table, example_set, folder_outputs,
                                 result_lines, usage_table, write_models_table)
from Eval.scoring.robustness import score_with_perturbations
from Eval.scoring.scorer import score_dataset
from Eval.storage import StorageError, read_regular_bytes, recover, regular_file_problem
from Eval.tasks import TASKS, get_task, task_from_dict
from Eval.unlearning.evaluate import add_arguments as add_unlearning_arguments, run as run_unlearning


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0], formatter_class=HelpFormatter)
    where = p.add_mutually_exclusive_group()
    where.add_argument("--pred-dir", type=Path, default=None, help="score the *.jsonl files of this folder (default: every model folder under PRED_ROOT)")
    where.add_argument("--model", default=None, help="score PRED_ROOT/MODEL (default: every model folder)")
    p.add_argument("--pred-root", type=Path, default=Path("pred"),
                   help="folder of model folders, used by --model and when neither option is given")
    p.add_argument("--datasets", default=None, help="comma-separated dataset names to score; the other "
                   "datasets' results are kept (default: all)")
    p.add_argument("--sample-time-limit", type=positive_float, default=None, metavar="SECONDS",
                   help="score 0 (and count, with the reason) a sample whose metric takes longer (default: no limit)")
    p.add_argument("--quiet", action="store_true", help="print only errors")
    p.add_argument("--price", type=Path, default=None, metavar="PATH",
                   help='JSON of US dollars per million tokens by model folder name, {"MODEL": {"input": 0.15, '
                        '"output": 0.6}, "*": {...}}: adds each dataset\'s cost (default: no cost)')
    p.add_argument("--explain", default=None, metavar="DATASET:ID",
                   help="print why one example scored what it did, in words (ID: the record's id, or #LINE); scores "
                        "the dataset's file in memory and writes nothing (default: off)")
    p.add_argument("--worst", type=positive_int, default=None, metavar="N",
                   help="after scoring, print each dataset's N lowest-scored examples with their explanations "
                        "(default: off)")
    p.add_argument("--diff", nargs=2, type=Path, default=None, metavar=("DIR_A", "DIR_B"),
                   help="compare two prediction folders item by item (Eval/scoring/diff.py); writes "
                        "diff_A_vs_B.json beside DIR_B (default: off)")
    p.add_argument("--report", choices=("html",), default=None,
                   help="write PRED_ROOT/report.html, one offline page, from the result files already under "
                        "PRED_ROOT (Eval/scoring/html_report.py); scores nothing (default: off)")
    add_unlearning_arguments(p)
    add_judge_args(p)
    args = p.parse_args(argv)
    _check_combinations(p, args)
    return args


def _check_combinations(p: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    other_mode = args.diff or args.compare or args.unlearning or args.from_open_unlearning
    if (args.explain or args.worst) and (other_mode or (args.explain and args.judge)):
        p.error("--explain and --worst go with plain scoring; not with --diff, --compare, --judge (--explain) "
                "or an unlearning mode")
    if args.explain and (args.worst or args.datasets):
        p.error("--explain DATASET:ID names its dataset; it takes no --datasets or --worst")
    if args.diff and (args.pred_dir or args.model or args.judge or args.unlearning or args.from_open_unlearning):
        p.error("--diff DIR_A DIR_B names its two folders; it takes no --pred-dir, --model, --judge or unlearning mode")
    if args.report and (other_mode or args.explain or args.worst or args.judge or args.pred_dir or args.model
                        or args.datasets):
        p.error("--report html reads what is already under --pred-root; it takes no other mode, --pred-dir, "
                "--model or --datasets")
    if args.price and (other_mode or args.explain or args.report or args.explain_unlearning):
        p.error("--price goes with plain scoring (the cost of each prediction file's tokens)")
    if (args.compare or args.judge_mode != "text") and not args.judge:
        p.error("--compare and --judge-mode need --judge MODEL")
    if args.unlearning and (args.pred_dir is None or args.datasets):
        p.error("--unlearning needs --pred-dir, the folder of score records, and takes no --datasets")
    if args.from_open_unlearning and (args.pred_dir or args.model or args.datasets):
        p.error("--from-open-unlearning reads one log; it takes no --pred-dir, --model or --datasets")
    if not (args.unlearning or args.from_open_unlearning) and (args.retain_logs or args.out_dir):
        p.error("--retain-logs and --out-dir go with --unlearning or --from-open-unlearning")
    try:
        if args.datasets is not None:
            args.datasets = ",".join(check_name(n, "--datasets entry") for n in name_list(args.datasets))
        if args.model is not None:
            check_name(args.model, "--model")
    except (argparse.ArgumentTypeError, ValueError) as err:
        p.error(f"--datasets {err}" if isinstance(err, argparse.ArgumentTypeError) else str(err))


def prediction_files(folder: Path) -> list[Path]:
    """The folder's prediction files: *.jsonl at its top level, less TOFU / MUSE score records and the prompts
    of inference.py --dry-run."""
    return sorted(f for f in folder.glob("*.jsonl") if is_prediction_file(f))


def find_pred_dirs(args, notes: list[str]) -> tuple[list[Path], bool]:
    """The folders to score, and whether this is the all-models mode (which also writes the table). Folders the
    toolkit writes that hold no prediction files (a --compare output, a judge cache) are skipped, said so."""
    if args.pred_dir is not None:
        return [args.pred_dir], False
    if args.model is not None:
        return [args.pred_root / args.model], False
    if not args.pred_root.is_dir():
        raise FileNotFoundError(f"{args.pred_root}: no such folder; run inference.py first or pass --pred-dir")
    dirs = []
    for folder in sorted(d for d in args.pred_root.iterdir() if d.is_dir() and not d.name.startswith(".")):
        if prediction_files(folder):
            dirs.append(folder)
        elif any(not is_dry_run_output(f) for f in folder.glob("*.jsonl")):
            notes.append(f"{folder}: TOFU / MUSE score records only; score them with "
                         f"python eval.py --unlearning tofu|muse --pred-dir {folder}")
        else:
            notes.append(f"{folder}: no prediction files (*.jsonl); skipped")
    if not dirs:
        raise FileNotFoundError(f"{args.pred_root}: no model folder with *.jsonl prediction files")
    return dirs, True


def task_for_file(path: Path, notes: list[str]):
    """The table's task for the file stem; for a dataset the table lacks, the task inference.py chose and
    saved in the run sidecar (said out loud); otherwise an error with close-name suggestions. The file stem
    names the dataset, always: a name inside the sidecar is never used."""
    sidecar = sidecar_path(path)
    if path.stem not in TASKS and (sidecar.exists() or sidecar.is_symlink()):
        try:
            saved = json.loads(read_regular_bytes(sidecar))
            task_data = saved.get("task") if isinstance(saved, dict) else None
            saved_name = task_data.get("name") if isinstance(task_data, dict) else None
            if saved_name is not None and name_problem(saved_name):  # a name that is a path: the data is damaged
                raise ValueError(f"task.name {saved_name!r} is not a dataset name ({name_problem(saved_name)})")
            task = task_from_dict(task_data, path.stem)
        except (StorageError, ValueError, RecursionError, KeyError) as err:
            detail = err.args[0] if err.args else err
            raise RecordError(sidecar, None, f"cannot tell how to score {path.name}: {detail}") from None
        notes.append(f"{path.stem}: not in Eval/tasks.py; using the task saved in {sidecar.name} "
                     f"(metrics {', '.join(task.metrics)})")
        return task
    return get_task(path.stem)


def load_folder(pred_dir: Path, only: set[str] | None, problems: list[str], notes: list[str]) -> list[tuple]:
    """(task, records, sources) for each prediction file; every problem is appended to `problems`."""
    if not pred_dir.is_dir():
        problems.append(f"{pred_dir}: no such folder")
        return []
    notes += [n for n in recover(pred_dir, RESULT_FILES, ("per_example",))]
    every = [f for f in pred_dir.glob("*.jsonl") if not is_dry_run_output(f)]  # --dry-run's prompts: not data
    files = prediction_files(pred_dir)
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
            problem = name_problem(path.stem) or regular_file_problem(path)
            if problem:
                raise RecordError(path, None, problem)
            task = task_for_file(path, notes)
            if task.breakdown:
                get_breakdown(task.breakdown)  # an unknown name (a sidecar's task) is a KeyError naming close ones
            records = read_records(path)
            sources = {"source": {"file": path.name, "sha256": file_sha256(path)},
                       "examples_sha256": example_set(records), "data_check": check_prediction_file(path, records)}
            loaded.append((task, records, sources))
        except (RecordError, StorageError) as err:
            problems.append(str(err))
        except KeyError as err:  # unknown dataset / metric
            problems.append(f"{path}: {err.args[0] if err.args else err}")
    return loaded


def score_folders(loaded: dict[Path, list[tuple]], only, time_limit, prices: dict) -> tuple[dict, list[str]]:
    """Every folder scored and its outputs built in memory; nothing is written here. `prices`: folder -> the
    --price entry that applies (or None)."""
    outputs, problems = {}, []
    for pred_dir, items in loaded.items():
        start = time.perf_counter()
        results = [{**score_with_perturbations(task, records, time_limit), "data_check": sources["data_check"],
                    "usage": usage_of(records)} for task, records, sources in items]
        try:
            built = folder_outputs(pred_dir, results, {t.name: s for t, _, s in items}, full_run=only is None,
                                   price=prices.get(pred_dir))
        except (UnicodeEncodeError, ValueError) as err:
            problems.append(f"{pred_dir}: results cannot be written as JSON: {err}")
            continue
        outputs[pred_dir] = (results, built, time.perf_counter() - start)
    return outputs, problems


def report_folder(pred_dir: Path, results: list[dict], built, seconds: float, quiet: bool) -> None:
    for note in built.notes:
        print(f"note: {note}")
    if quiet:
        return
    print(f"\n{pred_dir}  ({seconds:.2f} s) -> {pred_dir / 'result.json'}")
    print(dataset_table(results))
    print(f"\n{usage_table([built.details[r['dataset']] for r in results])}")
    for r in results:
        if r["duplicates"]:
            print(f"warning: {r['dataset']}: {r['duplicates']} lines repeat an earlier example "
                  "(kept, as the published figures count every line)")
        if r["no_references"] or r["no_classes"]:
            print(f"warning: {r['dataset']}: {r['no_references']} records have no reference answer and "
                  f"{r['no_classes']} no class list (all_classes); they score 0")
        for warning in r["data_check"]["warnings"]:
            print(f"warning: {r['dataset']}: {warning}")
        for line in result_lines(r):
            print(line)


def main(argv=None) -> int:
    args = parse_args(argv)
    if args.unlearning or args.from_open_unlearning or args.explain_unlearning:  # Eval/unlearning/evaluate.py
        return run_unlearning(args)
    if args.compare:
        from Eval.scoring.judge_commands import run_judge_cli

        return run_judge_cli(args, {})
    only = set(args.datasets.split(",")) if args.datasets else None
    if args.explain:
        return _explain(args)
    if args.report:
        from Eval.scoring.html_report import run_report

        return run_report(args.pred_root, args.quiet)
    if args.diff:
        from Eval.scoring.diff import run_diff

        return run_diff(*args.diff, task_for_file, prediction_files, only, args.quiet)
    problems: list[str] = []
    notes: list[str] = []
    try:
        pred_dirs, all_models = find_pred_dirs(args, notes)
    except FileNotFoundError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    try:  # the price of every folder (its model's entry, or "*"), before anything is scored or written
        prices = {d: price_for(args.price, d.name) if args.price else None for d in pred_dirs}
    except PriceError as err:
        print(f"error: --price: {err}", file=sys.stderr)
        return 2
    loaded = {d: load_folder(d, only, problems, notes) for d in pred_dirs}
    outputs, more = score_folders(loaded, only, args.sample_time_limit, prices) if not problems else ({}, [])
    problems += more
    if problems:  # validate and compute everything before writing anything
        print("error: nothing was written; fix these first:", *problems, sep="\n  ", file=sys.stderr)
        return 2
    for note in notes:
        print(f"note: {note}")
    for pred_dir, (results, built, seconds) in outputs.items():
        commit_folder(pred_dir, built)
        report_folder(pred_dir, results, built, seconds, args.quiet)
        if args.worst:
            from Eval.scoring.explain import print_worst

            print_worst(pred_dir, results, args.worst)
    write_table(args, pred_dirs, all_models)
    if args.judge:  # loads a model (torch for local judges) only now, after every score is written
        from Eval.scoring.judge_commands import run_judge_cli

        return run_judge_cli(args, {d: [(t.name, r) for t, r, _ in items] for d, items in loaded.items()})
    return 0


def _explain(args) -> int:
    """--explain DATASET:ID: the example from each model folder that has the dataset (or --pred-dir / --model)."""
    from Eval.scoring.explain import explain_target

    try:
        pred_dirs, _ = find_pred_dirs(args, [])
    except FileNotFoundError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    return explain_target(args.explain, pred_dirs, load_folder, score_dataset)


def write_table(args, pred_dirs: list[Path], all_models: bool) -> None:
    """ROOT/results.{md,csv} from every model folder's current results, whenever a folder of ROOT was scored,
    so the table always agrees with the folders' result files."""
    root = args.pred_root
    if not all_models and not (root.is_dir() and any(d.resolve().parent == root.resolve() for d in pred_dirs)):
        return
    table, table_notes = write_models_table(root)
    for note in table_notes:
        print(f"note: {note}")
    if not args.quiet:
        print(f"\nmodels x datasets -> {root / 'results.md'}\n{table}")


if __name__ == "__main__":
    run_main(main)
