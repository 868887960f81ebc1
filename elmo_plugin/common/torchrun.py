"""
Processes launched by ``torchrun`` (``torch.distributed.run``): recognised by their environment,
and joining their process group. No launcher of our own: torchrun starts the processes.
"""
import datetime
import os
from dataclasses import dataclass
from typing import Optional

import torch
import torch.distributed as dist


@dataclass(frozen=True)
class TorchrunProcess:
    """This process's place among torchrun's: ``rank`` of ``world_size``, ``local_rank`` on
    its node (the GPU it uses, where there are GPUs)."""

    rank: int
    world_size: int
    local_rank: int

    @property
    def is_first(self) -> bool:
        return self.rank == 0


def torchrun_process() -> Optional[TorchrunProcess]:
    """This process's `TorchrunProcess` when torchrun started it, else ``None``."""
    if "WORLD_SIZE" not in os.environ or "RANK" not in os.environ:
        return None
    return TorchrunProcess(
        rank=int(os.environ["RANK"]),
        world_size=int(os.environ["WORLD_SIZE"]),
        local_rank=int(os.environ.get("LOCAL_RANK", "0")),
    )


def join_process_group(process: TorchrunProcess, use_gpu: bool, timeout_s: float = 1800.0) -> torch.device:
    """
    Joins torchrun's process group (``env://``): gloo on CPUs, NCCL on GPUs with the GPU
    ``LOCAL_RANK``; returns the device this rank computes on. ``timeout_s`` bounds every collective.
    """
    timeout = datetime.timedelta(seconds=timeout_s)
    if use_gpu:
        device = torch.device("cuda", process.local_rank)
        torch.cuda.set_device(device)
        dist.init_process_group("nccl", timeout=timeout, device_id=device)
        return device
    dist.init_process_group("gloo", timeout=timeout)
    return torch.device("cpu")


def leave_process_group() -> None:
    if dist.is_available() and dist.is_initialized():
        dist.destroy_process_group()
