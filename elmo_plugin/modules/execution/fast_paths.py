"""
Every fast path of this package beside the plain definition it must equal, declared with
`fast_path` (tests/modules/test_fast_paths.py runs every pair).
"""
from typing import Callable, Dict, NamedTuple


class FastPath(NamedTuple):
    """
    A fast path and its reference, which take the same arguments; ``gradients``: its gradients must
    equal too; ``full_batches``: only for batches without padding; ``time_major``: takes time-major
    input gates and a ``(time, batch)`` mask of running rows where the reference takes them packed.
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
