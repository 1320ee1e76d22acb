"""torchrun ranks or independent --shard processes (example k to shard k % K), merged by id.

Usage: torchrun --nproc_per_node 4 inference.py --model PATH; inference.py --shard 3/8 --model PATH
"""

import argparse
import dataclasses
import os

from Eval.inference.predictions import PredictionFile


@dataclasses.dataclass(frozen=True)
class Shards:
    shard_id: int = 0
    num_shards: int = 1
    torchrun: bool = False  # launched by torchrun: ranks coordinate with barriers


def add_shard_argument(p: argparse.ArgumentParser) -> None:
    p.add_argument("--shard", type=shard_spec, default=None, metavar="I/K",
                   help="run shard I of K (0-based): every K-th example, merged by id (torchrun "
                        "sets it itself; default: one process)")


def shard_spec(text: str) -> tuple[int, int]:
    """--shard I/K: shard I of K, 0-based."""
    index, sep, count = text.partition("/")
    if not sep or not index.isdigit() or not count.isdigit() or not 0 <= int(index) < int(count):
        raise argparse.ArgumentTypeError(f"{text!r} is not I/K with 0 <= I < K (e.g. 0/4)")
    return int(index), int(count)


def resolve_shards(args) -> Shards:
    """torchrun's WORLD_SIZE / RANK when present, else --shard (I, K), else a single process;
    ValueError for the options that do not go with it."""
    shard, world = args.shard, int(os.environ.get("WORLD_SIZE", "1"))
    if world > 1:
        if shard and shard[1] != world:
            raise ValueError(f"--shard .../{shard[1]} contradicts torchrun's WORLD_SIZE {world}")
        shards = Shards(int(os.environ["RANK"]), world, torchrun=True)
    else:
        shards = Shards(*shard) if shard else Shards()
    if args.overwrite and shards.num_shards > 1 and not shards.torchrun:
        raise ValueError("--overwrite with independent shards would race; remove the output "
                         "folder instead")
    if args.max_total_tokens and shards.torchrun:  # a rank stopping alone leaves others waiting
        raise ValueError("--max-total-tokens counts one process's tokens; it does not go with "
                         "torchrun")
    return shards


def join(shards: Shards, backend_options):
    """Join torchrun's group; device "auto" becomes this rank's own GPU (LOCAL_RANK)."""
    if not shards.torchrun:
        return backend_options
    import torch
    import torch.distributed as dist

    if not dist.is_initialized():
        dist.init_process_group("nccl" if torch.cuda.is_available() else "gloo")
    if getattr(backend_options, "device", None) != "auto":
        return backend_options
    device = f"cuda:{os.environ.get('LOCAL_RANK', '0')}" if torch.cuda.is_available() else "cpu"
    return dataclasses.replace(backend_options, device=device)


def barrier(shards: Shards) -> None:
    if shards.torchrun:
        import torch.distributed as dist

        dist.barrier()


def clear_ranks_files(shards: Shards, path) -> None:
    """torchrun --overwrite: rank 0 removes the dataset's old files before any rank reads them."""
    if shards.shard_id == 0:
        PredictionFile(path, overwrite=True)
    barrier(shards)


def merge_ranks_files(shards: Shards, ds, out_dir, limit: int | None) -> None:
    """torchrun: once every rank has run the dataset `ds`, rank 0 merges their files."""
    barrier(shards)
    if shards.shard_id == 0:
        from Eval.inference.merge import merge_only  # merge.py -> runner.py -> this module

        merge_only([ds], out_dir, limit)


def finish(shards: Shards) -> None:
    if shards.torchrun:
        import torch.distributed as dist

        if dist.is_initialized():
            dist.destroy_process_group()
