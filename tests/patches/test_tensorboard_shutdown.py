"""
elmo_plugin/patches/tensorboard_shutdown.py: a tensorboardX writer closed while the interpreter
shuts down (Python 3.12+ refuses the thread its wake-up would start) closes its event file
without a traceback; any other error is raised as before. The real shutdown on Python 3.12 and
3.13 is in tests/test_python_versions.py (slow).
"""
import pytest
from tensorboardX.event_file_writer import EventFileWriter

import elmo_plugin  # noqa: F401  (installs the wrapper)
from elmo_plugin.patches import tensorboard_shutdown


def failing_stop(message):
    def stop():
        raise RuntimeError(message)

    return stop


def test_the_wrapper_is_installed_once():
    tensorboard_shutdown.install()
    assert EventFileWriter.close._elmo_plugin_shutdown
    assert not getattr(EventFileWriter.close.__wrapped__, "_elmo_plugin_shutdown", False)


def test_a_writer_closed_at_shutdown_closes_its_file(tmp_path):
    writer = EventFileWriter(str(tmp_path))
    worker = writer._worker
    worker.stop = failing_stop("can't create new thread at interpreter shutdown")
    writer.close()
    assert writer._closed
    assert writer._ev_writer._py_recordio_writer._writer.closed  # the event file
    writer.close()  # closed: nothing more to do
    # (the worker, a daemon thread, is stopped here only to leave no thread behind)
    del worker.stop
    worker.stop()


def test_any_other_error_is_raised(tmp_path):
    writer = EventFileWriter(str(tmp_path))
    worker = writer._worker
    worker.stop = failing_stop("something else")
    with pytest.raises(RuntimeError, match="something else"):
        writer.close()
    assert not writer._closed
    del worker.stop
    writer.close()
    assert writer._closed
