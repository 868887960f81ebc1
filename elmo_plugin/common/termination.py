"""
A SIGTERM that cannot be lost on the way.

The ``allennlp`` command turns SIGTERM into AllenNLP's `SigTermReceived`, an exception raised
wherever the main thread happens to be when the signal arrives. Code that catches every
exception there (a library's ``except Exception``, a finalizer, a callback from C) swallows
it, and the command goes on to finish, write its output and exit 0, as if nobody had asked it to
stop. (Seen once in this project's CI, 2026-11-25: an ``allennlp elmo`` sent SIGTERM as it began
wrote all 5,000 sentences and exited 0; where the exception went was not found, and this holds
wherever it went. Seen again on 2026-11-25: the signal landed in a weakref callback, where Python
cannot raise, so the exception went to `sys.unraisablehook`, which printed its traceback.) So the
plugin's commands run their work under `watch_sigterm`, which also records the signal, and
`raise_if_terminated` raises it again where nobody swallows it: between batches, and before an
output takes its final name (`atomic_output`), so that an output never appears after a SIGTERM.
A `SigTermReceived` that Python could not raise (in a finalizer or a weakref callback) is not
printed either: it is recorded, and raised again there, so the command ends with its one line.

Outside a command (no `watch_sigterm` active) `raise_if_terminated` does nothing.
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
    For the block: each SIGTERM is recorded, then handled as before (by AllenNLP's handler,
    which raises `SigTermReceived`). Only in the main thread, and only over a handler that is a
    Python function (not the default action, which ends the process anyway, nor "ignore").
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
