"""The prediction run of one dataset on the run loop: prompts, length-sorted batches, records.

Usage: summary = run_dataset(model, dataset, out_dir=Path("pred/demo"), settings=RunSettings())
"""

import dataclasses
import hashlib
import os
import time
from pathlib import Path
from typing import Callable

from Eval.inference.benchmark_configs import cut_to_prompt_limit
from Eval.inference.budget import TokenBudget
from Eval.inference.datasets import Dataset, Example, question_text
from Eval.inference.predictions import records_done
from Eval.inference.run_loop import Job, model_digest, run_job
from Eval.models.base import BaseLLM, Generation, Prompt, plan_batches
from Eval.pricing import batch_counts


@dataclasses.dataclass(frozen=True)
class RunSettings:
    batch_size: int = 16
    max_batch_tokens: int | None = 16384  # padded prompt tokens per batch; None: batch_size decides
    max_length: int | None = None  # context window for prompt + answer; None: the model's own
    max_new_tokens: int | None = None  # None: the task's generation length
    limit: int | None = None  # first N examples of each dataset
    overwrite: bool = False
    num_shards: int = 1  # this process does the examples whose position % num_shards == shard_id
    shard_id: int = 0
    merge: bool = True  # merge shard files into the main file when done (torchrun: rank 0)
    truncation: str = "middle"  # how a prompt too long for max_length is cut (Eval/models/base.py)


def _example_fields(example: Example, ds: Dataset) -> dict:
    """What a record takes from its example: all but the prompt and the output."""
    fields = {"id": example.id, "example_sha256": example.sha256, "dataset": ds.name,
              "question": question_text(example.fields, ds.form, ds.template),
              "answers": example.answers, "all_classes": example.all_classes,
              "length": example.length}
    if ds.copies:  # --perturb: which copy this is (None: the original) and its original
        fields["perturbation"] = example.perturbation
        fields["original_id"] = example.original_id or example.id
    if ds.task.group_by:
        fields["groups"] = {key: example.fields.get(key) for key in ds.task.group_by}
    return fields


def _prompt_sha256(prompt: Prompt) -> str:
    return hashlib.sha256(prompt.text.encode("utf-8")).hexdigest()[:16]


def _record(example: Example, ds: Dataset, prompt: Prompt, out: Generation, latency: float) -> dict:
    fields = _example_fields(example, ds)
    head = {key: fields.pop(key) for key in ("id", "example_sha256", "dataset", "question")}
    record = {**head, "pred": out.text, **fields, "prompt_tokens": prompt.n_tokens,
              "prompt_sha256": _prompt_sha256(prompt),
              "truncated_tokens": prompt.truncated_tokens, "truncation": prompt.truncation,
              "gen_tokens": out.n_tokens, "finish_reason": out.finish_reason,
              "latency_s": round(latency, 4), "batch_size": out.batch_size}
    for key, value in (("skipped", prompt.skipped), ("thinking", out.thinking),
                       ("server_usage", out.server_usage), ("error", out.error)):
        if value:
            record[key] = value
    return record


def generate_outputs(model: BaseLLM, prompts: list[Prompt], max_new: int,
                     stop: tuple) -> list[Generation]:
    """A Generation per prompt; a skipped one (--truncation skip) is not run."""
    run = [p for p in prompts if not p.skipped]
    outputs = iter(model.generate(run, max_new, stop) if run else [])
    return [Generation("", 0, "skipped") if p.skipped else next(outputs) for p in prompts]


# options added later count only when set, so files written before them resume
_LATER = {"think_tags": ("<think>", "</think>"), "thinking_budget": None, "reasoning": False}


def run_fingerprint(options, ds: Dataset, max_length: int | None, max_new_tokens: int,
                    truncation: str) -> dict:
    options = {k: v for k, v in dataclasses.asdict(options).items()
               if k not in _LATER or v != _LATER[k]}
    fingerprint = {"template_sha256": ds.template_hash, "chat": ds.task.chat,
                   "max_length": max_length, "max_new_tokens": max_new_tokens, "options": options}
    if truncation != "middle":  # the default adds nothing: files from before policies resume
        fingerprint["truncation"] = truncation
    fingerprint.update(task_settings(ds))
    if ds.cot:
        fingerprint["cot"] = {kind: t.sha256 for kind, t in ds.templates.items()} | {
            "max_new_tokens": ds.task.cot_max_new_tokens}
    return fingerprint


def _count(records: list[dict]) -> dict:
    cut = sum(1 for r in records if r["truncated_tokens"] or r.get("cot_truncated_tokens"))
    return {**batch_counts(records), "truncated": cut,
            "skipped": sum(1 for r in records if r.get("skipped"))}


def generation_budget(model: BaseLLM, ds: Dataset, settings: RunSettings) -> tuple:
    """(max new tokens, max length, template kind and generation length of the first pass)."""
    max_new = settings.max_new_tokens or ds.task.max_new_tokens
    first = ("cot", ds.task.cot_max_new_tokens) if ds.cot else ("answer", max_new)
    return max_new, settings.max_length or model.context_window(), *first


def required_examples(ds: Dataset, limit: int | None) -> list[Example]:
    """The examples a run must finish: all, or the first `limit` with their perturbed copies."""
    return ds.examples[:limit * (1 + ds.copies)] if limit else ds.examples


def examples_done(ds: Dataset, out_dir: Path, limit: int | None) -> tuple[int, int]:
    """(required examples with a good record of their current content, required examples)."""
    required = [e.id for e in required_examples(ds, limit)]
    return records_done(out_dir / f"{ds.name}.jsonl", ds.expected(), required), len(required)


def task_settings(ds: Dataset) -> dict:
    """The dataset's pred.py fill, model2maxlen cut and row stop strings, if used (else {})."""
    settings = {"prompt_limit": ds.prompt_limit} if ds.prompt_limit else {}
    if any(t.dollar_text is not None for t in ds.templates.values()):
        settings["fill"] = "pred.py"
    if ds.task.stop:
        settings["stop"] = list(ds.task.stop)
    return settings


def dataset_prompts(model: BaseLLM, ds: Dataset, examples: list[Example], max_new: int,
                    max_length: int | None, truncation: str = "middle", kind: str = "answer",
                    extras: list[dict] | None = None) -> list[Prompt]:
    """The template of `kind` filled, cut to model2maxlen, then truncated and chat-wrapped."""
    extras = extras or [{}] * len(examples)
    texts = [ds.fill(e, kind, **extra) for e, extra in zip(examples, extras)]
    cuts = [cut_to_prompt_limit(model, ds, t) for t in texts]
    prompts = model.build_prompts([t for t, _ in cuts], ds.task.chat, max_new, max_length,
                                  truncation)
    for prompt, (_, cut) in zip(prompts, cuts):
        prompt.truncated_tokens += cut
    return prompts


def _sidecar(model: BaseLLM, ds: Dataset, path: Path, settings: RunSettings,
             request: dict | None) -> dict:
    data = {"path": os.path.abspath(ds.path), "file_sha256": ds.file_sha256,
            "examples": len(ds.examples), "digest": ds.digest(), "limit": settings.limit}
    if ds.copies:  # --perturb: copies are counted in `examples` (eval.py words its coverage)
        data["copies"] = ds.copies
    templates = {kind: {"source": t.source, "sha256": t.sha256} for kind, t in ds.templates.items()}
    return {"dataset": ds.name, "kind": "predictions", "file": str(path),
            "task": dataclasses.asdict(ds.task),
            "source": {"path": str(ds.path), "examples": len(ds.examples),
                       "template": ds.template_source, "template_sha256": ds.template_hash,
                       "form": ds.form, "templates": templates},
            "data": data, "model": model.identity(), "settings": dataclasses.asdict(settings),
            "request": request}


def run_dataset(model: BaseLLM, ds: Dataset, out_dir: Path, settings: RunSettings,
                on_saved: Callable[[int], None] | None = None, budget: TokenBudget | None = None,
                request: dict | None = None) -> dict:
    path = out_dir / f"{ds.name}.jsonl"
    max_new, max_length, kind, first_max = generation_budget(model, ds, settings)
    examples = {e.id: e for e in ds.examples}
    prompts: dict[str, Prompt] = {}
    kept: dict[str, dict] = {}  # a record of this model whose example changed, not its prompt

    def plan(todo: list[str], old: dict[str, dict]) -> list[list[str]]:
        built = dataset_prompts(model, ds, [examples[i] for i in todo], first_max, max_length,
                                settings.truncation, kind)
        prompts.update(zip(todo, built))  # an old record's settings were checked: kept if it holds
        kept.update({i: old[i] for i in todo if i in old and old[i].get("error") is None
                     and old[i].get("model_sha256") == model_sha256
                     and old[i].get("prompt_sha256") == _prompt_sha256(prompts[i])})
        run = [i for i in todo if i not in kept]
        order = plan_batches([prompts[i].n_tokens for i in run], settings.batch_size,
                             settings.max_batch_tokens, model.max_pad_fraction)
        return ([list(kept)] if kept else []) + [[run[k] for k in batch] for batch in order]

    def process(batch: list[str]) -> list[dict]:
        if batch[0] in kept:  # the same prompt, model and settings: the same output, new references
            return [{**kept[i], **_example_fields(examples[i], ds)} for i in batch]
        t0 = time.perf_counter()
        firsts = [prompts[i] for i in batch]
        if ds.cot:  # cot.py builds on this module: imported where it is used
            from Eval.inference.cot import generate_with_cot
            done = generate_with_cot(model, ds, [examples[i] for i in batch], firsts, settings,
                                     max_new, max_length)
        else:
            outputs = generate_outputs(model, firsts, max_new, ds.task.stop)
            done = [(p, out, {}) for p, out in zip(firsts, outputs)]
        latency = (time.perf_counter() - t0) / len(batch)
        return [{**_record(examples[i], ds, prompt, out, latency), **extra}
                for i, (prompt, out, extra) in zip(batch, done)]

    def bound(batch: list[str]) -> int:
        # under --cot the answer pass quotes outputs not made yet: the whole window a row
        run = [prompts[i] for i in batch if not prompts[i].skipped and i not in kept]
        return sum(p.n_tokens + first_max + ((max_length or 0) if ds.cot else 0) for p in run)

    def tally(records: list[dict]) -> dict:  # a kept record spent nothing in this run
        return {**_count([r for r in records if r["id"] not in kept]),
                "references_updated": sum(r["id"] in kept for r in records)}

    model_sha256 = model_digest(model.fingerprint())  # first: a served model's id is asked here
    job = Job(path, ds.expected(),
              [e.id for e in required_examples(ds, settings.limit)],
              run_fingerprint(model.options, ds, max_length, max_new, settings.truncation),
              _sidecar(model, ds, path, settings, request), ds.name, settings.overwrite,
              settings.shard_id, settings.num_shards, settings.merge, tally=tally,
              on_saved=on_saved, budget=budget, bound=bound, model_sha256=model_sha256)
    return run_job(job, plan, process)
