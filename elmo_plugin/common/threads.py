"""
How many intra-op threads a command uses: the cores that are idle when it starts, unless
``OMP_NUM_THREADS`` says (docs/implementation.md, "Threads").
"""
import math
import os
import time
from typing import Dict, Iterable, Optional, Tuple

import torch

PROC_STAT = "/proc/stat"
# How long `busy_cores` watches the cores.
SAMPLE_SECONDS = 0.25
# A core counts as taken by others from this much busy time on (a quarter of a core is
# noise: the shell, a terminal, this process's own start).
BUSY_THRESHOLD = 0.25

# PyTorch's own choice (one thread per physical core), the most `use_idle_cores` gives.
_DEFAULT_THREADS = torch.get_num_threads()


def usable_cores() -> int:
    """The cores this process may run on (its CPU affinity, e.g. a container's cpuset)."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def cpu_times(path: str = PROC_STAT) -> Dict[int, Tuple[int, int]]:
    """Per core of ``/proc/stat``: (idle ticks, all ticks) since boot; idle includes iowait."""
    times = {}
    try:
        with open(path, encoding="ascii") as stat:
            for line in stat:
                name, *fields = line.split()
                if not name.startswith("cpu") or name == "cpu":
                    continue
                ticks = [int(value) for value in fields[:8]]
                times[int(name[3:])] = (ticks[3] + ticks[4], sum(ticks))
    except (OSError, ValueError, IndexError):
        return {}
    return times


def busy_share(before: Dict[int, Tuple[int, int]], after: Dict[int, Tuple[int, int]],
               cores: Iterable[int]) -> float:
    """The busy cores (a sum of busy shares) between two `cpu_times` readings, over ``cores``."""
    busy = 0.0
    for core in cores:
        if core not in before or core not in after:
            continue
        idle = after[core][0] - before[core][0]
        total = after[core][1] - before[core][1]
        if total > 0:
            busy += 1.0 - idle / total
    return busy


def busy_cores(sample_seconds: float = SAMPLE_SECONDS) -> Optional[float]:
    """How many of this process's cores other work keeps busy now (None where ``/proc/stat`` cannot
    be read); this process sleeps while it watches."""
    try:
        cores = sorted(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return None
    before = cpu_times()
    if not before:
        return None
    time.sleep(sample_seconds)
    return busy_share(before, cpu_times(), cores)


def threads_for_load(cores: int, busy: float) -> int:
    """The threads for ``cores`` of which ``busy`` are taken: the idle ones, at least one."""
    taken = max(0, math.ceil(busy - BUSY_THRESHOLD))
    return max(1, cores - taken)


def threads_from_environment() -> Optional[int]:
    """``OMP_NUM_THREADS`` where it is set to a positive number, else None."""
    try:
        threads = int(os.environ.get("OMP_NUM_THREADS", "").strip())
    except ValueError:
        return None
    return threads if threads > 0 else None


def use_idle_cores() -> int:
    """Sets PyTorch's intra-op threads to the cores left idle by other work, unless
    ``OMP_NUM_THREADS`` says how many; returns the number of threads in use."""
    if threads_from_environment() is not None:
        return torch.get_num_threads()
    busy = busy_cores()
    if busy is None:
        return torch.get_num_threads()
    threads = min(_DEFAULT_THREADS, threads_for_load(usable_cores(), busy))
    torch.set_num_threads(threads)
    return threads
