"""The one run loop of the inference stage: predictions (Eval/inference/predict.py) and TOFU / MUSE score records
(Eval/unlearning/inference.py) both run through `run_job`.

What it does for one output file: take the file's lock (one writer at a time), refuse to resume a file made with
other settings, see which items already have a current record (Eval/inference/predictions.py: content-aware
resume, shards), let the caller plan the rest into batches (before anything is written, so a plan that fails
writes nothing), write the sidecar, process batch after batch (each appended and flushed as soon as it is done,
with a progress bar), merge the files in data order, and record the summary in the sidecar.

Usage:
    job = Job(path, expected={id: content_hash, ...}, required=[ids this run must finish], fingerprint={...},
              sidecar={...}, description="custom_en")
    summary = run_job(job, plan=lambda todo: [[id, ...], ...], process=lambda batch: [record, ...])
"""
from __future__ import annotations

import contextlib
import dataclasses
import platform
import signal
import threading
import time
from collections import Counter
from datetime import datetime, timezone
from importlib import metadata
from pathlib import Path
from typing import Callable

from tqdm import tqdm

from Eval.inference.predictions import PredictionFile, check_resume, merge_predictions, shard_path
from Eval.records import sidecar_path
from Eval.storage import OutputLock, write_json_atomic


@dataclasses.dataclass
class Job:
    path: Path  # the main output file, OUT/<model>/<name>.jsonl
    expected: dict[str, str]  # id -> content hash of every item of the data, in data order
    required: list[str]  # the ids this run must finish (all, or the first --limit ones), in data order
    fingerprint: dict  # what a resumed file must have been made with
    sidecar: dict  # everything else the run sidecar records
    description: str = ""  # the progress bar's label
    overwrite: bool = False
    shard_id: int = 0  # this process handles the required ids whose position % num_shards == shard_id
    num_shards: int = 1
    merge: bool = True  # merge into the main file when done (torchrun: rank 0 does it after a barrier)
    tally: Callable[[list[dict]], dict] | None = None  # extra counts per batch (tokens, truncations, ...)
    on_saved: Callable[[int], None] | None = None  # told how many records each batch saved


@contextlib.contextmanager
def _deferred_interrupt():
    """Hold Ctrl-C (SIGINT) until the block ends, where the platform and thread allow it."""
    if not hasattr(signal, "pthread_sigmask") or threading.current_thread() is not threading.main_thread():
        yield
        return
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})


def package_versions() -> dict:
    versions = {"python": platform.python_version()}
    for name in ("torch", "transformers", "tokenizers", "peft", "jieba"):
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            pass
    return versions


def run_job(job: Job, plan: Callable[[list[str]], list[list[str]]],
            process: Callable[[list[str]], list[dict]]) -> dict:
    """Run every required id of `job` that has no current record; returns the summary (also in the sidecar)."""
    job.path.parent.mkdir(parents=True, exist_ok=True)
    write_path = job.path if job.num_shards == 1 else shard_path(job.path, job.shard_id, job.num_shards)
    with OutputLock(write_path, "inference.py"):
        if not job.overwrite:
            check_resume(sidecar_path(job.path), job.fingerprint, job.path)
        return _run_locked(job, plan, process)


def _run_locked(job: Job, plan, process) -> dict:
    out = PredictionFile(job.path, job.overwrite, job.shard_id, job.num_shards, job.expected)
    mine = job.required[job.shard_id::job.num_shards]
    status = out.status(mine)
    batches = plan([i for i in mine if i not in out.done])  # may refuse (a budget too small): nothing written yet
    sidecar = {**job.sidecar, "fingerprint": job.fingerprint, "versions": package_versions(), "output": None,
               "summary": None}
    if job.shard_id == 0:  # before the first record, so a killed run can be checked too
        write_json_atomic(sidecar_path(job.path), sidecar)
    started = time.perf_counter()
    stats = _process_all(job, out, batches, process)
    merged = job.merge and merge_predictions(job.path, list(job.expected), job.required, job.expected)
    summary = {**stats, "skipped_done": status["done"], "new": status["new"], "changed_redone": status["changed"],
               "failed_redone": status["failed"], "removed": merged["dropped"] if merged else 0,
               "shard": f"{job.shard_id}-of-{job.num_shards}", "seconds": round(time.perf_counter() - started, 2),
               "complete": bool(merged), "torn_line_repaired": out.torn_line_repaired}
    sidecar.update(summary=summary, finished_at=datetime.now(timezone.utc).isoformat(timespec="seconds"),
                   output={"records": merged["records"], "digest": merged["digest"]} if merged else None)
    if job.shard_id == 0 or merged:
        write_json_atomic(sidecar_path(job.path), sidecar)
    return summary


def _process_all(job: Job, out: PredictionFile, batches: list[list[str]], process) -> dict:
    stats = Counter(examples=0, failed=0)
    started, total = time.perf_counter(), sum(len(b) for b in batches)
    with tqdm(total=total, desc=job.description, unit="ex", disable=not total) as bar:
        for batch in batches:
            records = process(batch)
            for record in records:
                record["example_sha256"] = job.expected[record["id"]]
            with _deferred_interrupt():  # saved and counted together, so Ctrl-C reports exactly what was saved
                out.append(records)
                if job.on_saved:
                    job.on_saved(len(records))
            stats.update(examples=len(records), failed=sum(1 for r in records if r.get("error")))
            stats.update(job.tally(records) if job.tally else {})
            bar.update(len(batch))
            bar.set_postfix(ex_s=f"{stats['examples'] / (time.perf_counter() - started):.2f}")
    return dict(stats)
