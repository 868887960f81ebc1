"""
How many intra-op threads the plugin's work runs on: one for a call of a few rows, else the cores
that other work leaves idle, re-read between calls and batches, unless ``OMP_NUM_THREADS`` or
`fix_threads` (``--threads``, ``threads=``) says (docs/implementation.md, "Threads").
"""
import math
import os
import time
from contextlib import contextmanager
from typing import Callable, Dict, Iterable, Iterator, Optional, Tuple

import torch

PROC_STAT = "/proc/stat"
# A core counts as taken by others from this much busy time on (a quarter of a core is
# noise: the shell, a terminal, this process's own start).
BUSY_THRESHOLD = 0.25
# How old a reading of the load may be before it is read again, between calls, never inside one.
WATCH_SECONDS = 1.0
# Calls of fewer rows (sentences) run on one thread: a second one gains little there, and under load
# it is the thread that waits (docs/implementation.md, "Threads").
ONE_THREAD_BELOW_ROWS = 8

CpuTimes = Dict[int, Tuple[int, int]]


def usable_cores() -> int:
    """The cores this process may run on (its CPU affinity, e.g. a container's cpuset)."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def cpu_times(path: str = PROC_STAT) -> CpuTimes:
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


def busy_share(before: CpuTimes, after: CpuTimes, cores: Iterable[int]) -> float:
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


class LoadWatch:
    """
    The cores of this process's affinity that other work keeps busy, without waiting: the busy
    time of those cores in ``/proc/stat`` since the last reading, less this process's own CPU
    time (its spinning threads included). A reading older than ``interval`` seconds is read again
    when asked; all cores count as idle where ``/proc/stat`` cannot be read.

    # Parameters

    interval : `float`, optional (default = `WATCH_SECONDS`)
    read_times, own_seconds, clock : `Callable`, optional
        `cpu_times`, this process's CPU seconds and a monotonic clock (fakes in the tests).
    cores : `Iterable[int]`, optional (default = this process's CPU affinity)
    """

    def __init__(
        self,
        interval: float = WATCH_SECONDS,
        read_times: Callable[[], CpuTimes] = cpu_times,
        own_seconds: Callable[[], float] = time.process_time,
        clock: Callable[[], float] = time.monotonic,
        cores: Optional[Iterable[int]] = None,
    ) -> None:
        if cores is None:
            try:
                cores = os.sched_getaffinity(0)
            except (AttributeError, OSError):
                cores = range(os.cpu_count() or 1)
        self.cores = sorted(cores)
        self.interval = interval
        self._read_times, self._own_seconds, self._clock = read_times, own_seconds, clock
        self._idle = len(self.cores)
        self._reading = (clock(), own_seconds(), read_times())

    def idle_cores(self) -> int:
        """The cores that others leave idle, at least one, as last read."""
        now = self._clock()
        then, own_then, times_then = self._reading
        if now - then < self.interval or now <= then:
            return self._idle
        own_now, times_now = self._own_seconds(), self._read_times()
        self._reading = (now, own_now, times_now)
        if times_then and times_now:
            own = (own_now - own_then) / (now - then)
            others = max(0.0, busy_share(times_then, times_now, self.cores) - own)
            self._idle = threads_for_load(len(self.cores), others)
        return self._idle


_WATCH = LoadWatch()
# Set by `fix_threads`: the automatic choice is off.
_FIXED: Optional[int] = None


def fix_threads(threads: Optional[int]) -> None:
    """``--threads``/``threads=``: this process's intra-op threads from now on, no automatic
    choice (None: no change)."""
    global _FIXED
    if threads is None:
        return
    if threads < 1:
        raise ValueError(f"threads must be at least 1, not {threads}")
    torch.set_num_threads(threads)
    _FIXED = threads


def automatic() -> bool:
    """Whether the plugin chooses the threads (neither `fix_threads` nor ``OMP_NUM_THREADS``)."""
    return _FIXED is None and threads_from_environment() is None


def threads_for_rows(rows: int, idle: int) -> int:
    """A call of ``rows`` sentences: one thread below `ONE_THREAD_BELOW_ROWS`, else ``idle``."""
    return 1 if rows < ONE_THREAD_BELOW_ROWS else idle


@contextmanager
def threads_for_call(rows: int, watch: Optional[LoadWatch] = None) -> Iterator[int]:
    """
    Runs an inference call of ``rows`` sentences on `threads_for_rows` threads, at most PyTorch's
    current number (which the caller's own ``torch.set_num_threads`` sets), and puts that number
    back after; yields the threads used. Nothing changes where the choice is not `automatic`.
    """
    before = torch.get_num_threads()
    threads = before
    if automatic():
        threads = min(before, threads_for_rows(rows, (watch or _WATCH).idle_cores()))
    if threads != before:
        torch.set_num_threads(threads)
    try:
        yield threads
    finally:
        if threads != before:
            torch.set_num_threads(before)


def follow_the_load(most: int, watch: Optional[LoadWatch] = None) -> int:
    """Between training batches: sets PyTorch's threads to the idle cores, at most ``most``, where
    the choice is `automatic`; returns the threads in use."""
    if automatic():
        threads = min(most, (watch or _WATCH).idle_cores())
        if threads != torch.get_num_threads():
            torch.set_num_threads(threads)
    return torch.get_num_threads()
