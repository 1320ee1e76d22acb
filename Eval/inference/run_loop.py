"""Run one model over one dataset: prompts, length-sorted batches, records, content-aware resume, summary.

Usage:
    summary = run_dataset(model, dataset, out_dir=Path("pred/demo"), settings=RunSettings(...))
"""
from __future__ import annotations

import dataclasses
import os
import platform
import time
from datetime import datetime, timezone
from importlib import metadata
from pathlib import Path
from typing import Callable

from tqdm import tqdm

from Eval.inference.datasets import Dataset, Example
from Eval.models.base import BaseLLM, Generation, Prompt, plan_batches
from Eval.inference.predictions import PredictionFile, check_resume, merge_predictions, shard_path, sidecar_path, write_sidecar
from Eval.storage import OutputLock
from Eval.inference.templates import fill_template


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


def package_versions() -> dict:
    versions = {"python": platform.python_version()}
    for name in ("torch", "transformers", "tokenizers", "peft", "jieba"):
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            pass
    return versions


def _record(example: Example, ds: Dataset, prompt: Prompt, out: Generation, latency: float) -> dict:
    record = {"id": example.id, "example_sha256": example.sha256, "dataset": ds.name,
              "question": _question(example), "pred": out.text,
              "answers": example.answers,
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
    identity = model.identity()
    return {"model": {k: identity.get(k) for k in ("adapter", "path", "peft", "dtype", "weights_fingerprint",
                                                    "chat_template_sha256")},
            "template_sha256": ds.template_hash, "chat": ds.task.chat, "max_length": max_length,
            "max_new_tokens": max_new_tokens, "options": dataclasses.asdict(model.options)}


def run_dataset(model: BaseLLM, ds: Dataset, out_dir: Path, settings: RunSettings,
                on_saved: Callable[[int], None] | None = None) -> dict:
    """Generate every example of `ds` that has no current record; returns the run summary (also in the sidecar).

    Holds the output file's lock throughout, so a second process on the same file stops with a clear message.
    """
    path = out_dir / f"{ds.name}.jsonl"
    out_dir.mkdir(parents=True, exist_ok=True)
    write_path = path if settings.num_shards == 1 else shard_path(path, settings.shard_id, settings.num_shards)
    with OutputLock(write_path, "inference.py"):
        return _run_locked(model, ds, path, settings, on_saved or (lambda n: None))


def _run_locked(model: BaseLLM, ds: Dataset, path: Path, settings: RunSettings, on_saved) -> dict:
    max_new = settings.max_new_tokens or ds.task.max_new_tokens
    max_length = settings.max_length or model.context_window()
    fingerprint = _fingerprint(model, ds, max_length, max_new)
    if not settings.overwrite:
        check_resume(sidecar_path(path), fingerprint, path)
    expected = {e.id: e.sha256 for e in ds.examples}
    out = PredictionFile(path, settings.overwrite, settings.shard_id, settings.num_shards, expected)
    examples = ds.examples[: settings.limit] if settings.limit else ds.examples
    mine = examples[settings.shard_id::settings.num_shards]
    status = out.status([e.id for e in mine])
    todo = [e for e in mine if e.id not in out.done]
    # Prompts first: a budget the template cannot fit fails here, before a sidecar is written.
    prompts = model.build_prompts([fill_template(ds.template, e.fields) for e in todo], ds.task.chat,
                                  max_new, max_length)
    sidecar = {"dataset": ds.name, "file": str(path), "task": dataclasses.asdict(ds.task),
               "source": {"path": str(ds.path), "examples": len(ds.examples), "template": ds.template_source},
               "data": {"path": os.path.abspath(ds.path), "file_sha256": ds.file_sha256, "examples": len(ds.examples),
                        "digest": ds.digest(), "limit": settings.limit},
               "fingerprint": fingerprint, "model": model.identity(), "settings": dataclasses.asdict(settings),
               "versions": package_versions(), "output": None, "summary": None}
    if settings.shard_id == 0:  # before the first record, so a killed run can be checked too
        write_sidecar(sidecar_path(path), sidecar)
    started = time.perf_counter()
    stats = _generate_all(model, ds, out, todo, prompts, max_new, settings, on_saved)
    merged = settings.merge and merge_predictions(path, [e.id for e in ds.examples], [e.id for e in examples],
                                                  expected)
    summary = {**stats, "skipped_done": status["done"], "new": status["new"], "changed_redone": status["changed"],
               "failed_redone": status["failed"], "removed": merged["dropped"] if merged else 0,
               "shard": f"{settings.shard_id}-of-{settings.num_shards}",
               "seconds": round(time.perf_counter() - started, 2), "complete": bool(merged),
               "torn_line_repaired": out.torn_line_repaired}
    sidecar.update(summary=summary, finished_at=datetime.now(timezone.utc).isoformat(timespec="seconds"),
                   output={"records": merged["records"], "digest": merged["digest"]} if merged else None)
    if settings.shard_id == 0 or merged:
        write_sidecar(sidecar_path(path), sidecar)
    return summary


def _generate_all(model: BaseLLM, ds: Dataset, out: PredictionFile, todo: list[Example], prompts: list[Prompt],
                  max_new: int, settings: RunSettings, on_saved: Callable[[int], None]) -> dict:
    """Length-sorted batches through the model, each appended (and flushed) as soon as it is done."""
    batches = plan_batches([p.n_tokens for p in prompts], settings.batch_size, settings.max_batch_tokens,
                           model.max_pad_fraction)
    stats = {"examples": 0, "gen_tokens": 0, "truncated": 0, "failed": 0}
    started = time.perf_counter()
    with tqdm(total=len(todo), desc=ds.name, unit="ex", disable=not todo) as bar:
        for batch in batches:
            t0 = time.perf_counter()
            outputs = model.generate([prompts[i] for i in batch], max_new, ds.task.stop)
            latency = (time.perf_counter() - t0) / len(batch)
            records = [_record(todo[i], ds, prompts[i], o, latency) for i, o in zip(batch, outputs)]
            out.append(records)
            on_saved(len(records))
            _count(stats, records)
            bar.update(len(batch))
            elapsed = time.perf_counter() - started
            bar.set_postfix(ex_s=f"{stats['examples'] / elapsed:.2f}", tok_s=f"{stats['gen_tokens'] / elapsed:.1f}")
    return stats


def _count(stats: dict, records: list[dict]) -> None:
    stats["examples"] += len(records)
    stats["gen_tokens"] += sum(r["gen_tokens"] for r in records)
    stats["truncated"] += sum(1 for r in records if r["truncated_tokens"])
    stats["failed"] += sum(1 for r in records if r.get("error"))
