"""
Writing a file, or a set of files, so that it either appears whole or not at all: under a
temporary name in the destination directory, renamed over the final name only when complete.
"""
import contextlib
import os
import shutil
import tempfile
from typing import Iterable, Iterator, Optional

from allennlp.common.checks import ConfigurationError

from elmo_plugin.common.termination import raise_if_interrupted
from elmo_plugin.common.write_errors import is_write_failure, write_failure


def input_at(output_path: str, input_paths: Iterable[str]) -> Optional[str]:
    """The first of ``input_paths`` that ``output_path`` would replace (the same path, or the same
    file under another name), or ``None``."""
    if not os.path.exists(output_path):
        return None
    output_stat = os.stat(output_path)
    for path in input_paths:
        try:
            if os.path.samestat(output_stat, os.stat(path)):
                return path
        except OSError:  # an input that vanished is not the output
            continue
    return None


@contextlib.contextmanager
def atomic_output(path: str) -> Iterator[str]:
    """
    Yields a temporary path next to ``path``, renamed to ``path`` on normal exit, deleted on any
    exception (``path`` left as it was). The file gets the usual permissions, not ``mkstemp``'s
    0600. A write that did not fit becomes one `ConfigurationError` (`write_failure`).
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
        _usual_permissions(temporary, 0o666)
        yield temporary
        raise_if_interrupted()  # an interruption that the work swallowed still leaves no output
        os.replace(temporary, path)
    except BaseException as error:
        with contextlib.suppress(OSError):
            os.remove(temporary)
        if is_write_failure(error):
            kept = f"the earlier {path} is unchanged" if os.path.exists(path) else "no file was left"
            raise write_failure(path, error, kept) from None
        raise


@contextlib.contextmanager
def atomic_directory(path: str, replaceable_names: Iterable[str]) -> Iterator[str]:
    """
    `atomic_output` for a set of files: a new temporary directory next to ``path``, which takes its
    place on normal exit, so a reader sees the old set of files or the new one, never a mix.
    ``path`` may exist only as a directory holding nothing but ``replaceable_names`` (an error
    before any work otherwise, so that no file of the user's is ever removed).
    """
    path = os.path.abspath(path)
    parent = os.path.dirname(path)
    if os.path.exists(path):
        if not os.path.isdir(path):
            raise ConfigurationError(f"{path} exists and is not a directory")
        foreign = sorted(set(os.listdir(path)) - set(replaceable_names))
        if foreign:
            raise ConfigurationError(
                f"{path} holds other files than an earlier output ({', '.join(foreign[:5])}"
                f"{' ...' if len(foreign) > 5 else ''}); choose an empty or new directory"
            )
    try:
        os.makedirs(parent, exist_ok=True)
        temporary = tempfile.mkdtemp(prefix=f".{os.path.basename(path)}.", suffix=".tmp", dir=parent)
    except OSError as error:
        raise ConfigurationError(f"cannot create {path}: {error.strerror}") from None
    try:
        _usual_permissions(temporary, 0o777)
        yield temporary
        raise_if_interrupted()
        if os.path.exists(path):
            # Two renames, so that the old set is only removed once the new one is in place.
            old = tempfile.mkdtemp(prefix=f".{os.path.basename(path)}.", suffix=".old", dir=parent)
            os.rmdir(old)
            os.rename(path, old)
            os.rename(temporary, path)
            shutil.rmtree(old, ignore_errors=True)
        else:
            os.rename(temporary, path)
    except BaseException as error:
        shutil.rmtree(temporary, ignore_errors=True)
        if is_write_failure(error):
            # Name the file of the set that failed, under its final name.
            failed = getattr(error, "filename", None)
            if isinstance(failed, str) and failed.startswith(temporary + os.sep):
                failed = os.path.join(path, os.path.relpath(failed, temporary))
            else:
                failed = path
            kept = f"the earlier {path} is unchanged" if os.path.exists(path) else "no directory was left"
            raise write_failure(failed, error, kept) from None
        raise


def _usual_permissions(path: str, mode: int) -> None:
    umask = os.umask(0)
    os.umask(umask)
    os.chmod(path, mode & ~umask)
