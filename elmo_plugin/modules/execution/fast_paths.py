"""
Every fast path of this package beside the plain definition it must equal, declared with
`fast_path` (tests/modules/test_fast_paths.py runs every pair).
"""
from typing import Callable, Dict, NamedTuple


class FastPath(NamedTuple):
    """
    A fast path and its reference, which take the same arguments; ``gradients``: a training path
    (its gradients must equal the reference's too); ``full_batches``: only for batches in which
    every row runs every step; ``time_major``: a recurrence over ``(time, batch, ...)`` input
    gates and a ``(time, batch)`` mask of the rows running, which the reference takes packed.
    """

    fast: Callable
    reference: Callable
    gradients: bool = False
    full_batches: bool = False
    time_major: bool = False


FAST_PATHS: Dict[str, FastPath] = {}


def fast_path(reference: Callable, **declared: bool) -> Callable[[Callable], Callable]:
    """Declares the decorated function a fast path of ``reference``; it names it, too."""

    def declare(function: Callable) -> Callable:
        name = f"{function.__module__}.{function.__qualname__}"
        FAST_PATHS[name] = FastPath(function, reference, **declared)
        function.reference = reference  # type: ignore[attr-defined]
        return function

    return declare
