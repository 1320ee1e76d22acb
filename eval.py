"""Stage 2: score saved prediction records. Never runs a model, never imports torch.

Usage:
    python eval.py [--model M | --pred-dir DIR] [--datasets a,b] [--metrics m,..] [--price P]
    python eval.py diff | explain | judge | compare | report | unlearning ...   # NAME --help

Writes DIR/result.json (TinyEval's file) and the detail files, all or nothing; bad input prints
every problem, exits 2 and writes nothing.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from Eval.args import HelpFormatter, key_value, names_from, positive_float, run_main
from Eval.commands import EVAL_COMMANDS, commands_epilog, main_or_command
from Eval.metrics import METRICS
from Eval.pricing import PriceError, price_option
from Eval.scoring.breakdowns import V2_VARIANTS
from Eval.scoring.folders import add_folder_arguments, find_pred_dirs, score_and_write
from Eval.scoring.report import dataset_table, dataset_warnings
from Eval.scoring.sections import Results, render_text, tables, write_models_table


def main(argv=None) -> int:
    return main_or_command(EVAL_COMMANDS, "eval.py", score, argv)


def score(argv: list[str]) -> int:
    p = argparse.ArgumentParser(prog="eval.py", description=__doc__.split("\n")[0],
                                formatter_class=HelpFormatter,
                                epilog=commands_epilog(EVAL_COMMANDS, "eval.py"))
    add_folder_arguments(p)
    p.add_argument("--metrics", type=names_from(METRICS), default=(), metavar="NAME,...",
                   help="score with these registered metrics instead of the task's (the first is "
                        "the headline); a dataset with no task row needs them "
                        "(default: the task's)")
    p.add_argument("-S", "--metric-arg", dest="metric_args", action="append", type=key_value,
                   default=[], metavar="KEY=VALUE",
                   help="a keyword argument of the metrics that take it, e.g. the ranking "
                        "metrics' -S run=run.trec -S qrels=qrels.txt (repeatable; default: none)")
    p.add_argument("--sample-time-limit", type=positive_float, default=None, metavar="SECONDS",
                   help="score 0 (and count, with the reason) a sample whose metric takes longer "
                        "(default: no limit)")
    p.add_argument("--price", type=Path, default=None, metavar="PATH",
                   help='JSON of US dollars per million tokens by model folder name, {"MODEL": '
                        '{"input": 0.15, "output": 0.6}, "*": {...}}: adds each dataset\'s cost '
                        '(default: no cost)')
    p.add_argument("--v2-variant", type=names_from(V2_VARIANTS), default=(), metavar="NAME,...",
                   help="LongBench v2 the project's way instead of as its pred.py + result.py "
                        "score it: " + "; ".join(f"{k}: {v}" for k, v in V2_VARIANTS.items())
                        + " (default: none, as published)")
    p.add_argument("--quiet", action="store_true", help="no tables: only notes, warnings, errors")
    args = p.parse_args(argv)
    notes: list[str] = []
    try:
        pred_dirs, all_models = find_pred_dirs(args.pred_dir, args.model, args.pred_root, notes)
        prices = {d: price_option(args.price, d.name) for d in pred_dirs}
    except (FileNotFoundError, PriceError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    outputs = score_and_write(pred_dirs, args.datasets, args.sample_time_limit, prices, notes,
                              tuple(args.metrics), tuple(args.metric_args), args.v2_variant,
                              missing_ok=all_models)
    if outputs is None:
        return 2
    for pred_dir, (results, built, seconds) in outputs.items():
        for note in built.notes:
            print(f"note: {note}")
        if not args.quiet:
            print(f"\n{pred_dir}  ({seconds:.2f} s) -> {pred_dir / 'result.json'}")
            print(dataset_table(results))
        for r in results:  # --quiet too: a partial or edited file changes a score's meaning
            for line in dataset_warnings(r):
                print(line)
    write_table(args, pred_dirs, outputs)
    return 0


def write_table(args, pred_dirs: list[Path], outputs: dict) -> None:
    """ROOT/results.{md,csv} of every root a scored folder is in (--pred-root, or one holding a
    results.md); folders outside any get their sections printed only."""
    roots = {}  # resolved -> as the user named it
    for d in pred_dirs:
        if d.parent.resolve() == args.pred_root.resolve() or (d.parent / "results.md").is_file():
            roots.setdefault(d.parent.resolve(), d.parent)
    printed = [(f"-> {root / 'results.md'}", *write_models_table(root)) for root in roots.values()]
    outside = {d.name: built.details for d, (_, built, _) in outputs.items()
               if d.parent.resolve() not in roots}
    if outside:
        text = "\n\n".join(render_text(t) for t in tables(Results(outside)))
        printed.append(("of the folders scored (no pred root)", text, []))
    for where, text, notes in printed:
        for note in notes:
            print(f"note: {note}")
        if not args.quiet:
            print(f"\nreport {where}\n{text}")


if __name__ == "__main__":
    run_main(main)
