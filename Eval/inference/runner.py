"""`python inference.py`'s main job: options, checks before any model loads, the nothing-to-do
exit, the run over every dataset (its words: summary.py).

Usage: args = parse_args(argv); datasets, out_dir = prepare(args); run_all(model, datasets, ...)
"""

import argparse
import sys
import time
from pathlib import Path

from Eval.args import HelpFormatter, backend_epilog, name_list, positive_int
from Eval.inference.benchmark_configs import (add_config_arguments, load_maxlen_config,
                                              load_prompt_config)
from Eval.inference.budget import TokenBudget, add_budget_argument
from Eval.inference.cot import cot_datasets
from Eval.inference.datasets import Sources, dataset_names, load_dataset
from Eval.inference.distributed import (add_shard_argument, clear_ranks_files, finish,
                                        merge_ranks_files)
from Eval.inference.perturb import add_perturb_arguments, perturbed
from Eval.inference.predict import RunSettings, generation_budget, run_dataset, run_fingerprint
from Eval.inference.predictions import check_resume
from Eval.inference.rerun import request_of
from Eval.inference.summary import cost_of, describe_run
from Eval.models import MODELS
from Eval.models.base import TRUNCATION_POLICIES, check_room
from Eval.models.factory import add_batch_arguments, add_model_arguments
from Eval.models.identity import folder_identity
from Eval.names import add_output_arguments, existing_folder, output_folder
from Eval.pricing import add_counts, price_option, tokens_per_s, usage_text

ROOT = Path(__file__).resolve().parents[2]
DEFAULT_MODEL = str(ROOT / "demo" / "tiny-qwen2")  # the shipped demo model


def add_data_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--datasets", type=name_list, default=None,
                   help="comma-separated names (default: every DATASET_DIR/*.jsonl and *.json)")
    p.add_argument("--dataset-dir", type=existing_folder, default=Path("dataset"),
                   help="where NAME.jsonl datasets live (default: dataset, in the current folder)")
    p.add_argument("--prompt-dir", type=existing_folder, default=Path("prompts"),
                   help="where NAME.txt templates live (default: prompts, in the current folder)")
    add_config_arguments(p)
    p.add_argument("--limit", type=positive_int, default=None,
                   help="only the first N examples of each dataset (default: all)")
    p.add_argument("--cot", action="store_true",
                   help="chain of thought where the task has it (LongBench v2): a reasoning pass, "
                        "then the answer; records go to <dataset>_cot.jsonl")
    add_perturb_arguments(p)


def add_job_arguments(p: argparse.ArgumentParser) -> None:
    """What the main job shares with dry-run and merge."""
    add_data_arguments(p)
    add_model_arguments(p, DEFAULT_MODEL)
    add_batch_arguments(p)
    p.add_argument("--truncation", choices=TRUNCATION_POLICIES, default="middle",
                   help="a prompt over --max-length: cut its middle (LongBench), start (left) or "
                        "end (right), or skip the example (recorded, counted out of n)")
    add_output_arguments(p)
    p.add_argument("--price", type=Path, default=None, metavar="PATH",
                   help='US dollars per million tokens by model name, {"MODEL": {"input": 0.15, '
                        '"output": 0.6}, "*": {...}}: adds the cost (default: none)')


def parse_args(argv: list[str], description: str = "", epilog: str = "") -> argparse.Namespace:
    """The main job's options; `--backend NAME --help` lists NAME's -M options."""
    p = argparse.ArgumentParser(prog="inference.py", description=description,
                                formatter_class=HelpFormatter)
    add_job_arguments(p)
    p.epilog = "\n\n".join(filter(None, [backend_epilog(p, argv), epilog])) or None
    p.add_argument("--overwrite", action="store_true", help="start afresh instead of resuming")
    add_budget_argument(p)
    add_shard_argument(p)
    return p.parse_args(argv)


def prepare(args) -> tuple[list, Path | None]:
    """(datasets, out_dir), names, output folder and price checked (args.refusing_bad_input)."""
    out_dir = None
    if hasattr(args, "out_dir"):  # validate has none
        out_dir = output_folder(args.out_dir, args.model_name, args.model)
    names = args.datasets or dataset_names(args.dataset_dir)
    if not names:
        raise FileNotFoundError(f"{args.dataset_dir}: no *.jsonl or *.json datasets")
    model_name = out_dir and out_dir.name  # picks a model2maxlen.json entry
    maxlen = load_maxlen_config(args.maxlen_config, names, model_name)
    sources = Sources(load_prompt_config(args.prompt_config), maxlen, args.maxlen_config,
                      model_name, args.cot)
    datasets = [load_dataset(n, args.dataset_dir, args.prompt_dir, sources) for n in names]
    datasets = perturbed(datasets, args)
    datasets = cot_datasets(datasets, args) if args.cot else datasets
    for ds in datasets:
        if out_dir is not None and out_dir.resolve() == ds.path.resolve().parent:
            raise ValueError(f"--out-dir {args.out_dir} with --model-name {out_dir.name}: the "
                             f"output folder {out_dir} holds the dataset file {ds.path}, which "
                             "this run reads; choose another --out-dir or --model-name")
        answer = getattr(args, "max_new_tokens", None) or ds.task.max_new_tokens  # validate: none
        check_room(getattr(args, "max_length", None), answer, where=f"{ds.name}: ")  # no model yet
    args.price_entry = price_option(getattr(args, "price", None), model_name)
    for ds in datasets:
        for note in ds.notes:
            print(f"note: {note}")
    return datasets, out_dir


def check_saved_settings(args, datasets: list, out_dir: Path) -> None:
    """check_budgets' check of the saved files' settings before the model loads (a changed template
    is said in seconds, not after the weights), on the checkpoint's cached file hashes."""
    checkpoint = MODELS[args.backend].holds_weights  # a served model's name is no checkpoint here
    files = folder_identity(args.model, hub=True) if checkpoint else {}
    unknown = () if args.max_length else ("max_length",)  # the model's context window
    for ds in datasets if not args.overwrite else []:
        answer = args.max_new_tokens or ds.task.max_new_tokens
        fingerprint = run_fingerprint(args.adapter_options, ds, args.max_length, answer,
                                      args.truncation)
        check_resume(out_dir / f"{ds.name}.jsonl", fingerprint, {"files": files}, unknown)


def check_budgets(model, datasets: list, args, out_dir: Path) -> None:
    """Every dataset's token budget and saved file's settings, before any dataset runs."""
    for ds in datasets:
        answer, window, _, _ = generation_budget(model, ds, args)  # args has RunSettings' names
        if not args.overwrite:  # run_dataset checks again, holding the file's lock
            fingerprint = run_fingerprint(model.options, ds, window, answer, args.truncation)
            check_resume(out_dir / f"{ds.name}.jsonl", fingerprint, model.identity())
        for max_new in (answer, ds.cot and ds.task.cot_max_new_tokens):
            if max_new:
                model.check_budget(ds.task.chat, max_new, window, where=f"{ds.name}: ")
        if args.max_total_tokens and ds.cot and not window:
            raise ValueError(f"{ds.name}: --max-total-tokens with --cot needs a known context "
                             "window to bound the answer pass; pass --max-length")


def warn_past_window(model, max_length: int | None) -> None:
    """Warn of a --max-length past the context window; go on (RoPE scaling may reach it)."""
    window = model.context_window() if max_length else None  # may read a config: only if asked
    if window and max_length > window:
        print(f"warning: --max-length {max_length} is more than the model's context window "
              f"({window} tokens); going on as asked: prompts are cut to fit {max_length}",
              file=sys.stderr)


TOTALS = ("examples", "truncated", "skipped", "failed", "skipped_done", "new", "changed_redone",
          "failed_redone", "model_changed_redone", "removed", "prompt_tokens", "gen_tokens",
          "truncated_tokens")


def run_all(model, datasets: list, args, shards, out_dir: Path, saved: list[int]) -> dict:
    """Every dataset through the model; `saved` gets each batch's record count."""
    settings = RunSettings(args.batch_size, args.max_batch_tokens, args.max_length,
                           args.max_new_tokens, args.limit, args.overwrite and not shards.torchrun,
                           shards.num_shards, shards.shard_id, merge=not shards.torchrun,
                           truncation=args.truncation)
    start, totals = time.perf_counter(), dict.fromkeys(TOTALS, 0)
    budget = TokenBudget(args.max_total_tokens) if args.max_total_tokens else None
    for ds in datasets:
        if shards.torchrun and args.overwrite:
            clear_ranks_files(shards, out_dir / f"{ds.name}.jsonl")
        summary = run_dataset(model, ds, out_dir, settings, on_saved=saved.append, budget=budget,
                              request=request_of(args, ds))
        if shards.torchrun:
            merge_ranks_files(shards, ds, out_dir, args.limit)
        print(f"{ds.name}: {describe_run(summary)}; {usage_text(summary, cost_of(args, summary))}")
        causes = summary.get("failure_causes") or {}  # the first few distinct errors counted
        for error, count in causes.items():
            print(f"  {count} failed: {error}")
        if summary["failed"] > sum(causes.values()):
            print(f"  {summary['failed'] - sum(causes.values())} failed otherwise (each record's "
                  "`error` says why)")
        add_counts(totals, {k: summary[k] for k in (*TOTALS, "server_usage") if k in summary})
        if settings.merge and not summary["complete"] and not summary.get("stopped"):
            totals["waiting"] = totals.get("waiting", 0) + 1  # for the other --shard runs
        if budget and budget.stopped:  # the datasets after this one are not started
            break
    finish(shards)
    seconds = time.perf_counter() - start
    totals.update(seconds=seconds, tokens_per_s=tokens_per_s(totals["gen_tokens"], seconds))
    return {**totals, "budget": budget}
