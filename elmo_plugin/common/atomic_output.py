"""
Writing a file so that it either appears whole or not at all.

Every output of this plugin (embeddings, weights, options, vocabularies) is written under a
temporary name in the destination directory and renamed over the final name only when complete,
so an interrupted run never leaves a file that looks like a result.
"""
import contextlib
import os
import tempfile
from typing import Iterator

from allennlp.common.checks import ConfigurationError


@contextlib.contextmanager
def atomic_output(path: str) -> Iterator[str]:
    """
    Yields a temporary path next to ``path``; on normal exit the temporary file is renamed to
    ``path``, on any exception (KeyboardInterrupt included) it is deleted and ``path`` is left as
    it was. The file gets the usual permissions (``0666 & ~umask``), not ``mkstemp``'s 0600.
    """
    directory = os.path.dirname(os.path.abspath(path))
    try:
        handle, temporary = tempfile.mkstemp(
            prefix=f".{os.path.basename(path)}.", suffix=".tmp", dir=directory
        )
    except OSError as error:
        raise ConfigurationError(f"cannot create {path}: {error.strerror}") from None
    os.close(handle)
    try:
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(temporary, 0o666 & ~umask)
        yield temporary
        os.replace(temporary, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.remove(temporary)
        raise
