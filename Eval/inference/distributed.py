"""Scale-out for inference: torchrun ranks or independent shard processes, merged by id.

    torchrun --nproc_per_node 4 inference.py --model PATH            # one process per GPU (or CPU core group)
    torchrun --nnodes 2 --node_rank R --master_addr HOST --nproc_per_node 8 inference.py --model PATH
    python inference.py --shard $SLURM_ARRAY_TASK_ID/8 --model PATH   # scheduler arrays, several machines
    python inference.py merge --model PATH                            # after independent shards, if needed

Example k of a dataset goes to shard k % num_shards. Each process appends to its own shard file; torchrun rank 0
merges after a barrier, independent shards merge as soon as one of them finds every id written (see
Eval/inference/predictions.py), and `inference.py merge` does it explicitly. Resume reads every shard file whatever the shard count was.
"""
from __future__ import annotations

import os
from dataclasses import dataclass


@dataclass(frozen=True)
class Shards:
    shard_id: int = 0
    num_shards: int = 1
    torchrun: bool = False  # launched by torchrun: ranks coordinate with barriers

    @property
    def is_first(self) -> bool:
        return self.shard_id == 0


def resolve_shards(num_shards: int | None, shard_id: int | None) -> Shards:
    """torchrun's WORLD_SIZE / RANK when present, else --shard I/K, else a single process."""
    world = int(os.environ.get("WORLD_SIZE", "1"))
    if world > 1:
        if num_shards not in (None, world):
            raise ValueError(f"--shard .../{num_shards} contradicts torchrun's WORLD_SIZE {world}")
        return Shards(int(os.environ["RANK"]), world, torchrun=True)
    count = num_shards or 1
    index = 0 if shard_id is None else shard_id
    if not 0 <= index < count:
        raise ValueError(f"--shard {index}/{count}: the shard is not in 0..{count - 1}")
    return Shards(index, count)


def init_process_group(shards: Shards) -> None:
    """Join torchrun's group (gloo on CPU, nccl on GPUs) so ranks can wait for each other."""
    if not shards.torchrun:
        return
    import torch
    import torch.distributed as dist

    if not dist.is_initialized():
        dist.init_process_group("nccl" if torch.cuda.is_available() else "gloo")


def barrier(shards: Shards) -> None:
    if shards.torchrun:
        import torch.distributed as dist

        dist.barrier()


def local_device(device: str, shards: Shards) -> str:
    """Under torchrun, `auto` means this rank's own GPU (LOCAL_RANK) when there are GPUs."""
    if device != "auto" or not shards.torchrun:
        return device
    import torch

    return f"cuda:{os.environ.get('LOCAL_RANK', '0')}" if torch.cuda.is_available() else "cpu"


def finish(shards: Shards) -> None:
    if shards.torchrun:
        import torch.distributed as dist

        if dist.is_initialized():
            dist.destroy_process_group()
