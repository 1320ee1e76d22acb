"""The one run loop (predict.py, score_records.py): lock, resume, plan, batches, merge, summary.

Usage:
    job = Job(path, expected={id: content_hash}, required=[ids], fingerprint={...}, sidecar={...})
    summary = run_job(job, plan=lambda todo, records: [[id, ...], ...], process=lambda batch: [...])
"""

import contextlib
import dataclasses
import hashlib
import json
import platform
import signal
import threading
import time
from datetime import datetime, timezone
from importlib import metadata
from pathlib import Path
from typing import Callable

from tqdm import tqdm

from Eval.inference.budget import TokenBudget
from Eval.inference.predictions import (PredictionFile, check_resume, file_entry,
                                        merge_predictions, output_entry, read_sidecar, write_path)
from Eval.models.identity import changed_files
from Eval.pricing import add_counts, tokens_per_s
from Eval.records import sidecar_path
from Eval.storage import output_lock, write_json_atomic

FIRST_CAUSES = 3  # distinct errors of failed records a summary counts and the console shows


@dataclasses.dataclass
class Job:
    path: Path  # the main output file, OUT/<model>/<name>.jsonl
    expected: dict[str, str]  # id -> content hash of every item of the data, in data order
    required: list[str]  # the ids this run must finish (all, or the first --limit ones)
    fingerprint: dict  # what a resumed file must have been made with
    sidecar: dict  # everything else the run sidecar records
    description: str = ""  # the progress bar's label
    overwrite: bool = False
    shard_id: int = 0  # this process does the required ids whose position % num_shards == shard_id
    num_shards: int = 1
    merge: bool = True  # merge into the main file when done (torchrun: rank 0, after a barrier)
    tally: Callable[[list[dict]], dict] | None = None  # extra counts per batch (tokens, ...)
    on_saved: Callable[[int], None] | None = None  # told how many records each batch saved
    budget: TokenBudget | None = None  # charged with the tally's prompt + generated tokens
    bound: Callable[[list[str]], int] | None = None  # the most tokens a batch can spend
    model_sha256: str | None = None  # on every record: another model's (changed in place) is redone


@contextlib.contextmanager
def _deferred_interrupt():
    """Hold Ctrl-C until the block ends. The handler is swapped, not the signal masked: a SIGINT
    already pending in Python is caught too, and handed to the previous handler afterwards."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    arrived = []
    previous = signal.signal(signal.SIGINT, lambda signum, frame: arrived.append(frame))
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
        if arrived and callable(previous):
            previous(signal.SIGINT, arrived[0])


def model_digest(fingerprint: dict) -> str:
    text = json.dumps(fingerprint, sort_keys=True, ensure_ascii=False, default=str)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


def package_versions() -> dict:
    versions = {"python": platform.python_version()}
    for name in ("torch", "transformers", "tokenizers", "peft", "jieba"):
        with contextlib.suppress(metadata.PackageNotFoundError):
            versions[name] = metadata.version(name)
    return versions


def run_job(job: Job, plan: Callable[[list[str], dict[str, dict]], list[list[str]]],
            process: Callable[[list[str]], list[dict]]) -> dict:
    """Run every required id of `job` that has no current record; returns the summary."""
    job.path.parent.mkdir(parents=True, exist_ok=True)
    with output_lock(write_path(job.path, job.shard_id, job.num_shards), "inference.py"):
        edited = not job.overwrite and check_resume(job.path, job.fingerprint,
                                                    job.sidecar.get("model"))
        out = PredictionFile(job.path, job.overwrite, job.shard_id, job.num_shards, job.expected,
                             job.model_sha256)
        mine = job.required[job.shard_id::job.num_shards]
        status = out.status(mine)
        batches = plan([i for i in mine if i not in out.done], out.records)  # may refuse
        model_changes = _model_changes(job.path, job.sidecar) if status["model_changed"] else []
        sidecar = {**job.sidecar, "fingerprint": job.fingerprint, "model_sha256": job.model_sha256,
                   "versions": package_versions(), "output": None, "summary": None}
        if edited:  # stays said until --overwrite: eval.py marks the file "modified"
            sidecar["edited_after_run"] = True
        # before the first record, so a killed run can be checked too; another shard's beside its
        # own file (one writer per file): its settings bind a later run as shard 0's do
        write_json_atomic(sidecar_path(out.write_path if job.shard_id else job.path), sidecar)
        started = time.perf_counter()
        # a single process stopped (Ctrl-C, the budget) vouches for what it saved: an edit made
        # before the resume is then seen, and eval.py marks the file partial
        single = job.num_shards == 1
        try:
            stats = _process_all(job, out, batches, process)
        except KeyboardInterrupt:
            if single:
                sidecar["output"] = file_entry(job.path)
                write_json_atomic(sidecar_path(job.path), sidecar)
            raise
        stopped = stats.pop("stopped", None)  # stopped by the budget: left unmerged
        merged = job.merge and not stopped and merge_predictions(
            job.path, list(job.expected), job.required, job.expected, job.model_sha256) or {}
        elapsed = time.perf_counter() - started  # the rate of a run under 0.005 s: from this
        seconds = round(elapsed, 2)
        if "gen_tokens" in stats:  # a generating job: its tokens per second in this invocation
            stats["tokens_per_s"] = tokens_per_s(stats["gen_tokens"], seconds or elapsed)
        if stopped:
            budget = {"max_total_tokens": job.budget.limit, "spent": job.budget.spent}
            stats.update(stopped=stopped, token_budget=budget)
        summary = {**stats, "skipped_done": status["done"], "new": status["new"],
                   "changed_redone": status["changed"], "failed_redone": status["failed"],
                   "model_changed_redone": status["model_changed"],
                   **{k: merged.get(k, 0) for k in ("removed", "unselected", "outdated")},
                   "model_changes": model_changes, "shard": f"{job.shard_id}-of-{job.num_shards}",
                   "seconds": seconds, "complete": bool(merged),
                   "torn_line_repaired": out.torn_line_repaired}
        sidecar.update(summary=summary, output=output_entry(merged) if merged else
                       file_entry(job.path) if stopped and single else None,
                       finished_at=datetime.now(timezone.utc).isoformat(timespec="seconds"))
        if job.shard_id == 0 or merged:
            write_json_atomic(sidecar_path(job.path), sidecar)
        return summary


def _model_changes(path: Path, new: dict) -> list[str]:
    """What changed in the model since the sidecar's run: files, else identity fields."""
    old, changes = read_sidecar(path), []
    for key in ("model", "reference_model"):
        before, after = old.get(key), new.get(key)
        if not isinstance(before, dict) or not isinstance(after, dict):
            continue
        for files in ("files", "peft_files", "tokenizer_files"):
            changes += changed_files(before.get(files) or {}, after.get(files) or {})
        changes += [k for k in ("adapter", "dtype", "base_url", "api_model", "server_model")
                    if before.get(k) != after.get(k)]
    return changes


def _process_all(job: Job, out: PredictionFile, batches: list[list[str]], process) -> dict:
    # the tally's zeros first, so a rerun with nothing left to do still states what it spent
    stats: dict = {"examples": 0, "failed": 0, **(job.tally([]) if job.tally else {})}
    started, total = time.perf_counter(), sum(len(b) for b in batches)
    queue = list(batches)
    with tqdm(total=total, desc=job.description, unit="ex", disable=not total) as bar:
        while queue:
            batch = queue.pop(0)
            if job.budget is not None:
                fits = job.budget.fitting(batch, job.bound)  # before it runs: never overshot
                if not fits:
                    job.budget.stopped = True
                    stats["stopped"] = "token budget"
                    break
                if len(fits) < len(batch):  # the rest waits: the budget left may still fit it
                    batch, queue = fits, [batch[len(fits):], *queue]
            records = process(batch)
            for record in records:
                record["example_sha256"] = job.expected[record["id"]]
                if job.model_sha256 is not None:
                    record["model_sha256"] = job.model_sha256
            with _deferred_interrupt():  # saved and counted together: Ctrl-C reports what was saved
                out.append(records)
                if job.on_saved:
                    job.on_saved(len(records))
            counts = job.tally(records) if job.tally else {}
            failed = sum(1 for r in records if r.get("error"))
            add_counts(stats, {"examples": len(records), "failed": failed, **counts})
            for error in (r["error"] for r in records if r.get("error")):
                causes = stats.setdefault("failure_causes", {})
                if error in causes or len(causes) < FIRST_CAUSES:
                    causes[error] = causes.get(error, 0) + 1
            if job.budget is not None:
                job.budget.charge(counts)
            bar.update(len(batch))
            bar.set_postfix(ex_s=f"{stats['examples'] / (time.perf_counter() - started):.2f}")
    return stats
