"""Stage 1: run a model over datasets and save one prediction record per example.

Usage:
    python inference.py                                  # the shipped demo model on every dataset/*.jsonl
    python inference.py --model /path/to/Qwen2.5-7B-Instruct --datasets multifieldqa_zh,trec --batch-size 4
    python inference.py --datasets my_data --validate    # check data and template, load no model
    python inference.py --dry-run --max-length 2048      # render every prompt (tokenizer only): truncation, cost
    python inference.py --max-total-tokens 200000 --price prices.json   # stop cleanly at a token budget; cost
    python inference.py --model internlm2 --cut-at '<eoa>' --system-prompt 'You are a helpful assistant.'
    python inference.py --unlearning tofu --model Eval/models/demo/unlearn-target   # TOFU / MUSE score records

Writes pred/<model-name>/<dataset>.jsonl (the record format of Eval/records.py) and <dataset>.run.json (the
resolved configuration, package versions, the model's identity and chat template hash). Runs resume by default:
finished examples are skipped and failed ones redone; --overwrite starts afresh. Then score with eval.py.
--dry-run writes only <dataset>.prompts.jsonl and dry_run.json there (Eval/inference/dry_run.py).
Each dataset line and the final line count prompt, generated and cut tokens, seconds and generated tokens/s, and
the cost with --price (Eval/pricing.py). --max-total-tokens stops before a batch that could overshoot the budget:
what was saved stays, a rerun resumes, and the exit code is 3.
"""
import os

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # before torch loads: 2-core machines stall without it

import argparse  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

from Eval.args import HelpFormatter, name_list, nonnegative_int, one_line, positive_int, run_main  # noqa: E402
from Eval.inference.datasets import Sources, dataset_names, load_dataset  # noqa: E402
from Eval.models.factory import add_batch_arguments, add_model_arguments, from_args, served_model_default  # noqa: E402
from Eval.names import output_folder  # noqa: E402
from Eval.records import RecordError, sidecar_path  # noqa: E402
from Eval.inference.templates import load_maxlen_config, load_prompt_config, template_fields  # noqa: E402
from Eval.models.base import TRUNCATION_POLICIES  # noqa: E402
from Eval.inference.distributed import barrier, finish, init_process_group, local_device, resolve_shards  # noqa: E402
from Eval.inference.predict import RunSettings, examples_done, required_examples, run_dataset  # noqa: E402
from Eval.inference.run_loop import TokenBudget  # noqa: E402
from Eval.pricing import PriceError, add_counts, price_for, tokens_per_s, usage_text  # noqa: E402
from Eval.inference.dry_run import dry_run  # noqa: E402
from Eval.inference.perturb import with_perturbations  # noqa: E402
from Eval.inference.predictions import (PredictionFile, merge_predictions, record_output,  # noqa: E402
                                        sidecar_model)
from Eval.inference.score_records import add_arguments as add_unlearning_arguments, run as run_unlearning  # noqa: E402

ROOT = Path(__file__).resolve().parent
DEFAULT_MODEL = "Eval/models/demo/tiny-qwen2"  # the shipped demo model, relative to the repository root


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0], formatter_class=HelpFormatter)
    add_model_arguments(p, default_model=DEFAULT_MODEL)
    p.add_argument("--model-name", default=None, help="output folder name (default: the model path's last part)")
    p.add_argument("--datasets", type=name_list, default=None,
                   help="comma-separated names (default: every DATASET_DIR/*.jsonl)")
    p.add_argument("--dataset-dir", type=Path, default=ROOT / "dataset", help="where NAME.jsonl datasets live")
    p.add_argument("--prompt-dir", type=Path, default=ROOT / "prompts", help="where NAME.txt templates live")
    p.add_argument("--out-dir", type=Path, default=Path("pred"), help="records go to OUT_DIR/MODEL_NAME/")
    b = p.add_argument_group("a benchmark's own configs, as published (prompts/NAME.txt still wins)")
    b.add_argument("--prompt-config", type=Path, default=None,
                   help="LongBench's / TinyEval's config/dataset2prompt.json, or LongBench v2's prompts/ folder "
                        "(default: none; a LongBench dataset with no prompts/NAME.txt then stops)")
    b.add_argument("--maxlen-config", type=Path, default=None,
                   help="their config/dataset2maxlen.json: generation length per dataset (default: the task table)")
    add_batch_arguments(p)
    p.add_argument("--truncation", choices=TRUNCATION_POLICIES, default="middle",
                   help="a prompt longer than --max-length allows: cut its middle (LongBench), its start (left), "
                        "its end (right), or skip the example (recorded as skipped, counted out of n)")
    r = p.add_argument_group("robustness (Eval/perturbations.py; eval.py reports each perturbation and the worst case)")
    r.add_argument("--perturb", type=perturbation_list, default=None, metavar="NAME[:ARG],...",
                   help="also run a perturbed copy of every example per perturbation, e.g. typo:0.05,extra_space "
                        "(default: none)")
    r.add_argument("--perturb-references", action="store_true", help="perturb the reference answers too")
    r.add_argument("--perturb-seed", type=int, default=0, help="seed of the perturbed copies' random choices")
    p.add_argument("--cot", action="store_true",
                   help="chain of thought for tasks that have it (LongBench v2): a reasoning pass, then the answer "
                        "prompt quoting it; records go to <dataset>_cot.jsonl")
    p.add_argument("--limit", type=positive_int, default=None,
                   help="only the first N examples of each dataset (default: all)")
    p.add_argument("--overwrite", action="store_true", help="start afresh instead of resuming")
    p.add_argument("--max-total-tokens", type=positive_int, default=None, metavar="N",
                   help="prompt + generated tokens this run may spend over all datasets (--cot: both passes); it "
                        "stops before a batch that could go over, exit code 3, and a rerun resumes (default: no "
                        "budget)")
    p.add_argument("--price", type=Path, default=None, metavar="PATH",
                   help='JSON of US dollars per million tokens by model name, {"MODEL": {"input": 0.15, "output": '
                        '0.6}, "*": {...}}: adds the cost (the dry run: its estimate) (default: no cost)')
    p.add_argument("--validate", action="store_true", help="check datasets and templates, load no model")
    p.add_argument("--dry-run", action="store_true",
                   help="load only the tokenizer and render every prompt as the run would: writes "
                        "OUT_DIR/MODEL_NAME/<dataset>.prompts.jsonl and dry_run.json (token counts, truncation, "
                        "a bound on generated tokens); no prediction file is touched")
    d = p.add_argument_group("scale-out (see Eval/inference/distributed.py; torchrun sets these itself)")
    d.add_argument("--num-shards", type=positive_int, default=None,
                   help="split each dataset into this many shards (default: 1, or torchrun's WORLD_SIZE)")
    d.add_argument("--shard-id", type=nonnegative_int, default=None,
                   help="the shard this process runs, 0-based (default: 0, or torchrun's RANK)")
    d.add_argument("--merge", action="store_true", help="only merge shard files into the main files; no model")
    add_unlearning_arguments(p)
    args = p.parse_args(argv)
    served_model_default(args, DEFAULT_MODEL)
    return args


def perturbation_list(text: str) -> list:
    """argparse type of --perturb: Eval/perturbations.py parse_perturbations, its ValueError as a usage error."""
    from Eval.perturbations import parse_perturbations

    try:
        return parse_perturbations(text)
    except ValueError as err:
        raise argparse.ArgumentTypeError(str(err)) from None


def load_datasets(args) -> list:
    names = args.datasets or dataset_names(args.dataset_dir)
    if not names:
        raise FileNotFoundError(f"{args.dataset_dir}: no *.jsonl or *.json datasets")
    sources = Sources(load_prompt_config(args.prompt_config), load_maxlen_config(args.maxlen_config),
                      args.maxlen_config)
    datasets = [load_dataset(n, args.dataset_dir, args.prompt_dir, sources) for n in names]
    if args.perturb:
        datasets = [with_perturbations(ds, args.perturb, args.perturb_seed, args.perturb_references)
                    for ds in datasets]
    if args.cot and not args.datasets:  # every dataset that has a chain-of-thought mode
        datasets = [ds for ds in datasets if ds.task.cot_max_new_tokens]
        if not datasets:
            raise ValueError(f"--cot: no dataset in {args.dataset_dir} has a chain-of-thought mode")
    return [ds.as_cot() for ds in datasets] if args.cot else datasets


def merge_only(datasets: list, out_dir: Path, limit: int | None) -> int:
    """Merge shard files into each dataset's main file; exit 1 if some dataset still lacks examples."""
    missing = []
    for ds in datasets:
        path = out_dir / f"{ds.name}.jsonl"
        merged = merge_predictions(path, [e.id for e in ds.examples], [e.id for e in required_examples(ds, limit)],
                                   {e.id: e.sha256 for e in ds.examples}, sidecar_model(sidecar_path(path)))
        if merged:
            record_output(sidecar_path(path), merged)
        else:
            missing.append(ds.name)
    for name in missing:
        print(f"error: {out_dir / name}.jsonl: some examples have no record yet; run the missing shards",
              file=sys.stderr)
    return 1 if missing else 0


TOTALS = ("examples", "truncated", "skipped", "failed", "skipped_done", "new", "changed_redone", "failed_redone",
          "model_changed_redone", "removed", "prompt_tokens", "gen_tokens", "truncated_tokens")


def run_all(model, datasets: list, args, shards, out_dir: Path, saved: list[int]) -> dict | None:
    """Every dataset through the model; under torchrun, ranks meet after each dataset and rank 0 merges.
    `saved` collects the number of records written by each batch (for the message after Ctrl-C)."""
    settings = RunSettings(args.batch_size, args.max_batch_tokens, args.max_length, args.max_new_tokens,
                           args.limit, args.overwrite and not shards.torchrun, shards.num_shards, shards.shard_id,
                           merge=not shards.torchrun, truncation=args.truncation)
    start, totals = time.perf_counter(), dict.fromkeys(TOTALS, 0)
    budget = TokenBudget(args.max_total_tokens) if args.max_total_tokens else None
    try:  # every dataset's token budget, before any dataset runs
        for ds in datasets:
            for max_new in (args.max_new_tokens or ds.task.max_new_tokens, ds.cot and ds.task.cot_max_new_tokens):
                if max_new:
                    model.check_budget(ds.task.chat, max_new, args.max_length or model.context_window())
            if budget and ds.cot and not (args.max_length or model.context_window()):
                raise ValueError("--max-total-tokens with --cot needs a known context window to bound the answer "
                                 "pass; pass --max-length")
    except ValueError as err:
        print(f"error: {ds.name}: {err}", file=sys.stderr)
        return None
    for ds in datasets:
        try:
            if shards.torchrun and args.overwrite:  # rank 0 clears old files before any rank reads them
                if shards.is_first:
                    PredictionFile(out_dir / f"{ds.name}.jsonl", overwrite=True)
                barrier(shards)
            summary = run_dataset(model, ds, out_dir, settings, on_saved=saved.append, budget=budget)
            barrier(shards)
            if shards.torchrun and shards.is_first:
                merge_only([ds], out_dir, args.limit)
        except (ValueError, RecordError) as err:  # StorageError (another process writes the file) included
            print(f"error: {err}", file=sys.stderr)
            return None
        print(f"{ds.name}: {_describe_run(summary)}; {usage_text(summary, _cost(args, summary))}")
        add_counts(totals, {key: summary[key] for key in (*TOTALS, "server_usage") if key in summary})
        if budget and budget.stopped:  # the datasets after this one are not started
            break
    finish(shards)
    seconds = time.perf_counter() - start
    totals.update(seconds=seconds, tokens_per_s=tokens_per_s(totals["gen_tokens"], seconds))
    return {**totals, "budget": budget}


def _cost(args, usage: dict) -> float | None:
    """The dollars `usage` cost at the --price entry (None without --price)."""
    return args.price_entry.cost(usage["prompt_tokens"], usage["gen_tokens"]) if args.price_entry else None


def _stopped(args, datasets: list, out_dir: Path, budget: TokenBudget) -> int:
    """The --max-total-tokens stop: what was spent and how far the datasets got; exit code 3."""
    done, required = map(sum, zip(*(examples_done(ds, out_dir, args.limit, sidecar_model(
        sidecar_path(out_dir / f"{ds.name}.jsonl"))) for ds in datasets)))
    nothing = " (nothing generated: the first batch alone could exceed it)" if budget.spent == 0 else ""
    print(f"stopped at the token budget: {budget.spent} of {budget.limit} tokens used{nothing}, {done} of "
          f"{required} examples done; rerun (with a larger budget) to continue", file=sys.stderr)
    return 3


def _named(changes: list[str] | None) -> str:
    """': model-00002-of-00002.safetensors, config.json' (at most five names), or nothing."""
    if not changes:
        return ""
    return ": " + ", ".join(changes[:5]) + (f" and {len(changes) - 5} more" if len(changes) > 5 else "")


def _describe_run(summary: dict) -> str:
    """What a rerun did, in words: '4 new, 1 changed (redone), 25 removed, 3 already done'."""
    parts = [f"{summary['new']} new"]
    if summary["changed_redone"]:
        parts.append(f"{summary['changed_redone']} changed since the last run (redone)")
    if summary["failed_redone"]:
        parts.append(f"{summary['failed_redone']} failed before (redone)")
    if summary.get("model_changed_redone"):
        parts.append(f"{summary['model_changed_redone']} made by another model (redone: the model's files or "
                     f"settings changed{_named(summary.get('model_changes'))})")
    if summary.get("unselected"):
        parts.append(f"{summary['unselected']} not selected by this run (kept aside for a later run; the file "
                     "holds what this run selected)")
    if summary["removed"]:
        parts.append(f"{summary['removed']} no longer in the dataset (dropped from the file)")
    parts.append(f"{summary['skipped_done']} already done")
    if summary["skipped"]:
        parts.append(f"{summary['skipped']} skipped (the prompt does not fit; --truncation skip)")
    if summary["failed"]:
        parts.append(f"{summary['failed']} FAILED now (rerun to retry)")
    if summary.get("stopped"):
        parts.append(f"stopped at the token budget ({summary['examples']} generated)")
    return ", ".join(parts)


def prepare(args):
    """Datasets checked, names checked, output folder checked: everything refused before a model loads.
    Returns (datasets, out_dir), or an exit code."""
    try:
        datasets = load_datasets(args)
        out_dir = output_folder(args.out_dir, args.model_name, args.model)
    except (FileNotFoundError, RecordError, ValueError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    try:  # before any model loads or file is written
        args.price_entry = price_for(args.price, out_dir.name) if args.price else None
    except PriceError as err:
        print(f"error: --price: {err}", file=sys.stderr)
        return 2
    for ds in datasets:
        for note in ds.notes:
            print(f"note: {note}")
        if args.validate:
            print(f"ok: {ds.name}: {len(ds.examples)} examples, {ds.form} form, template {ds.template_source} "
                  f"(fields: {', '.join(sorted(template_fields(ds.template)))}; sha256 {ds.template_hash}), "
                  f"metrics {', '.join(ds.task.metrics)}, max_new_tokens {ds.task.max_new_tokens}, "
                  f"{'chat' if ds.task.chat else 'completion'} mode")
    return datasets, out_dir


def main(argv=None) -> int:
    args = parse_args(argv)
    if args.unlearning and (args.dry_run or args.max_total_tokens or args.price):
        print("error: --dry-run, --max-total-tokens and --price cover prediction runs, not --unlearning",
              file=sys.stderr)
        return 2
    if args.unlearning:  # TOFU / MUSE score records for eval.py --unlearning (Eval/inference/score_records.py)
        return run_unlearning(args)
    prepared = prepare(args)
    if isinstance(prepared, int):
        return prepared
    datasets, out_dir = prepared
    if args.validate:
        return 0
    if args.dry_run:
        return dry_run_only(args, datasets, out_dir)
    if args.merge:
        return merge_only(datasets, out_dir, args.limit)
    try:
        shards = resolve_shards(args.num_shards, args.shard_id)
        if args.overwrite and shards.num_shards > 1 and not shards.torchrun:
            raise ValueError("--overwrite with independent shards would race; remove the output folder instead")
        if args.max_total_tokens and shards.torchrun:  # one rank stopping alone would leave the others waiting
            raise ValueError("--max-total-tokens counts one process's tokens; it does not go with torchrun")
    except ValueError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    saved: list[int] = []
    try:
        return generate_everything(args, datasets, shards, out_dir, saved)
    except KeyboardInterrupt:
        print(f"\ninterrupted: {sum(saved)} records saved in {out_dir}; rerun the same command to resume",
              file=sys.stderr)
        return 130


def dry_run_only(args, datasets: list, out_dir: Path) -> int:
    """--dry-run: the backend's tokenizer-only twin renders every prompt (Eval/inference/dry_run.py)."""
    try:
        model = from_args(args, tokenizer_only=True)
    except (FileNotFoundError, OSError, ValueError) as err:
        print(f"error: --dry-run: {one_line(err)}", file=sys.stderr)
        return 2
    try:
        return dry_run(model, datasets, out_dir, RunSettings(max_length=args.max_length,
                                                             max_new_tokens=args.max_new_tokens, limit=args.limit,
                                                             truncation=args.truncation), args.price_entry)
    finally:
        getattr(model, "close", lambda: None)()  # the api adapter's connection pool


def generate_everything(args, datasets: list, shards, out_dir: Path, saved: list[int]) -> int:
    init_process_group(shards)
    args.device = local_device(args.device, shards)
    try:
        model = from_args(args)
    except (FileNotFoundError, OSError, ValueError) as err:
        print(f"error: could not load model: {one_line(err)}", file=sys.stderr)
        return 2
    totals = run_all(model, datasets, args, shards, out_dir, saved)
    if totals is None:
        return 2
    name, stopped = out_dir.name, totals["budget"] and totals["budget"].stopped
    print(f"{'so far' if stopped else 'done'}: {totals['examples']} examples generated ({totals['new']} new, {totals['changed_redone']} changed, "
          f"{totals['failed_redone']} failed before; {totals['skipped_done']} already done, {totals['removed']} "
          f"removed), {totals['truncated']} truncated, "
          + (f"{totals['skipped']} skipped (do not fit), " if totals["skipped"] else "") + f"{totals['failed']} failed; "
          f"{usage_text(totals, _cost(args, totals))} -> {out_dir}; score with: python eval.py --model {name}"
          + ("" if args.out_dir == Path("pred") else f" --pred-root {args.out_dir}"))
    if stopped:
        return _stopped(args, datasets, out_dir, totals["budget"])
    return 0 if totals["failed"] == 0 else 1


if __name__ == "__main__":
    run_main(main)
