"""
glibc's malloc, tuned for embedding (freed memory handed back after every batch) and training
(freed memory kept for the next step); no-ops where glibc is not the allocator (macOS, musl).
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
    Hands freed memory back to the operating system (``malloc_trim``): batches sorted by length
    give tensors of ever-different shapes, whose freed blocks glibc would keep.
    """
    if _LIBC is not None:
        _LIBC.malloc_trim(0)


def keep_freed_memory_for_reuse() -> bool:
    """
    Makes glibc serve every allocation from its heap and keep what is freed there, instead of
    mapping each large block afresh for every training step (docs/implementation.md).
    Process-wide. Returns whether it was applied.
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
