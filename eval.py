"""Stage 2: score saved prediction records. Never runs a model, never imports torch.

Usage:
    python eval.py                       # every model folder under pred/, plus pred/results.{csv,md}
    python eval.py --model internlm      # = --pred-dir pred/internlm
    python eval.py --pred-dir DIR        # every DIR/*.jsonl; the file stem names the dataset (TinyEval)
    python eval.py --pred-dir DIR --datasets trec,multi_news --price prices.json
    python eval.py --pred-dir DIR --metrics exact_match,qa_f1   # any registered metric on any dataset
    python eval.py diff | explain | judge | compare | report | unlearning ...    # `python eval.py NAME --help`

Writes DIR/result.json ({dataset: score}, TinyEval's file), DIR/result_detail.json, DIR/result_usage.json and
DIR/per_example/<dataset>.scores.jsonl, all or nothing (Eval/scoring/report.py). Scoring a subset (--datasets)
keeps the other datasets' results while their prediction files are unchanged. Each file is checked against its
run sidecar (Eval/scoring/provenance.py): a partial file, one edited after inference, or one whose data changed
since is marked in every output. Bad input prints every problem with its file and line, exits 2, writes nothing.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from Eval.args import HelpFormatter, positive_float, run_main
from Eval.commands import EVAL_COMMANDS, commands_epilog, main_or_command
from Eval.pricing import PriceError, price_for
from Eval.scoring.folders import add_folder_arguments, add_metric_arguments, find_pred_dirs, score_and_write
from Eval.scoring.report import dataset_table, result_lines, write_models_table
from Eval.scoring.sections import Results, render_text, tables


def main(argv=None) -> int:
    return main_or_command(EVAL_COMMANDS, "eval.py", score, argv)


def add_scoring_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--sample-time-limit", type=positive_float, default=None, metavar="SECONDS",
                   help="score 0 (and count, with the reason) a sample whose metric takes longer (default: no limit)")
    p.add_argument("--price", type=Path, default=None, metavar="PATH",
                   help='JSON of US dollars per million tokens by model folder name, {"MODEL": {"input": 0.15, '
                        '"output": 0.6}, "*": {...}}: adds each dataset\'s cost (default: no cost)')
    p.add_argument("--quiet", action="store_true", help="print only errors")


def parse_args(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="eval.py", description=__doc__.split("\n")[0], formatter_class=HelpFormatter,
                                epilog=commands_epilog(EVAL_COMMANDS, "eval.py"))
    add_folder_arguments(p)
    add_metric_arguments(p)
    add_scoring_arguments(p)
    return p.parse_args(argv)


def score(argv: list[str]) -> int:
    """The main job: score every folder asked for, write its files, print its tables, rebuild the results table."""
    args = parse_args(argv)
    return score_folders(args)


def score_folders(args) -> int:
    notes: list[str] = []
    try:
        pred_dirs, all_models = find_pred_dirs(args.pred_dir, args.model, args.pred_root, notes)
        # the price of every folder (its model's entry, or "*"), before anything is scored or written
        prices = {d: price_for(args.price, d.name) if args.price else None for d in pred_dirs}
    except FileNotFoundError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    except PriceError as err:
        print(f"error: --price: {err}", file=sys.stderr)
        return 2
    outputs = score_and_write(pred_dirs, args.datasets, args.sample_time_limit, prices, notes, args.metrics,
                              tuple(args.metric_args))
    if outputs is None:
        return 2
    for pred_dir, (results, built, seconds) in outputs.items():
        report_folder(pred_dir, results, built, seconds, args.quiet)
    write_table(args, pred_dirs, all_models, outputs)
    return 0


def report_folder(pred_dir: Path, results: list[dict], built, seconds: float, quiet: bool) -> None:
    for note in built.notes:
        print(f"note: {note}")
    if quiet:
        return
    print(f"\n{pred_dir}  ({seconds:.2f} s) -> {pred_dir / 'result.json'}")
    print(dataset_table(results))
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


def write_table(args, pred_dirs: list[Path], all_models: bool, outputs: dict) -> None:
    """ROOT/results.{md,csv} from every model folder's current results, whenever a folder of ROOT was scored, so
    the table always agrees with the folders' result files; the same report sections printed (Eval/scoring/
    sections/). A folder outside ROOT gets its own sections printed, and no table is written."""
    root = args.pred_root
    if all_models or (root.is_dir() and any(d.resolve().parent == root.resolve() for d in pred_dirs)):
        text, notes = write_models_table(root)
        where = f"-> {root / 'results.md'}"
    else:
        by_model = {d.name: built.details for d, (_, built, _) in outputs.items()}
        text, notes, where = "\n\n".join(render_text(t) for t in tables(Results(by_model))), [], ""
    for note in notes:
        print(f"note: {note}")
    if not args.quiet:
        print(f"\nreport {where}\n{text}")


if __name__ == "__main__":
    run_main(main)
