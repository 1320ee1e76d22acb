"""What a model's identity costs (Eval/models/identity.py): hashing every file of a multi-GB checkpoint the first
time, and the cached check of a rerun, beside the time to load the same checkpoint, in one run.

The checkpoint is bench/scale_model.py's Qwen2.5-1.5B shape in bfloat16 (random weights, about 2.6 GB; built
into the git-ignored bench/.models/ once). Before each cold measurement every file is dropped from the page cache
(posix_fadvise DONTNEED, no root needed), so the first hash and the cold load both read from disk.

Usage:
    python bench/bench_identity.py            # about 2.6 GB checkpoint: first hash, cached check, model load
    python bench/bench_identity.py --quick    # the tiny shape, in seconds (tests/test_bench.py runs this)
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "bench")]

from scale_model import build  # noqa: E402
from Eval.models import identity  # noqa: E402


def drop_page_cache(folder: Path) -> None:
    for path in folder.iterdir():
        if path.is_file():
            fd = os.open(path, os.O_RDONLY)
            try:
                os.fsync(fd)
                os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
            finally:
                os.close(fd)


def timed(fn):
    start = time.perf_counter()
    value = fn()
    return time.perf_counter() - start, value


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--quick", action="store_true", help="the tiny shape: the same code in seconds")
    args = p.parse_args()
    size, dtype = ("tiny", "float32") if args.quick else ("1.5b", "bfloat16")
    folder = build(size, dtype=dtype)
    gigabytes = sum(f.stat().st_size for f in folder.iterdir() if f.is_file()) / 1e9
    with tempfile.TemporaryDirectory() as cache:
        os.environ["EVAL_HASH_CACHE"] = os.path.join(cache, "file-hashes.json")
        drop_page_cache(folder)
        first, ident = timed(lambda: identity.folder_identity(folder))
        cached, again = timed(lambda: identity.folder_identity(folder))
    assert again == ident
    import torch
    from transformers import AutoModelForCausalLM

    drop_page_cache(folder)
    load, _ = timed(lambda: AutoModelForCausalLM.from_pretrained(folder, dtype=getattr(torch, dtype)))
    files = len(ident["files"])
    print(f"checkpoint: {folder} ({size} shape, {dtype}), {files} files, {gigabytes:.2f} GB")
    print(f"identity, first run (every file read and hashed): {first:8.3f} s  ({gigabytes / first:.2f} GB/s)")
    print(f"identity, cached (one stat per file):              {cached:8.4f} s")
    print(f"model load from disk (from_pretrained):            {load:8.3f} s")
    print(f"ratio first / load: {first / load:.2f}x; cached / load: {cached / load:.5f}x; "
          f"first / cached: {first / cached:.0f}x")


if __name__ == "__main__":
    main()
