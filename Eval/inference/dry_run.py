"""`python inference.py dry-run`: every prompt rendered by predict.py's functions, no weights:
OUT/<model>/<dataset>.prompts.jsonl and dry_run.json (--price: the most the run can cost).

Usage: python inference.py dry-run --max-length 2048 --price docs/prices.example.json
"""

from pathlib import Path

from Eval.args import one_line, refusing_bad_input
from Eval.commands import inference_command
from Eval.inference.datasets import Dataset
from Eval.inference.predict import (RunSettings, dataset_prompts, generation_budget,
                                    required_examples)
from Eval.inference.runner import add_job_arguments as add_arguments  # noqa: F401
from Eval.inference.runner import prepare, warn_past_window
from Eval.models.base import BaseLLM
from Eval.models.factory import resolve_model_args
from Eval.pricing import Price, cost_text
from Eval.records import DRY_RUN_SUFFIX, is_dry_run_output
from Eval.storage import write_json_atomic, write_jsonl_atomic

SUMMARY_FILE = "dry_run.json"
FIGURES = ("examples", "prompt_tokens", "truncated", "skipped", "max_gen_tokens")


def render_dataset(model: BaseLLM, ds: Dataset, settings: RunSettings) -> tuple[list[dict], dict]:
    """(a row per example the run would do, the summary); --cot: the reasoning pass's prompts."""
    max_new, max_length, kind, first_max = generation_budget(model, ds, settings)
    examples = required_examples(ds, settings.limit)
    prompts = dataset_prompts(model, ds, examples, first_max, max_length, settings.truncation, kind)
    rows = []
    for e, p in zip(examples, prompts):
        rows.append({"id": e.id, "prompt": p.text, "prompt_tokens": p.n_tokens,
                     "truncated_tokens": p.truncated_tokens, "max_new_tokens": first_max})
        if p.user_text is not None:  # the filled template inside the chat template, after any cut
            rows[-1]["user_text"] = p.user_text
        if p.skipped:
            rows[-1]["skipped"] = p.skipped
    skipped = sum(1 for p in prompts if p.skipped)
    sent = [r["prompt_tokens"] for r in rows if "skipped" not in r]  # a skipped one is never sent
    summary = {"examples": len(rows), "prompt_tokens": sum(sent),
               "max_prompt_tokens": max(sent, default=0),
               "truncated": sum(1 for r in rows if r["truncated_tokens"]), "skipped": skipped,
               "max_gen_tokens": (len(rows) - skipped) * (first_max + (max_new if ds.cot else 0)),
               "max_new_tokens": max_new, "max_length": max_length,
               "truncation": settings.truncation, "mode": "chat" if ds.task.chat else "completion",
               "template": ds.template_source, "template_sha256": ds.template_hash}
    if ds.cot:
        summary.update(cot_max_new_tokens=first_max,
                       rendered="the reasoning pass only (the answer pass quotes it)")
    return rows, summary


def dry_run(model: BaseLLM, datasets: list[Dataset], out_dir: Path, settings: RunSettings,
            price: Price | None = None) -> int:
    """Render every dataset, then write the files; a ValueError (run's exit 2) writes none."""
    rendered = {}
    for ds in datasets:
        path = out_dir / f"{ds.name}{DRY_RUN_SUFFIX}"
        if path.exists() and not is_dry_run_output(path):  # a real run's "<name>.prompts" dataset
            raise ValueError(f"{path} holds predictions (it has a run sidecar); dry-run will not "
                             "overwrite it")
        try:
            rendered[ds.name] = (path, *render_dataset(model, ds, settings))
        except ValueError as err:  # a --max-length that cannot hold the template and the answer
            raise ValueError(f"{ds.name}: {err}") from None
    out_dir.mkdir(parents=True, exist_ok=True)
    summaries = {}
    for name, (path, rows, summary) in rendered.items():
        write_jsonl_atomic(path, rows)
        summaries[name] = _estimate(summary, price)
        print(f"{name}: {describe(summaries[name])} -> {path}")
    total = {k: sum(s[k] for s in summaries.values()) for k in FIGURES}
    total["max_prompt_tokens"] = max((s["max_prompt_tokens"] for s in summaries.values()),
                                     default=0)
    total = _estimate(total, price)
    used = {k: getattr(settings, k) for k in ("max_length", "max_new_tokens", "limit",
                                              "truncation")}
    write_json_atomic(out_dir / SUMMARY_FILE, {"model": model.identity(), "settings": used,
                                              "datasets": summaries, "total": total,
                                              **({"price": price.describe()} if price else {})})
    print(f"dry run: {describe(total)}; no model loaded, no prediction written -> "
          f"{out_dir / SUMMARY_FILE}")
    if price:
        cot = any("rendered" in s for s in summaries.values())
        print(f"estimated cost: at most {cost_text(total['estimated_cost_usd'])} at price entry "
              f"{price.entry!r} (${price.input:g} / ${price.output:g} per million input / output "
              "tokens): prompt tokens exact, generated tokens at their upper bound"
              + ("; --cot: the answer pass's prompts are not in it (they quote reasoning not "
                 "generated yet)" if cot else ""))
    return 0


def _estimate(summary: dict, price: Price | None) -> dict:
    """The summary with the most it can cost."""
    if price is None:
        return summary
    cost = price.cost(summary["prompt_tokens"], summary["max_gen_tokens"])
    return {**summary, "estimated_cost_usd": cost}


def describe(summary: dict) -> str:
    """'3 examples, 412 prompt tokens (max 150), 1 truncated, at most 96 generated tokens'."""
    skipped = f", {summary['skipped']} skipped (do not fit)" if summary["skipped"] else ""
    cost = summary.get("estimated_cost_usd")
    cost = "" if cost is None else f", at most {cost_text(cost)}"
    return (f"{summary['examples']} examples, {summary['prompt_tokens']} prompt tokens (max "
            f"{summary['max_prompt_tokens']}), {summary['truncated']} truncated{skipped}, at most "
            f"{summary['max_gen_tokens']} generated tokens{cost}")


@inference_command("dry-run", help="render every prompt with the tokenizer only: truncation, "
                                   "token counts, cost")
@refusing_bad_input
def run(args) -> int:
    """The backend's tokenizer-only twin renders every prompt the run would send."""
    from Eval.models.tokenizer_only import dry_run_twin

    datasets, out_dir = prepare(args)
    resolve_model_args(args)
    try:
        model = dry_run_twin(args)
    except (OSError, ValueError) as err:
        raise ValueError(f"dry-run: {one_line(err)}") from None
    settings = RunSettings(max_length=args.max_length, max_new_tokens=args.max_new_tokens,
                           limit=args.limit, truncation=args.truncation)
    try:
        if not model.identity().get("served"):  # --max-length given, the dry run asks no server
            warn_past_window(model, args.max_length)
        return dry_run(model, datasets, out_dir, settings, args.price_entry)
    finally:
        model.close()
