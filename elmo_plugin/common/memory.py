"""
glibc's malloc, tuned for the two workloads of this plugin: embedding long inputs (hand freed
memory back after every batch, so that memory stays flat) and training (keep freed memory for the
next step, so that the kernel does not have to fault in and zero gigabytes of pages per step).
Both are no-ops where glibc is not the allocator (macOS, musl).
"""
import ctypes
import logging
from typing import Optional

logger = logging.getLogger(__name__)

try:
    _LIBC: Optional[ctypes.CDLL] = ctypes.CDLL("libc.so.6")
    _LIBC.malloc_trim  # noqa: B018  (musl has a libc.so.6 shim without it)
    _LIBC.mallopt  # noqa: B018
except (OSError, AttributeError):
    _LIBC = None

# mallopt parameters, from glibc's malloc.h.
_M_TRIM_THRESHOLD = -1
_M_TOP_PAD = -2
_M_MMAP_MAX = -4


def release_freed_memory() -> None:
    """
    Hands memory that has been freed back to the operating system (glibc's ``malloc_trim``):
    batches sorted by length give tensors of ever-different shapes, whose freed blocks glibc
    would keep, so that the resident memory of ``allennlp elmo`` grew with the input.
    """
    if _LIBC is not None:
        _LIBC.malloc_trim(0)


def keep_freed_memory_for_reuse() -> bool:
    """
    Makes glibc serve every allocation from its heap and keep what is freed there: by default it
    maps each large block afresh and unmaps it when freed, so the kernel faults in and zeroes
    the pages of a training step's activations and gradients on every step
    (docs/implementation.md). Process-wide. Returns whether it was applied (False where glibc is
    not the allocator).
    """
    if _LIBC is None:
        return False
    applied = (
        _LIBC.mallopt(_M_MMAP_MAX, 0) == 1  # no mmap: large blocks come from the heap too
        and _LIBC.mallopt(_M_TRIM_THRESHOLD, 2**31 - 1) == 1  # never trim the heap's top
        and _LIBC.mallopt(_M_TOP_PAD, 256 * 1024 * 1024) == 1  # grow the heap in big steps
    )
    if not applied:
        logger.warning("glibc refused the malloc settings for training; leaving the defaults")
    return applied
