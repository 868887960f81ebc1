"""
Output that fails to be written (a full disk, a file-size limit, a quota) as one clear error:
`write_failure`, and `hdf5_for_writing`, through which HDF5 survives a failed write
(docs/implementation.md, "SIGTERM and failed writes").
"""
import contextlib
import errno
import io
import os
from typing import Iterator, Optional

import h5py
from allennlp.common.checks import ConfigurationError

# The errors of a write that did not fit: no space left, over the file-size limit (RLIMIT_FSIZE,
# `ulimit -f`, with SIGXFSZ ignored as Python does), over the disk quota.
WRITE_ERRNOS = frozenset({errno.ENOSPC, errno.EFBIG, errno.EDQUOT})


def is_write_failure(error: BaseException) -> bool:
    """Whether ``error`` is an ``OSError`` of a write that did not fit (`WRITE_ERRNOS`)."""
    return isinstance(error, OSError) and error.errno in WRITE_ERRNOS


def write_failure(path: str, error: OSError, kept: str) -> ConfigurationError:
    """The one-line error for a failed write of ``path``: the OS error (``File too large (EFBIG)``)
    and what became of the earlier output (``kept``)."""
    name = errno.errorcode.get(error.errno, str(error.errno))
    return ConfigurationError(
        f"cannot write {path}: {error.strerror or os.strerror(error.errno)} ({name}); the partial "
        f"output was removed and {kept}"
    )


class _RecordingFile(io.RawIOBase):
    """A file for h5py's file-object driver that records the first failed write and afterwards only
    advances the position (the file is going to be removed anyway), so that HDF5 can close normally."""

    def __init__(self, path: str) -> None:
        super().__init__()
        self.path = path
        self._file = open(path, "w+b", buffering=0)
        self.error: Optional[OSError] = None

    def readable(self) -> bool:
        return True

    writable = seekable = readable

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        return self._file.seek(offset, whence)

    def tell(self) -> int:
        return self._file.tell()

    def readinto(self, buffer) -> int:  # type: ignore[override]
        return self._file.readinto(buffer)

    def write(self, data) -> int:  # type: ignore[override]
        size = memoryview(data).nbytes
        written = 0
        if self.error is None:
            view = memoryview(data).cast("B")
            try:
                # A short write (the part that still fitted) is followed by the rest, whose
                # write then raises the operating system's own error.
                while written < size:
                    count = self._file.write(view[written:])
                    if not count:  # nothing written and no error: treat as a full disk
                        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
                    written += count
                return size
            except OSError as error:
                self.error = error
        self._file.seek(size - written, io.SEEK_CUR)
        return size

    def truncate(self, size: Optional[int] = None) -> int:
        if self.error is None:
            try:
                return self._file.truncate(size)
            except OSError as error:
                self.error = error
        return self._file.tell() if size is None else size

    def flush(self) -> None:
        # The file is unbuffered: every write has reached the OS already (or failed there).
        pass

    def close(self) -> None:
        if not self._file.closed:
            self._file.close()
        super().close()


class Hdf5Output:
    """An HDF5 file being written (`file`) and its `check` for a failed write."""

    def __init__(self, recording: _RecordingFile, file: h5py.File) -> None:
        self._recording = recording
        self.file = file

    def check(self) -> None:
        """Raises the ``OSError`` of the first failed write, with the file's name, if any."""
        error = self._recording.error
        if error is not None:
            raise OSError(error.errno, error.strerror, self._recording.path)


@contextlib.contextmanager
def hdf5_for_writing(path: str) -> Iterator[Hdf5Output]:
    """
    Opens ``path`` as a new HDF5 file whose failed writes become an ``OSError`` raised when the
    block ends (or from `Hdf5Output.check`), never an HDF5 error or a crash (HDF5's own driver,
    after a failed write, raises from every later call and can crash the interpreter at exit).
    """
    recording = _RecordingFile(path)
    try:
        with h5py.File(recording, "w") as file:
            output = Hdf5Output(recording, file)
            yield output
        output.check()
    finally:
        recording.close()
