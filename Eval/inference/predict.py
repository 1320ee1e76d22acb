"""The prediction run of one dataset: its examples as prompts, length-sorted batches through the model, one record
per example (the contract of Eval/records.py), through the shared run loop (Eval/inference/run_loop.py).

Usage:
    summary = run_dataset(model, dataset, out_dir=Path("pred/demo"), settings=RunSettings(...))

`generation_budget`, `required_examples` and `dataset_prompts` are the prompt side of a run, shared with
`inference.py --dry-run` (Eval/inference/dry_run.py) so that its prompts are the run's by construction.
"""
from __future__ import annotations

import dataclasses
import os
import time
from pathlib import Path
from typing import Callable

from Eval.inference.datasets import Dataset, Example
from Eval.inference.run_loop import Job, run_job
from Eval.inference.templates import fill_template
from Eval.models.base import BaseLLM, Generation, Prompt, plan_batches


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


def _record(example: Example, ds: Dataset, prompt: Prompt, out: Generation, latency: float) -> dict:
    record = {"id": example.id, "example_sha256": example.sha256, "dataset": ds.name,
              "question": _question(example), "pred": out.text, "answers": example.answers,
              "all_classes": example.all_classes, "length": example.length, "prompt_tokens": prompt.n_tokens,
              "truncated_tokens": prompt.truncated_tokens, "gen_tokens": out.n_tokens,
              "finish_reason": out.finish_reason, "latency_s": round(latency, 4), "batch_size": out.batch_size}
    if out.error:
        record["error"] = out.error
    return record


def _question(example: Example) -> str:
    # What a judge needs to see; the long context stays in the dataset file.
    parts = [example.fields.get("instruction"), example.fields.get("input")]
    return "\n".join(str(p) for p in parts if p)


def _fingerprint(model: BaseLLM, ds: Dataset, max_length: int | None, max_new_tokens: int) -> dict:
    return {"model": model.fingerprint(),
            "template_sha256": ds.template_hash, "chat": ds.task.chat, "max_length": max_length,
            "max_new_tokens": max_new_tokens, "options": dataclasses.asdict(model.options)}


def _count(records: list[dict]) -> dict:
    return {"gen_tokens": sum(r["gen_tokens"] for r in records),
            "truncated": sum(1 for r in records if r["truncated_tokens"])}


def generation_budget(model: BaseLLM, ds: Dataset, settings: RunSettings) -> tuple[int, int | None]:
    """(max new tokens, max length) for `ds`: the settings' overrides, else the task's and the model's own."""
    return settings.max_new_tokens or ds.task.max_new_tokens, settings.max_length or model.context_window()


def required_examples(ds: Dataset, limit: int | None) -> list[Example]:
    """The examples a run must finish: all, or the first `limit`, in data order."""
    return ds.examples[:limit] if limit else ds.examples


def dataset_prompts(model: BaseLLM, ds: Dataset, examples: list[Example], max_new: int,
                    max_length: int | None) -> list[Prompt]:
    """What the model sees for each example: the template filled, cut in the middle, chat-wrapped if the task is."""
    return model.build_prompts([fill_template(ds.template, e.fields) for e in examples], ds.task.chat, max_new,
                               max_length)


def run_dataset(model: BaseLLM, ds: Dataset, out_dir: Path, settings: RunSettings,
                on_saved: Callable[[int], None] | None = None) -> dict:
    """Generate every example of `ds` that has no current record; returns the run summary (also in the sidecar)."""
    path = out_dir / f"{ds.name}.jsonl"
    max_new, max_length = generation_budget(model, ds, settings)
    examples = {e.id: e for e in ds.examples}
    required = [e.id for e in required_examples(ds, settings.limit)]
    prompts: dict[str, Prompt] = {}

    def plan(todo: list[str]) -> list[list[str]]:
        built = dataset_prompts(model, ds, [examples[i] for i in todo], max_new, max_length)
        prompts.update(zip(todo, built))
        order = plan_batches([p.n_tokens for p in built], settings.batch_size, settings.max_batch_tokens,
                             model.max_pad_fraction)
        return [[todo[k] for k in batch] for batch in order]

    def process(batch: list[str]) -> list[dict]:
        t0 = time.perf_counter()
        outputs = model.generate([prompts[i] for i in batch], max_new, ds.task.stop)
        latency = (time.perf_counter() - t0) / len(batch)
        return [_record(examples[i], ds, prompts[i], out, latency) for i, out in zip(batch, outputs)]

    sidecar = {"dataset": ds.name, "kind": "predictions", "file": str(path), "task": dataclasses.asdict(ds.task),
               "source": {"path": str(ds.path), "examples": len(ds.examples), "template": ds.template_source},
               "data": {"path": os.path.abspath(ds.path), "file_sha256": ds.file_sha256, "examples": len(ds.examples),
                        "digest": ds.digest(), "limit": settings.limit},
               "model": model.identity(), "settings": dataclasses.asdict(settings)}
    job = Job(path, {e.id: e.sha256 for e in ds.examples}, required, _fingerprint(model, ds, max_length, max_new),
              sidecar, ds.name, settings.overwrite, settings.shard_id, settings.num_shards, settings.merge,
              tally=_count, on_saved=on_saved)
    return {"gen_tokens": 0, "truncated": 0, **run_job(job, plan, process)}
