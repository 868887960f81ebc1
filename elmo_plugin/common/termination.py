"""
A SIGTERM that cannot be lost on the way (docs/implementation.md, "SIGTERM and failed writes"):
AllenNLP's `SigTermReceived`, raised wherever the main thread is, may be swallowed there, so the
commands run under `watch_sigterm`, which records it, and `raise_if_terminated` raises it again
where nobody swallows it: between batches, and before an output takes its final name.
"""
import contextlib
import signal
import sys
import threading
from typing import Iterator

from allennlp.common.util import SigTermReceived

# Whether a SIGTERM arrived while `watch_sigterm` was active.
_received = False


@contextlib.contextmanager
def watch_sigterm() -> Iterator[None]:
    """
    For the block: each SIGTERM is recorded, then handled as before (by AllenNLP's handler). Only
    in the main thread, and only over a handler that is a Python function (not the default
    action, which ends the process anyway, nor "ignore").
    """
    global _received
    previous = signal.getsignal(signal.SIGTERM)
    if threading.current_thread() is not threading.main_thread() or not callable(previous):
        yield
        return

    def record_then_handle(signum, frame):
        global _received
        _received = True
        previous(signum, frame)

    previous_unraisable_hook = sys.unraisablehook

    def recorded_not_printed(unraisable):
        # The signal's exception, raised where Python cannot raise (a finalizer, a weakref
        # callback): recorded above, so raise_if_terminated raises it again; no traceback.
        if not isinstance(unraisable.exc_value, SigTermReceived):
            previous_unraisable_hook(unraisable)

    _received = False
    signal.signal(signal.SIGTERM, record_then_handle)
    sys.unraisablehook = recorded_not_printed
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)
        sys.unraisablehook = previous_unraisable_hook
        _received = False


def raise_if_terminated() -> None:
    """Raises `SigTermReceived` if a SIGTERM arrived under `watch_sigterm`, even one swallowed."""
    if _received:
        raise SigTermReceived()
