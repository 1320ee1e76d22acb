"""Stage 1: run a model over datasets and save one prediction record per example.

Usage:
    python inference.py            # the demo model on every dataset/*.jsonl -> pred/tiny-qwen2/
    python inference.py --model /path/to/Qwen2.5-7B-Instruct -M dtype=bfloat16 --datasets trec
    python inference.py --backend api --model Qwen/Qwen2.5-7B-Instruct -M base_url=http://HOST/v1
    python inference.py validate | dry-run | merge | unlearning | lm-eval ...   # NAME --help

Writes pred/<model-name>/<dataset>.jsonl and <dataset>.run.json; runs resume (README.md).
"""
import os

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # before torch: 2-core machines stall otherwise

import sys  # noqa: E402

from Eval.args import one_line, refusing_bad_input, run_main  # noqa: E402
from Eval.commands import INFERENCE_COMMANDS, commands_epilog, main_or_command  # noqa: E402
from Eval.inference import runner  # noqa: E402
from Eval.inference.budget import stopped_at_budget  # noqa: E402
from Eval.inference.distributed import join, resolve_shards  # noqa: E402
from Eval.inference.rerun import all_done  # noqa: E402
from Eval.inference.summary import done_line  # noqa: E402
from Eval.models import factory  # noqa: E402


def main(argv=None) -> int:
    return main_or_command(INFERENCE_COMMANDS, "inference.py", run, argv)


def run(argv: list[str]) -> int:
    checked = checked_run(argv)
    if isinstance(checked, int):  # an exit code: bad input, or nothing left to do
        return checked
    args, datasets, shards, out_dir = checked
    saved: list[int] = []
    try:
        return generate(args, datasets, shards, out_dir, saved)
    except KeyboardInterrupt:
        again = "the same command without --overwrite" if args.overwrite else "the same command"
        print(f"\ninterrupted: {sum(saved)} records saved in {out_dir}; rerun {again} to resume",
              file=sys.stderr)
        return 130


@refusing_bad_input  # only the checks: an error inside the run keeps its traceback
def checked_run(argv: list[str]):
    """(args, datasets, shards, out_dir) of a run with work to do, or an exit code."""
    args = runner.parse_args(argv, description=__doc__.split("\n")[0],
                             epilog=commands_epilog(INFERENCE_COMMANDS, "inference.py"))
    datasets, out_dir = runner.prepare(args)
    if all_done(args, datasets, out_dir):  # told from the files alone: no torch, no model
        return 0
    factory.resolve_model_args(args)  # -M checked against the backend (imports its module)
    runner.check_saved_settings(args, datasets, out_dir)  # in seconds, not after the weights
    return args, datasets, resolve_shards(args), out_dir


def generate(args, datasets: list, shards, out_dir, saved: list[int]) -> int:
    args.backend_options = join(shards, args.backend_options)
    try:
        model = factory.from_args(args)  # the backend's module, and torch: only now
    except (OSError, ValueError) as err:
        print(f"error: could not load model: {one_line(err)}", file=sys.stderr)
        return 2
    try:  # the first questions to a served model: a server that does not answer stops here
        runner.check_budgets(model, datasets, args, out_dir)
        runner.warn_past_window(model, args.max_length)
        totals = runner.run_all(model, datasets, args, shards, out_dir, saved)
    except ValueError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    finally:
        model.close()
    stopped = bool(totals["budget"] and totals["budget"].stopped)
    print(done_line(args, totals, out_dir, stopped))
    if stopped:
        return stopped_at_budget(args, datasets, out_dir, totals["budget"])
    return 0 if totals["failed"] == 0 else 1


if __name__ == "__main__":
    run_main(main)
