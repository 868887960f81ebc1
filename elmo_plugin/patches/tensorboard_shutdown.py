"""
No "Exception ignored in atexit callback ... can't create new thread at interpreter shutdown"
from tensorboardX on Python 3.12 and newer.

AllenNLP's ``tensorboard`` trainer callback (the biLM configs use it) opens tensorboardX
``SummaryWriter`` s, and tensorboardX closes those left open at exit (``atexit``). Closing wakes
the writer's worker thread through a ``multiprocessing.Queue``, whose first ``put`` starts a
feeder thread: for a writer never written to (a run that stops before its first batch), a thread
started at exit, which Python 3.12 refuses at shutdown, printing a 12-line traceback after the
command's own output (3.13.0 lets that thread start).

`install` wraps ``EventFileWriter.close``: where that wake-up fails for exactly this reason, the
writer closes its event file directly. Nothing was queued (the feeder thread would be running
otherwise), so nothing is lost; the worker is a daemon thread, which ends with the interpreter.
Every other error, and every other ``close``, is as before.
"""
import functools
from typing import Any, Callable

_SHUTDOWN_MESSAGE = "can't create new thread at interpreter shutdown"


def _close_at_shutdown(original: Callable[[Any], None]) -> Callable[[Any], None]:
    @functools.wraps(original)
    def close(self: Any) -> None:
        try:
            original(self)
        except RuntimeError as error:
            if _SHUTDOWN_MESSAGE not in str(error) or getattr(self, "_closed", True):
                raise
            self._ev_writer.close()
            self._closed = True

    close._elmo_plugin_shutdown = True  # type: ignore[attr-defined]
    return close


def install() -> None:
    """Wraps tensorboardX's ``EventFileWriter.close`` (once); a no-op without tensorboardX."""
    try:
        from tensorboardX.event_file_writer import EventFileWriter
    except ImportError:
        return
    if not getattr(EventFileWriter.close, "_elmo_plugin_shutdown", False):
        EventFileWriter.close = _close_at_shutdown(EventFileWriter.close)
