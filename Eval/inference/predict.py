"""The prediction run of one dataset: its examples as prompts, length-sorted batches through the model, one record
per example (the contract of Eval/records.py), through the shared run loop (Eval/inference/run_loop.py).

Usage:
    summary = run_dataset(model, dataset, out_dir=Path("pred/demo"), settings=RunSettings(...))

`generation_budget`, `required_examples` and `dataset_prompts` are the prompt side of a run, shared with
`inference.py dry-run` (Eval/inference/dry_run.py) so that its prompts are the run's by construction.

Two things change what a record is: --truncation skip (a prompt that does not fit is not run; its record has
`skipped` with the reason, pred "", and eval.py counts it out of n) and --cot on a task with a chain-of-thought
mode (LongBench v2's two passes: the reasoning prompt first, then the answer prompt that quotes the reasoning;
`pred` is the answer pass, `cot` the reasoning, and the file is NAME_cot.jsonl).

Accounting (Eval/pricing.py): the summary counts prompt, generated and cut tokens of this invocation (both --cot
passes) and the API server's own counts when it sent them (each record's `server_usage`). With a TokenBudget
(--max-total-tokens) a batch's bound is exact for prompts and the most it can generate for outputs: rows x max
new tokens, and under --cot each row's answer pass at most the whole window (prompt + answer <= max length).
"""
from __future__ import annotations

import dataclasses
import hashlib
import os
import time
from pathlib import Path
from typing import Callable

from Eval.inference.dataset_forms import question_text
from Eval.inference.datasets import Dataset, Example
from Eval.inference.predictions import best_records
from Eval.inference.run_loop import Job, TokenBudget, model_digest, run_job
from Eval.models.base import BaseLLM, Generation, Prompt, plan_batches
from Eval.models.identity import folder_identity
from Eval.pricing import batch_counts


@dataclasses.dataclass(frozen=True)
class RunSettings:
    batch_size: int = 16
    max_batch_tokens: int | None = 16384  # padded prompt tokens per batch; None: batch_size alone decides
    max_length: int | None = None  # context window for prompt + answer; None: the model's own
    max_new_tokens: int | None = None  # None: the task's generation length
    limit: int | None = None  # first N examples of each dataset
    overwrite: bool = False
    num_shards: int = 1  # this process handles the examples whose position % num_shards == shard_id
    shard_id: int = 0
    merge: bool = True  # merge shard files into the main file when done (torchrun: rank 0 after a barrier)
    truncation: str = "middle"  # how a prompt too long for max_length is cut (Eval/models/base.py truncate_ids)


def _record(example: Example, ds: Dataset, prompt: Prompt, out: Generation, latency: float) -> dict:
    record = {"id": example.id, "example_sha256": example.sha256, "dataset": ds.name,
              "question": question_text(example.fields, ds.form), "pred": out.text, "answers": example.answers,
              "all_classes": example.all_classes, "length": example.length, "prompt_tokens": prompt.n_tokens,
              "prompt_sha256": hashlib.sha256(prompt.text.encode("utf-8")).hexdigest()[:16],
              "truncated_tokens": prompt.truncated_tokens, "truncation": prompt.truncation,
              "gen_tokens": out.n_tokens, "finish_reason": out.finish_reason, "latency_s": round(latency, 4),
              "batch_size": out.batch_size}
    if ds.perturbed:  # --perturb: which copy this is (None: the original) and the example it was made from
        record["perturbation"] = example.perturbation
        record["original_id"] = example.original_id or example.id
    if ds.task.group_by:
        record["groups"] = {key: example.fields.get(key) for key in ds.task.group_by}
    if prompt.skipped:
        record["skipped"] = prompt.skipped
    if out.thinking:
        record["thinking"] = out.thinking
    if out.server_usage:
        record["server_usage"] = out.server_usage
    if out.error:
        record["error"] = out.error
    return record


def _generate(model: BaseLLM, prompts: list[Prompt], max_new: int, stop: tuple[str, ...]) -> list[Generation]:
    """The model's outputs for the prompts that are run; a skipped prompt gets an empty "skipped" output."""
    run = [p for p in prompts if not p.skipped]
    outputs = iter(model.generate(run, max_new, stop) if run else [])
    return [Generation("", 0, "skipped") if p.skipped else next(outputs) for p in prompts]


_LATER_OPTIONS = {"think_tags": ("<think>", "</think>"), "thinking_budget": None, "reasoning": False}


def _fingerprint(model: BaseLLM, ds: Dataset, max_length: int | None, max_new_tokens: int,
                 truncation: str) -> dict:
    options = {k: v for k, v in dataclasses.asdict(model.options).items()  # options added later count only
               if k not in _LATER_OPTIONS or v != _LATER_OPTIONS[k]}      # when set, so older files resume
    fingerprint = {"template_sha256": ds.template_hash, "chat": ds.task.chat, "max_length": max_length,
                   "max_new_tokens": max_new_tokens, "options": options}
    if truncation != "middle":  # the default adds nothing, so files written before policies existed resume
        fingerprint["truncation"] = truncation
    if ds.cot:
        fingerprint["cot"] = {kind: t.sha256 for kind, t in ds.templates.items()} | {
            "max_new_tokens": ds.task.cot_max_new_tokens}
    return fingerprint


def _count(records: list[dict]) -> dict:
    """A batch's tally: tokens (Eval/pricing.py batch_counts), records cut and records skipped."""
    return {**batch_counts(records),
            "truncated": sum(1 for r in records if r["truncated_tokens"] or r.get("cot_truncated_tokens")),
            "skipped": sum(1 for r in records if r.get("skipped"))}


def token_bound(ds: Dataset, prompts: list[Prompt], first_max: int, max_length: int | None) -> int:
    """The most tokens these prompts can spend: their own tokens plus first_max generated each; under --cot
    also the answer pass, whose prompt quotes outputs not made yet, so at most the whole window a row
    (inference.py refuses a budget with --cot before any run when the window is unknown).
    A skipped prompt is never run and spends nothing."""
    run = [p for p in prompts if not p.skipped]
    return sum(p.n_tokens + first_max + ((max_length or 0) if ds.cot else 0) for p in run)


def generation_budget(model: BaseLLM, ds: Dataset, settings: RunSettings) -> tuple[int, int | None]:
    """(max new tokens, max length) for `ds`: the settings' overrides, else the task's and the model's own."""
    return settings.max_new_tokens or ds.task.max_new_tokens, settings.max_length or model.context_window()


def examples_done(ds: Dataset, out_dir: Path, limit: int | None, model: str | None = None) -> tuple[int, int]:
    """(required examples that have a good record made from their current content by `model` (a
    model_sha256), required examples) of `ds` in out_dir, over the main file and any shard files; read only."""
    required = required_examples(ds, limit)
    saved = best_records(out_dir / f"{ds.name}.jsonl", expected={e.id: e.sha256 for e in ds.examples},
                         model=model)
    good = sum(1 for e in required if saved.get(e.id, {}).get("example_sha256") == e.sha256
               and saved[e.id].get("error") is None)
    return good, len(required)


def required_examples(ds: Dataset, limit: int | None) -> list[Example]:
    """The examples a run must finish: all, or the first `limit` (with their perturbed copies), in data order."""
    return ds.examples[:limit * (1 + ds.copies)] if limit else ds.examples  # --perturb: each with its copies


def dataset_prompts(model: BaseLLM, ds: Dataset, examples: list[Example], max_new: int, max_length: int | None,
                    truncation: str = "middle", kind: str = "answer", extras: list[dict] | None = None
                    ) -> list[Prompt]:
    """What the model sees for each example: the template (of `kind`, filled with the example's fields and its
    `extras`) cut to fit by the truncation policy, chat-wrapped if the task is."""
    extras = extras or [{}] * len(examples)
    texts = [ds.fill(e, kind, **extra) for e, extra in zip(examples, extras)]
    return model.build_prompts(texts, ds.task.chat, max_new, max_length, truncation)


def first_pass(ds: Dataset, settings: RunSettings, max_new: int) -> tuple[str, int]:
    """(template kind, generation length) of the prompts a run builds before any output exists: --cot's
    reasoning pass, else the answer."""
    return ("cot", ds.task.cot_max_new_tokens) if ds.cot else ("answer", max_new)


def _with_cot(model: BaseLLM, ds: Dataset, examples: list[Example], firsts: list[Prompt], settings: RunSettings,
              max_new: int, max_length: int | None) -> list[tuple[Prompt, Generation, dict]]:
    """--cot: the reasoning pass, then the answer prompt quoting it (stripped, as LongBench v2 does)."""
    reasoning = _generate(model, firsts, ds.task.cot_max_new_tokens, ())
    ok = [k for k, out in enumerate(reasoning) if not out.error and out.finish_reason != "skipped"]
    seconds = dataset_prompts(model, ds, [examples[k] for k in ok], max_new, max_length, settings.truncation,
                              "cot_answer", [{"cot": reasoning[k].text.strip()} for k in ok])
    answers = dict(zip(ok, zip(seconds, _generate(model, seconds, max_new, ds.task.stop))))
    results = []
    for k, (first, thought) in enumerate(zip(firsts, reasoning)):
        prompt, out = answers.get(k, (first, thought))  # a failed or skipped reasoning pass is the record
        extra = {"cot": thought.text, "cot_prompt_tokens": first.n_tokens, "cot_truncated_tokens":
                 first.truncated_tokens, "cot_gen_tokens": thought.n_tokens, "cot_finish_reason": thought.finish_reason}
        if thought.thinking:
            extra["cot_thinking"] = thought.thinking
        results.append((prompt, out, extra))
    return results


def request_fingerprint(request: dict, ds: Dataset) -> dict:
    """What a command asked for, told from its arguments and the files alone (no model, no torch): the backend,
    every -M pair and the content of each file or folder a -M value or --model names (Eval/models/identity.py),
    the length settings as given, the dataset's templates and generation length. The sidecar keeps it, so a
    rerun of the same request with nothing left to do stops before a model loads (Eval/inference/runner.py)."""
    paths = [request["model"], *(pair.partition("=")[2] for pair in request.get("model_args", ()))]
    files = [folder_identity(p).get("sha256") for p in paths if p and os.path.exists(p)]
    kept = {k: v for k, v in request.items() if k != "model_args"}  # their hash stays: values may be secret
    return {**kept, "files": files, "templates": {k: t.sha256 for k, t in ds.templates.items()},
            "task_max_new_tokens": ds.task.max_new_tokens, "chat": ds.task.chat}


def run_dataset(model: BaseLLM, ds: Dataset, out_dir: Path, settings: RunSettings,
                on_saved: Callable[[int], None] | None = None, budget: TokenBudget | None = None,
                request: dict | None = None) -> dict:
    """Generate every example of `ds` that has no current record; returns the run summary (also in the sidecar)."""
    path = out_dir / f"{ds.name}.jsonl"
    max_new, max_length = generation_budget(model, ds, settings)
    examples = {e.id: e for e in ds.examples}
    required = [e.id for e in required_examples(ds, settings.limit)]
    prompts: dict[str, Prompt] = {}

    kind, first_max = first_pass(ds, settings, max_new)

    def plan(todo: list[str]) -> list[list[str]]:
        built = dataset_prompts(model, ds, [examples[i] for i in todo], first_max, max_length, settings.truncation,
                                kind)
        prompts.update(zip(todo, built))
        order = plan_batches([p.n_tokens for p in built], settings.batch_size, settings.max_batch_tokens,
                             model.max_pad_fraction)
        return [[todo[k] for k in batch] for batch in order]

    def process(batch: list[str]) -> list[dict]:
        t0 = time.perf_counter()
        firsts = [prompts[i] for i in batch]
        if ds.cot:
            done = _with_cot(model, ds, [examples[i] for i in batch], firsts, settings, max_new, max_length)
        else:
            done = [(p, out, {}) for p, out in zip(firsts, _generate(model, firsts, max_new, ds.task.stop))]
        latency = (time.perf_counter() - t0) / len(batch)
        return [{**_record(examples[i], ds, prompt, out, latency), **extra}
                for i, (prompt, out, extra) in zip(batch, done)]

    model_sha256 = model_digest(model.fingerprint())  # first: a served model's id is asked here, then shown
    data = {"path": os.path.abspath(ds.path), "file_sha256": ds.file_sha256, "examples": len(ds.examples),
            "digest": ds.digest(), "limit": settings.limit}
    if ds.copies:  # --perturb: each original's copies are counted in `examples` (eval.py words its coverage)
        data["copies"] = ds.copies
    sidecar = {"dataset": ds.name, "kind": "predictions", "file": str(path), "task": dataclasses.asdict(ds.task),
               "source": {"path": str(ds.path), "examples": len(ds.examples), "template": ds.template_source,
                          "template_sha256": ds.template_hash, "form": ds.form,
                          "templates": {kind: {"source": t.source, "sha256": t.sha256}
                                        for kind, t in ds.templates.items()}},
               "data": data,
               "model": model.identity(), "settings": dataclasses.asdict(settings),
               "request": request_fingerprint(request, ds) if request else None}
    fingerprint = _fingerprint(model, ds, max_length, max_new, settings.truncation)
    job = Job(path, {e.id: e.sha256 for e in ds.examples}, required, fingerprint, sidecar, ds.name,
              settings.overwrite, settings.shard_id, settings.num_shards, settings.merge,
              tally=_count, on_saved=on_saved, budget=budget,
              bound=lambda batch: token_bound(ds, [prompts[i] for i in batch], first_max, max_length),
              model_sha256=model_sha256)
    return run_job(job, plan, process)  # its summary starts from the tally's zeros (_count([]))
