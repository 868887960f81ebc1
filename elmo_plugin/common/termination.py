"""
An interruption that cannot be lost on the way (docs/implementation.md, "SIGTERM and failed
writes"): the exception of Ctrl-C (`KeyboardInterrupt`) or of SIGTERM (AllenNLP's
`SigTermReceived`), raised wherever the main thread is, may be swallowed there, so the commands
run under `watch_interruptions`, which records the signal, and `raise_if_interrupted` raises it
again where nobody swallows it: between batches, and before an output takes its final name.
"""
import contextlib
import signal
import sys
import threading
from typing import Iterator, Optional, Type

from allennlp.common.util import SigTermReceived

_EXCEPTIONS = {signal.SIGINT: KeyboardInterrupt, signal.SIGTERM: SigTermReceived}

# The exception of the first signal that arrived while `watch_interruptions` was active.
_received: Optional[Type[BaseException]] = None


@contextlib.contextmanager
def watch_interruptions() -> Iterator[None]:
    """
    For the block: each SIGINT and SIGTERM is recorded, then handled as before (Python's
    `KeyboardInterrupt`, AllenNLP's handler). Only in the main thread, and only over a handler
    that is a Python function (not the default action, which ends the process anyway, nor
    "ignore", as under ``nohup``).
    """
    global _received
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {signum: signal.getsignal(signum) for signum in _EXCEPTIONS}
    watched = [signum for signum, handler in previous.items() if callable(handler)]
    hidden = tuple(_EXCEPTIONS[signum] for signum in watched)

    def record_then_handle(signum, frame):
        global _received
        _received = _received or _EXCEPTIONS[signum]
        previous[signum](signum, frame)

    previous_unraisable_hook = sys.unraisablehook

    def recorded_not_printed(unraisable):
        # The signal's exception, raised where Python cannot raise (a finalizer, a weakref
        # callback): recorded above, so raise_if_interrupted raises it again; no traceback.
        if not isinstance(unraisable.exc_value, hidden):
            previous_unraisable_hook(unraisable)

    _received = None
    for signum in watched:
        signal.signal(signum, record_then_handle)
    sys.unraisablehook = recorded_not_printed
    try:
        yield
    finally:
        for signum in watched:
            signal.signal(signum, previous[signum])
        sys.unraisablehook = previous_unraisable_hook
        _received = None


def raise_if_interrupted() -> None:
    """Raises the exception of a Ctrl-C or SIGTERM received under `watch_interruptions`, even one swallowed."""
    if _received is not None:
        raise _received()
