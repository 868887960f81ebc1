"""
No "Exception ignored in atexit callback ... can't create new thread at interpreter shutdown"
from tensorboardX on Python 3.12 and newer: where closing a writer at exit fails for exactly this
reason, the writer closes its event file directly (nothing was queued).
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
