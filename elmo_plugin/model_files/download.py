"""
Downloading model files through AllenNLP's ``cached_path`` into its cache directory, once, each
checked (a bad download is an error naming the URL, and its cache entry is deleted). Files that never
change (the published models) are used from the cache without asking the server, offline too.
"""
import contextlib
import glob
import http.client
import json
import logging
import os
import re
import tarfile
import zipfile
from typing import Optional, Tuple
from urllib.parse import urlparse

import h5py
import requests
from allennlp.common import file_utils
from allennlp.common.checks import ConfigurationError
from allennlp.common.file_utils import cached_path
from allennlp.common.util import SigTermReceived
from cached_path import find_latest_cached, resource_to_filename
from cached_path.file_lock import FileLock
from cached_path.schemes import get_supported_schemes
from filelock import Timeout

from elmo_plugin.common.paths import PathLike
from elmo_plugin.model_files.bilm_tf.options import BilmOptions

logger = logging.getLogger(__name__)

# The first request to a server that is not in the cache is one HEAD without retries: with no
# connection it fails at once, where ``cached_path`` would retry for about 30 seconds.
_PROBE_TIMEOUT = (10.0, 60.0)  # seconds: (connect, read)

# Top-level groups that every bilm-tf weight file has (highway layers are optional).
_WEIGHT_GROUPS = ("char_embed", "CNN", "RNN_0")

# What `fetch` can be asked for, as errors name it.
KINDS = {
    "options": "a bilm-tf options file",
    "weights": "a bilm-tf weight file",
    "archive": "an elmo_bilm model archive",
    "zip": "a ZIP archive",
    "softmax": "a language model's softmax (softmax/W, softmax/b)",
    "vocabulary": "a bilm-tf vocabulary file",
}


class DownloadError(ConfigurationError):
    """A file that could not be had: one line naming the location and why; ``offline``: the server
    could not be reached (the caller says how to use local files instead)."""

    def __init__(self, message: str, offline: bool = False) -> None:
        super().__init__(message)
        self.offline = offline


def default_cache_dir() -> str:
    """AllenNLP's cache directory: ``$ALLENNLP_CACHE_ROOT/cache`` as AllenNLP read it at import."""
    # Looked up at each call, not bound at import, so that setting it later (tests) takes effect.
    return str(file_utils.CACHE_DIRECTORY)


def is_remote(location: str) -> bool:
    """Whether ``location`` is something ``cached_path`` downloads (a URL, ``s3://``, ``hf://``)."""
    return urlparse(location).scheme in get_supported_schemes()


def fetch(location: PathLike, kind: str, cache_dir: str, immutable: bool = False) -> str:
    """The local path of ``location``, a file of ``kind`` (`KINDS`): a local path as it is, a remote
    file downloaded and checked (``immutable`` ones from the cache, unasked). Raises `DownloadError`."""
    location = os.fspath(location)
    if not is_remote(location):
        path = os.path.expanduser(location.removeprefix("file://"))
        if not os.path.exists(path):
            raise DownloadError(f"{KINDS[kind]} not found: {path}")
        return path

    if immutable:
        cached = cached_copy(location, cache_dir)
        if cached is not None:
            problem = file_problem(cached, kind)
            if problem is None:
                return cached
            # Perhaps stored by a tool that does not check (AllenNLP's own Elmo shares these URLs
            # and the cache): replace it.
            logger.warning("The cached copy of %s is damaged (%s); downloading it again", location, problem)
            _remove_cache_entry(cached)

    if urlparse(location).scheme in ("http", "https"):
        offline_copy = _probe(location, kind, cache_dir)
        if offline_copy is not None:
            return offline_copy

    try:
        path = cached_path(location, cache_dir=cache_dir)
    except SigTermReceived:
        raise  # an interruption (AllenNLP turns SIGTERM into this exception), not a failure
    except FileNotFoundError:
        _remove_unused_locks(location, cache_dir)
        raise DownloadError(f"{location}: not found") from None
    except Exception as error:  # noqa: BLE001
        # Every scheme's client (requests, botocore, huggingface_hub) fails in its own way: one line here.
        # cached_path removed its partial file but not its lock file, removed here.
        _remove_unused_locks(location, cache_dir)
        raise DownloadError(
            f"downloading {location} failed ({_short_reason(error)}); nothing was cached, so the "
            f"next run downloads it again",
            offline=isinstance(error, (requests.exceptions.ConnectionError, requests.exceptions.Timeout)),
        ) from None
    problem = file_problem(path, kind)
    if problem is not None:
        _remove_cache_entry(path)
        raise DownloadError(
            f"{location} did not give {KINDS[kind]}: {problem}. The download was removed from "
            f"the cache ({cache_dir}); check the URL"
        ) from None
    return path


def _probe(location: str, kind: str, cache_dir: str) -> Optional[str]:
    """One quick HEAD request before ``cached_path`` (which retries a dead connection for about 30
    seconds): no connection gives the cached copy or the offline error at once, and so does 404."""
    try:
        response = requests.head(location, allow_redirects=True, timeout=_PROBE_TIMEOUT)
    except (requests.exceptions.ConnectionError, requests.exceptions.Timeout) as error:
        cached = cached_copy(location, cache_dir)
        if cached is None:
            raise DownloadError(
                f"cannot download {location} ({_short_reason(error)}) and it is not in the "
                f"cache ({cache_dir})",
                offline=True,
            ) from None
        logger.warning("Cannot reach %s (%s); using the cached copy %s", location, _short_reason(error), cached)
        problem = file_problem(cached, kind)
        if problem is not None:
            _remove_cache_entry(cached)
            raise DownloadError(
                f"{location} cannot be reached ({_short_reason(error)}) and its cached copy is "
                f"damaged ({problem}; removed)",
                offline=True,
            ) from None
        return cached
    if response.status_code == 404:
        raise DownloadError(f"{location}: not found (HTTP 404); nothing was downloaded")
    return None


def _short_reason(error: BaseException) -> str:
    """The innermost cause of a download error, on one line (``Connection refused``, not requests'
    ``HTTPConnectionPool(...): Max retries exceeded ...``)."""
    innermost = error
    seen = set()
    while id(innermost) not in seen:
        seen.add(id(innermost))
        # urllib3's MaxRetryError has a reason, requests' wrappers the error as their argument.
        candidates = (getattr(innermost, "reason", None), innermost.args[0] if innermost.args else None)
        nested = next((found for found in candidates if isinstance(found, BaseException)), innermost.__cause__)
        if nested is None:
            break
        innermost = nested
    if isinstance(innermost, http.client.IncompleteRead):
        # urllib3 counts bytes (ints), http.client keeps the partial data (bytes).
        partial = innermost.partial
        received = partial if isinstance(partial, int) else len(partial)
        text = f"the connection closed after {received} bytes, {innermost.expected} more expected"
    elif isinstance(innermost, OSError) and innermost.strerror:
        text = innermost.strerror
    else:
        text = str(innermost) or type(innermost).__name__
    return " ".join(text.split())


def file_problem(path: str, kind: str) -> Optional[str]:
    """What makes the file at ``path`` unusable as a ``kind`` (`KINDS`), the checks every
    download gets; None: nothing."""
    if kind == "archive":
        return None if os.path.isdir(path) or tarfile.is_tarfile(path) else _with_size(path, "not a tar archive")
    with open(path, "rb") as handle:
        start = handle.read(512)
    if kind == "vocabulary":
        # Its first lines are <S>, </S> and <UNK>: a page is told apart by its markup instead.
        if re.match(rb"\s*<(!doctype|html|\?xml|head|body)", start, re.IGNORECASE):
            return "the server sent an HTML or XML page (an error or login page?) instead of the file"
        return None if b"<UNK>" in start else "not a bilm-tf vocabulary (no <UNK> among its first lines)"
    if start.lstrip()[:1] == b"<":
        return "the server sent an HTML or XML page (an error or login page?) instead of the file"
    if kind == "zip":
        return None if zipfile.is_zipfile(path) else _with_size(path, "not a ZIP archive")
    if kind == "softmax":
        return _hdf5_problem(path, ("softmax/W", "softmax/b"), "a softmax")
    return _options_problem(path) if kind == "options" else _weights_problem(path)


def _options_problem(path: str) -> Optional[str]:
    try:
        with open(path, encoding="utf-8") as handle:
            BilmOptions.from_dict(json.load(handle), source="the file")
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        return f"it is not JSON ({error})"
    except ConfigurationError as error:
        return f"it is JSON but not ELMo options ({error})"
    return None


def _weights_problem(path: str) -> Optional[str]:
    return _hdf5_problem(path, _WEIGHT_GROUPS, "bilm-tf weights")


def _hdf5_problem(path: str, names: Tuple[str, ...], what: str) -> Optional[str]:
    if not h5py.is_hdf5(path):
        return _with_size(path, "not an HDF5 file")
    try:
        # HDF5 records the file's length, so a file cut short fails to open.
        with h5py.File(path, "r") as handle:
            groups = set(handle.keys())
            missing = [name for name in names if name not in handle]
    except OSError as error:
        return f"a damaged or incomplete HDF5 file ({error})"
    if missing:
        return f"an HDF5 file without {what} (no {', '.join(missing)}; it has {', '.join(sorted(groups)) or 'nothing'})"
    return None


def _with_size(path: str, problem: str) -> str:
    return f"{problem} ({os.path.getsize(path)} bytes)"


def cached_copy(location: str, cache_dir: str) -> Optional[str]:
    """The newest complete cache entry of ``location``, or None (``cached_path``'s own lookup)."""
    if not os.path.isdir(cache_dir):
        return None
    latest = find_latest_cached(location, cache_dir)
    return None if latest is None or latest.is_dir() else str(latest)


def _remove_cache_entry(path: str) -> None:
    """Deletes a cache entry as AllenNLP's ``remove_cache_entries`` does: the file, ``PATH.json`` and
    ``PATH.lock``."""
    for stale in (path, path + ".json"):
        with contextlib.suppress(FileNotFoundError):
            os.remove(stale)
    _remove_unused_lock(path + ".lock")


def _remove_unused_locks(location: str, cache_dir: str) -> None:
    """After a failed download: the lock files of ``location`` that guard no file."""
    prefix = os.path.join(glob.escape(cache_dir), resource_to_filename(location))
    for lock_path in glob.glob(prefix + "*.lock"):
        if not os.path.exists(lock_path[: -len(".lock")]):
            _remove_unused_lock(lock_path)


def _remove_unused_lock(lock_path: str) -> None:
    if not os.path.exists(lock_path):
        return
    lock = FileLock(lock_path)
    try:
        lock.acquire(timeout=0)
    except (Timeout, OSError):
        return  # another process is downloading this file right now; its lock stays
    try:
        with contextlib.suppress(FileNotFoundError):
            os.remove(lock_path)
    finally:
        lock.release()
