"""Multi-process training support: the same command under ``torchrun`` uses DDP.

``torchrun --nproc_per_node N`` sets ``RANK``/``WORLD_SIZE``/``LOCAL_RANK``; then
:func:`setup` joins the process group (``gloo`` on CPU, ``nccl`` on GPU). Training
data is sharded with a ``DistributedSampler``; evaluation shards the indices, and
:func:`gather_outputs` collects every rank's predictions so all ranks compute the
metric on the whole split. Only rank 0 writes files.
"""
from __future__ import annotations

import os
from dataclasses import dataclass

import torch
import torch.distributed as dist
from torch import Tensor


@dataclass(frozen=True)
class DistContext:
    """Where this process sits in the job (``world_size == 1``: a plain process)."""

    rank: int = 0
    world_size: int = 1
    device: torch.device = torch.device("cpu")

    @property
    def is_main(self) -> bool:
        """Whether this process writes files and prints progress."""
        return self.rank == 0

    @property
    def distributed(self) -> bool:
        return self.world_size > 1


def setup(device: str) -> DistContext:
    """Joins the torchrun process group if there is one; resolves ``device``.

    Args:
        device: ``"auto"`` (CUDA when available), ``"cpu"``, ``"cuda"`` or ``"cuda:N"``.
    """
    world_size = int(os.environ.get("WORLD_SIZE", "1"))
    if device == "auto":
        device = "cuda" if torch.cuda.is_available() else "cpu"
    dev = torch.device(device)
    if world_size == 1:
        return DistContext(device=dev)
    rank, local_rank = int(os.environ["RANK"]), int(os.environ.get("LOCAL_RANK", "0"))
    if dev.type == "cuda":
        dev = torch.device("cuda", local_rank)
        torch.cuda.set_device(dev)
    if not dist.is_initialized():
        dist.init_process_group("nccl" if dev.type == "cuda" else "gloo")
    return DistContext(rank=rank, world_size=world_size, device=dev)


def teardown(ctx: DistContext) -> None:
    if ctx.distributed and dist.is_initialized():
        dist.destroy_process_group()


def shard(index: Tensor, ctx: DistContext) -> Tensor:
    """This rank's share of ``index`` (strided, no padding, so nothing is counted twice)."""
    return index[ctx.rank::ctx.world_size]


def gather_outputs(ctx: DistContext, *tensors: Tensor) -> tuple[Tensor, ...]:
    """Concatenates each tensor across ranks (rank order), on CPU; identity if not DDP."""
    local = [t.detach().cpu() for t in tensors]
    if not ctx.distributed:
        return tuple(local)
    gathered: list[list[Tensor]] = [None] * ctx.world_size  # type: ignore[list-item]
    dist.all_gather_object(gathered, local)
    return tuple(torch.cat([parts[i] for parts in gathered], dim=0) for i in range(len(local)))


def all_sum(ctx: DistContext, *values: float) -> list[float]:
    """Sums scalars across ranks."""
    if not ctx.distributed:
        return list(values)
    t = torch.tensor(values, dtype=torch.float64)
    if ctx.device.type == "cuda":
        t = t.to(ctx.device)
    dist.all_reduce(t)
    return t.cpu().tolist()


def barrier(ctx: DistContext) -> None:
    if ctx.distributed:
        dist.barrier()
