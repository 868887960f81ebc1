"""
Naming an ELMo model: the one resolver behind ``allennlp elmo``, `ElmoEmbedder`, `Elmo` and
``elmo_token_embedder``, so that a model is named the same way everywhere.

A model is one of

- nothing: the published English "Original" model, AllenNLP 0.9's default;
- the name of a published English model (`PUBLISHED_MODELS`: ``small``, ``medium``,
  ``original``, ``original-5.5b``), downloaded from AllenNLP's bucket, or from the mirror that
  the environment variable ``ELMO_MODELS_URL`` names, on first use;
- a local directory with ``options.json`` and ``weights.hdf5`` (what ``allennlp elmo-export``
  writes; a directory with one ``*options.json`` and one ``*weights.hdf5``, such as published
  files downloaded by hand, works too);
- a ``model.tar.gz`` or serialization directory of an ``elmo_bilm`` training run;
- an ELMoForManyLangs model directory (``config.json``, ``char.dic``, ``word.dic``,
  ``token_embedder.pkl``, ``encoder.pkl``; `elmo_plugin.model_files.elmoformanylangs`);
- or, winning over all of these, an explicit ``options_file`` and ``weight_file`` (anything
  AllenNLP's ``cached_path`` takes: paths, ``http(s)://``, ``s3://``, ``hf://`` ...).

Downloads go through AllenNLP's ``cached_path``: into its cache directory
(``$ALLENNLP_CACHE_ROOT/cache``, by default ``~/.allennlp/cache``), once, with a progress bar.
``cached_path`` writes to a temporary file that only becomes the cache entry when the transfer
is complete, so a download cut halfway is never used. On top of that every downloaded file is
checked before use (an options file must be JSON with the ELMo keys, a weight file a complete
HDF5 file with bilm-tf's groups): a server that answers with an HTML page, or a file cut short
without the transfer noticing, is an error that names the URL, and the bad cache entry is
deleted so that the next run downloads again.

The published files never change, so once cached they are used without asking the server again
(which also makes them work offline). With no connection and nothing cached the error is one
line that names the URL and says how to pass local files instead.
"""
import contextlib
import glob
import http.client
import json
import logging
import os
import tarfile
from dataclasses import dataclass
from typing import Callable, Dict, NamedTuple, Optional, Union
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

from elmo_plugin.bilm_tf.options import BilmOptions
from elmo_plugin.common.archive import is_model_archive
from elmo_plugin.common.util import PathLike
from elmo_plugin.model_files.elmoformanylangs import (
    is_elmoformanylangs_directory,
    load_elmoformanylangs_bilm,
)
from elmo_plugin.modules.bilm import ElmoBiLm

logger = logging.getLogger(__name__)

# Where the published models are; the environment variable replaces it (a mirror, a test
# server, or a local directory with the same layout). Read at each use, not at import.
MODELS_URL_VARIABLE = "ELMO_MODELS_URL"
DEFAULT_MODELS_URL = "https://allennlp.s3.amazonaws.com/models/elmo"

# The model used when none is named (AllenNLP 0.9's ``ElmoEmbedder()`` and ``allennlp elmo``).
DEFAULT_MODEL = "original"

# The file names of a model directory, as ``allennlp elmo-export`` writes them.
OPTIONS_NAME = "options.json"
WEIGHTS_NAME = "weights.hdf5"

# The first request to a server that is not in the cache is one HEAD without retries: with no
# connection it fails at once, where ``cached_path`` would retry for about 30 seconds.
_PROBE_TIMEOUT = (10.0, 60.0)  # seconds: (connect, read)

# Top-level groups that every bilm-tf weight file has (highway layers are optional).
_WEIGHT_GROUPS = ("char_embed", "CNN", "RNN_0")


@dataclass(frozen=True)
class PublishedModel:
    """
    An English ELMo model published by AllenNLP (trained on the 1B Word Benchmark; ``original-5.5b``
    on 5.5B tokens of Wikipedia and news).

    # Parameters

    name : `str`
        The name to give ``--model`` / ``model=``.
    architecture : `str`
        AllenNLP's name of the files, e.g. ``2x4096_512_2048cnn_2xhighway`` (2 LSTM layers of 4096
        cells projected to 512, 2048 character filters, 2 highway layers).
    parameters : `str`
        The number of parameters, as published ("93.6M").
    output_dim : `int`
        The width of every ELMo layer (forward and backward halves together).
    """

    name: str
    architecture: str
    parameters: str
    output_dim: int

    def options_url(self, base_url: Optional[str] = None) -> str:
        """The ``options.json`` under ``base_url`` (default: `models_url()`)."""
        return self._file(base_url, "options.json")

    def weights_url(self, base_url: Optional[str] = None) -> str:
        """The ``weights.hdf5`` under ``base_url`` (default: `models_url()`)."""
        return self._file(base_url, "weights.hdf5")

    def _file(self, base_url: Optional[str], suffix: str) -> str:
        base = (base_url or models_url()).rstrip("/")
        return f"{base}/{self.architecture}/elmo_{self.architecture}_{suffix}"


PUBLISHED_MODELS: Dict[str, PublishedModel] = {
    model.name: model
    for model in (
        PublishedModel("small", "2x1024_128_2048cnn_1xhighway", "13.6M", 256),
        PublishedModel("medium", "2x2048_256_2048cnn_1xhighway", "28.0M", 512),
        PublishedModel("original", "2x4096_512_2048cnn_2xhighway", "93.6M", 1024),
        PublishedModel("original-5.5b", "2x4096_512_2048cnn_2xhighway_5.5B", "93.6M", 1024),
    )
}


def models_url() -> str:
    """Where the published models are: ``$ELMO_MODELS_URL``, or AllenNLP's bucket."""
    return (os.environ.get(MODELS_URL_VARIABLE) or DEFAULT_MODELS_URL).rstrip("/")


def default_cache_dir() -> str:
    """AllenNLP's cache directory: ``$ALLENNLP_CACHE_ROOT/cache`` as AllenNLP read it at import."""
    # Looked up at each call, not bound at import, so that setting it later (tests) takes effect.
    return str(file_utils.CACHE_DIRECTORY)


class ArgumentNames(NamedTuple):
    """
    How the caller spells the model arguments, so that errors name what the user typed:
    `PYTHON_ARGUMENTS` (``options_file=``) or the command's (``--options-file``).

    # Parameters

    options_file, weight_file, model : `str`
        The names of the three arguments.
    separator : `str`
        What goes between a name and its value in an example: ``"="`` or ``" "``.
    """

    options_file: str
    weight_file: str
    model: str
    separator: str

    def local_files_hint(self) -> str:
        s = self.separator
        return (
            f"pass local files instead: {self.model}{s}DIRECTORY (holding {OPTIONS_NAME} and "
            f"{WEIGHTS_NAME}) or {self.options_file}{s}OPTIONS_JSON with "
            f"{self.weight_file}{s}WEIGHTS_HDF5"
        )


PYTHON_ARGUMENTS = ArgumentNames("options_file", "weight_file", "model", "=")


@dataclass(frozen=True)
class ModelFiles:
    """
    A model resolved to files on this machine (downloaded first if need be): either a bilm-tf
    ``options_file`` and ``weight_file``, or the ``archive_file`` (``model.tar.gz`` or
    serialization directory) of an ``elmo_bilm`` run. ``description`` says where it came from,
    for logs.
    """

    options_file: Optional[str] = None
    weight_file: Optional[str] = None
    archive_file: Optional[str] = None
    description: str = ""
    # An ELMoForManyLangs model directory (issue 26): elmo_plugin.model_files.elmoformanylangs.
    elmoformanylangs_directory: Optional[str] = None

    def load(self, stateful: bool = False, requires_grad: bool = False) -> ElmoBiLm:
        """The biLM with its weights (see `ElmoBiLm.from_files` and `ElmoBiLm.from_archive`)."""
        if self.elmoformanylangs_directory is not None:
            return load_elmoformanylangs_bilm(
                self.elmoformanylangs_directory, stateful=stateful, requires_grad=requires_grad
            )
        if self.archive_file is not None:
            return ElmoBiLm.from_archive(
                self.archive_file, stateful=stateful, requires_grad=requires_grad
            )
        return ElmoBiLm.from_files(
            self.options_file, self.weight_file, stateful=stateful, requires_grad=requires_grad
        )


def check_file_pair(
    options_file: Optional[PathLike],
    weight_file: Optional[PathLike],
    argument_names: ArgumentNames = PYTHON_ARGUMENTS,
) -> None:
    """
    `ConfigurationError` naming the missing one when only one of ``options_file`` and
    ``weight_file`` is given: each is useless without the other.
    """
    if (options_file is None) == (weight_file is None):
        return
    missing = argument_names.weight_file if weight_file is None else argument_names.options_file
    raise ConfigurationError(
        f"{missing} not given: ELMo needs {argument_names.options_file} and "
        f"{argument_names.weight_file} together (a bilm-tf options.json and the weights.hdf5 "
        f"that goes with it), or neither of them and {argument_names.model} (by default the "
        f"published {DEFAULT_MODEL!r} model)"
    )


def resolve_model(
    model: Optional[Union[PathLike, ModelFiles]] = None,
    options_file: Optional[PathLike] = None,
    weight_file: Optional[PathLike] = None,
    archive_file: Optional[PathLike] = None,
    cache_dir: Optional[PathLike] = None,
    argument_names: ArgumentNames = PYTHON_ARGUMENTS,
) -> ModelFiles:
    """
    Finds the files of a model, downloading and checking them if they are remote.

    # Parameters

    model : `str`, `PathLike` or `ModelFiles`, optional
        A published model's name (`PUBLISHED_MODELS`), a directory with ``options.json`` and
        ``weights.hdf5``, an ``elmo_bilm`` ``model.tar.gz`` or serialization directory, or an
        ELMoForManyLangs model directory. A
        `ModelFiles` (already resolved) is returned as it is. Nothing: `DEFAULT_MODEL`. A name
        wins over a directory of the same name; write ``./small`` for the directory.
    options_file : `PathLike`, optional
        A bilm-tf ``options.json``: a path or anything ``cached_path`` downloads (a URL,
        ``s3://``, ``hf://``). With ``weight_file``, it wins over ``model``.
    weight_file : `PathLike`, optional
        The bilm-tf ``weights.hdf5`` that goes with ``options_file``. Without ``options_file``
        it may be a ``model.tar.gz`` (AllenNLP's ``Elmo`` configs put archives there).
    archive_file : `PathLike`, optional
        The ``model.tar.gz`` or serialization directory of an ``elmo_bilm`` run (a path or
        URL); wins over ``model``, and cannot be combined with the two bilm-tf files.
    cache_dir : `PathLike`, optional
        Where downloads are cached (default: AllenNLP's, `default_cache_dir()`).
    argument_names : `ArgumentNames`, optional (default = `PYTHON_ARGUMENTS`)
        How errors spell the arguments.

    # Raises

    `ConfigurationError`
        For an unknown name, a path that holds no model, a bad combination of arguments, and a
        download that failed or was not the expected file (naming the URL), all on one line.
    """
    if isinstance(model, ModelFiles) and all(
        given is None for given in (options_file, weight_file, archive_file)
    ):
        return model
    cache_dir = os.fspath(cache_dir) if cache_dir is not None else default_cache_dir()
    if archive_file is None and options_file is None and weight_file is not None:
        if is_model_archive(weight_file):
            archive_file, weight_file = weight_file, None
    if archive_file is not None:
        if options_file is not None or weight_file is not None:
            raise ConfigurationError(
                "give either archive_file (a model.tar.gz of an elmo_bilm run) or "
                f"options_file and weight_file, not both (archive_file={archive_file}, "
                f"options_file={options_file}, weight_file={weight_file})"
            )
        _log_ignored_model(model, "archive_file", argument_names)
        archive = _fetch(archive_file, "archive", cache_dir, argument_names)
        return ModelFiles(archive_file=archive, description=os.fspath(archive_file))
    check_file_pair(options_file, weight_file, argument_names)
    if options_file is not None:
        _log_ignored_model(
            model, f"{argument_names.options_file} and {argument_names.weight_file}", argument_names
        )
        return ModelFiles(
            options_file=_fetch(options_file, "options", cache_dir, argument_names),
            weight_file=_fetch(weight_file, "weights", cache_dir, argument_names),
            description=f"{os.fspath(options_file)} and {os.fspath(weight_file)}",
        )

    name = os.fspath(model) if model is not None else DEFAULT_MODEL
    published = PUBLISHED_MODELS.get(name.lower())
    if published is not None:
        base_url = models_url()
        options_url, weights_url = published.options_url(base_url), published.weights_url(base_url)
        return ModelFiles(
            options_file=_fetch(options_url, "options", cache_dir, argument_names, immutable=True),
            weight_file=_fetch(weights_url, "weights", cache_dir, argument_names, immutable=True),
            description=f"the published {published.name!r} model ({base_url})",
        )
    return _local_model(name, argument_names)


def load_bilm(
    model: Optional[Union[PathLike, ModelFiles]] = None,
    options_file: Optional[PathLike] = None,
    weight_file: Optional[PathLike] = None,
    archive_file: Optional[PathLike] = None,
    stateful: bool = False,
    requires_grad: bool = False,
    cache_dir: Optional[PathLike] = None,
    argument_names: ArgumentNames = PYTHON_ARGUMENTS,
) -> ElmoBiLm:
    """
    `resolve_model` (see it for the arguments), then the biLM with its weights: stateless unless
    ``stateful``, frozen unless ``requires_grad``.
    """
    files = resolve_model(model, options_file, weight_file, archive_file, cache_dir, argument_names)
    logger.info("Loading the ELMo biLM: %s", files.description)
    return files.load(stateful=stateful, requires_grad=requires_grad)


def _log_ignored_model(model, winner: str, argument_names: ArgumentNames) -> None:
    if model is not None and not isinstance(model, ModelFiles):
        logger.warning(
            "%s %s is not used: %s name the model", argument_names.model, os.fspath(model), winner
        )


def _local_model(name: str, argument_names: ArgumentNames) -> ModelFiles:
    """A ``model`` that is not a published name: a directory or an archive on this machine."""
    path = os.path.expanduser(name)
    if os.path.isdir(path):
        return _directory_model(path)
    if os.path.isfile(path):
        if tarfile.is_tarfile(path):
            return ModelFiles(archive_file=path, description=path)
        raise ConfigurationError(
            f"{argument_names.model} {path}: not a model directory or model.tar.gz. For a bilm-tf "
            f"weights.hdf5 give {argument_names.options_file} and {argument_names.weight_file}"
        )
    if urlparse(name).scheme in get_supported_schemes():
        raise ConfigurationError(
            f"{argument_names.model} takes a published model's name or a local path, not a URL "
            f"({name}); for files on a server give {argument_names.options_file} and "
            f"{argument_names.weight_file} as URLs"
        )
    raise ConfigurationError(
        f"unknown ELMo model {name!r}: not a published model ({', '.join(PUBLISHED_MODELS)}) "
        "and no such file or directory"
    )


def _directory_model(directory: str) -> ModelFiles:
    # ELMoForManyLangs model directories (issue 26) first: they hold a config.json too.
    if is_elmoformanylangs_directory(directory):
        return ModelFiles(
            elmoformanylangs_directory=directory,
            description=f"{directory} (ELMoForManyLangs)",
        )
    options = os.path.join(directory, OPTIONS_NAME)
    weights = os.path.join(directory, WEIGHTS_NAME)
    if os.path.isfile(options) and os.path.isfile(weights):
        return ModelFiles(options_file=options, weight_file=weights, description=directory)
    if os.path.isfile(os.path.join(directory, "config.json")):
        # A serialization directory (or an extracted model.tar.gz) of a training run.
        return ModelFiles(archive_file=directory, description=directory)
    # Published files as downloaded by hand: elmo_<architecture>_options.json and _weights.hdf5.
    options_files = glob.glob(os.path.join(glob.escape(directory), "*" + OPTIONS_NAME))
    weight_files = glob.glob(os.path.join(glob.escape(directory), "*" + WEIGHTS_NAME))
    if len(options_files) == 1 and len(weight_files) == 1:
        return ModelFiles(
            options_file=options_files[0], weight_file=weight_files[0], description=directory
        )
    raise ConfigurationError(
        f"{directory} holds no ELMo model: expected {OPTIONS_NAME} and {WEIGHTS_NAME} (what "
        "allennlp elmo-export writes), the config.json of an elmo_bilm training run, or an "
        "ELMoForManyLangs model (config.json, char.dic, token_embedder.pkl, encoder.pkl)"
    )


# ----------------------------------------------------------------------------------------------
# Downloads


_WHAT = {
    "options": "a bilm-tf options file",
    "weights": "a bilm-tf weight file",
    "archive": "an elmo_bilm model archive",
}


class _NotTheExpectedFile(Exception):
    """A downloaded file that is not what was asked for; the message says what it is instead."""


def _is_remote(location: str) -> bool:
    return urlparse(location).scheme in get_supported_schemes()


def _fetch(
    location: PathLike,
    kind: str,
    cache_dir: str,
    argument_names: ArgumentNames,
    immutable: bool = False,
) -> str:
    """
    The local path of ``location``: a local path as it is (checked when it is read), a remote
    file downloaded through ``cached_path`` and checked. ``immutable`` files (the published
    models, also when a config names their URLs as AllenNLP configs do) are taken from the cache
    without asking the server whether they changed.
    """
    location = os.fspath(location)
    immutable = immutable or _is_published_url(location)
    if not _is_remote(location):
        if location.startswith("file://"):
            location = location[len("file://") :]
        path = os.path.expanduser(location)
        if not os.path.exists(path):
            raise ConfigurationError(f"{_WHAT[kind]} not found: {path}")
        return path

    if immutable:
        cached = _cached_copy(location, cache_dir)
        if cached is not None:
            try:
                _check_download(cached, kind)
                return cached
            except _NotTheExpectedFile as problem:
                # Perhaps stored by a tool that does not check (AllenNLP's own Elmo shares these
                # URLs and the cache): replace it.
                logger.warning(
                    "The cached copy of %s is damaged (%s); downloading it again", location, problem
                )
                _remove_cache_entry(cached)

    if urlparse(location).scheme in ("http", "https"):
        offline_copy = _probe(location, kind, cache_dir, argument_names)
        if offline_copy is not None:
            return offline_copy

    try:
        path = cached_path(location, cache_dir=cache_dir)
    except SigTermReceived:
        raise  # an interruption (AllenNLP turns SIGTERM into this exception), not a failure
    except FileNotFoundError:
        _remove_unused_locks(location, cache_dir)
        raise ConfigurationError(f"{location}: not found{_models_url_note(location)}") from None
    except Exception as error:  # noqa: BLE001
        # Every scheme's client fails in its own way (requests, botocore, huggingface_hub); all
        # of them are one line here. cached_path has already removed its partial file; its lock
        # file is left, and removed here, so that the cache holds nothing of this URL.
        _remove_unused_locks(location, cache_dir)
        hint = ""
        if isinstance(error, (requests.exceptions.ConnectionError, requests.exceptions.Timeout)):
            hint = f"; without a connection, {argument_names.local_files_hint()}"
        raise ConfigurationError(
            f"downloading {location} failed ({_short_reason(error)}); nothing was cached, so the "
            f"next run downloads it again{hint}"
        ) from None
    try:
        _check_download(path, kind)
    except _NotTheExpectedFile as problem:
        _remove_cache_entry(path)
        raise ConfigurationError(
            f"{location} did not give {_WHAT[kind]}: {problem}. The download was removed from "
            f"the cache ({cache_dir}); check the URL{_models_url_note(location)}"
        ) from None
    return path


def _is_published_url(location: str) -> bool:
    return any(
        location in (model.options_url(base), model.weights_url(base))
        for model in PUBLISHED_MODELS.values()
        for base in (DEFAULT_MODELS_URL, models_url())
    )


def _probe(
    location: str, kind: str, cache_dir: str, argument_names: ArgumentNames
) -> Optional[str]:
    """
    One quick HEAD request before ``cached_path`` (which retries a dead connection for about 30
    seconds): no connection gives the cached copy if there is one (what ``cached_path`` would
    do, at once) or the offline error; 404 is an error at once. Anything else is left to
    ``cached_path``, with its retries.
    """
    try:
        response = requests.head(location, allow_redirects=True, timeout=_PROBE_TIMEOUT)
    except (requests.exceptions.ConnectionError, requests.exceptions.Timeout) as error:
        cached = _cached_copy(location, cache_dir)
        if cached is None:
            raise ConfigurationError(
                _offline_message(location, error, cache_dir, argument_names)
            ) from None
        logger.warning(
            "Cannot reach %s (%s); using the cached copy %s", location, _short_reason(error), cached
        )
        try:
            _check_download(cached, kind)
        except _NotTheExpectedFile as problem:
            _remove_cache_entry(cached)
            raise ConfigurationError(
                f"{location} cannot be reached ({_short_reason(error)}) and its cached copy is "
                f"damaged ({problem}; removed). {argument_names.local_files_hint()}"
            ) from None
        return cached
    if response.status_code == 404:
        raise ConfigurationError(
            f"{location}: not found (HTTP 404){_models_url_note(location)}; nothing was downloaded"
        )
    return None


def _offline_message(
    location: str, error: BaseException, cache_dir: str, argument_names: ArgumentNames
) -> str:
    return (
        f"cannot download {location} ({_short_reason(error)}) and it is not in the cache "
        f"({cache_dir}); {argument_names.local_files_hint()}"
    )


def _models_url_note(location: str) -> str:
    base = os.environ.get(MODELS_URL_VARIABLE)
    if base and location.startswith(base.rstrip("/")):
        return f" (the published models are looked for under {MODELS_URL_VARIABLE}={base})"
    return ""


def _short_reason(error: BaseException) -> str:
    """
    The innermost cause of a download error, on one line: ``Connection refused`` rather than
    requests' ``HTTPConnectionPool(host=...): Max retries exceeded ... (Caused by ...)``.
    """
    innermost = error
    seen = set()
    while id(innermost) not in seen:
        seen.add(id(innermost))
        reason = getattr(innermost, "reason", None)  # urllib3's MaxRetryError
        first_argument = innermost.args[0] if innermost.args else None  # requests' wrappers
        if isinstance(reason, BaseException):
            nested: Optional[BaseException] = reason
        elif isinstance(first_argument, BaseException):
            nested = first_argument
        else:
            nested = innermost.__cause__
        if nested is None:
            break
        innermost = nested
    if isinstance(innermost, http.client.IncompleteRead):
        # urllib3 counts bytes (ints), http.client keeps the partial data (bytes).
        received = innermost.partial
        if not isinstance(received, int):
            received = len(received)
        text = f"the connection closed after {received} bytes, {innermost.expected} more expected"
    elif isinstance(innermost, OSError) and innermost.strerror:
        text = innermost.strerror
    else:
        text = str(innermost) or type(innermost).__name__
    return " ".join(text.split())


def _check_download(path: str, kind: str) -> None:
    """Raises `_NotTheExpectedFile` when the file at ``path`` is not a usable ``kind``."""
    if kind == "archive":
        if not (os.path.isdir(path) or tarfile.is_tarfile(path)):
            raise _NotTheExpectedFile(_describe_content(path, "not a tar archive"))
        return
    with open(path, "rb") as handle:
        start = handle.read(512)
    if start.lstrip()[:1] == b"<":
        raise _NotTheExpectedFile(
            "the server sent an HTML or XML page (an error or login page?) instead of the file"
        )
    _CHECKS[kind](path)


def _check_options(path: str) -> None:
    try:
        with open(path, encoding="utf-8") as handle:
            options = json.load(handle)
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise _NotTheExpectedFile(f"it is not JSON ({error})") from None
    try:
        BilmOptions.from_dict(options, source="the file")
    except ConfigurationError as error:
        raise _NotTheExpectedFile(f"it is JSON but not ELMo options ({error})") from None


def _check_weights(path: str) -> None:
    if not h5py.is_hdf5(path):
        raise _NotTheExpectedFile(_describe_content(path, "not an HDF5 file"))
    try:
        # HDF5 records the file's length, so a file cut short fails to open.
        with h5py.File(path, "r") as handle:
            groups = set(handle.keys())
    except OSError as error:
        raise _NotTheExpectedFile(f"a damaged or incomplete HDF5 file ({error})") from None
    missing = [name for name in _WEIGHT_GROUPS if name not in groups]
    if missing:
        raise _NotTheExpectedFile(
            f"an HDF5 file without bilm-tf weights (no {', '.join(missing)}; it has "
            f"{', '.join(sorted(groups)) or 'nothing'})"
        )


_CHECKS: Dict[str, Callable[[str], None]] = {"options": _check_options, "weights": _check_weights}


def _describe_content(path: str, problem: str) -> str:
    return f"{problem} ({os.path.getsize(path)} bytes)"


def _cached_copy(location: str, cache_dir: str) -> Optional[str]:
    """The newest complete cache entry of ``location``, or None (``cached_path``'s own lookup)."""
    if not os.path.isdir(cache_dir):
        return None
    latest = find_latest_cached(location, cache_dir)
    return None if latest is None or latest.is_dir() else str(latest)


def _remove_cache_entry(path: str) -> None:
    """
    Deletes a cache entry the way AllenNLP's ``remove_cache_entries`` does: ``cached_path``
    stores ``CACHE_DIR/sha256(url)[.sha256(etag)]`` with its metadata in ``PATH.json`` and its
    lock in ``PATH.lock``.
    """
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


def describe_published_models(cache_dir: Optional[PathLike] = None) -> str:
    """
    The table that ``allennlp elmo --list-models`` prints: each published model's name, size,
    whether it is cached, and its URLs (under `models_url()`).
    """
    cache_dir = os.fspath(cache_dir) if cache_dir is not None else default_cache_dir()
    base_url = models_url()
    lines = [
        f"Published English ELMo models, for --model NAME (default: {DEFAULT_MODEL}). Each has",
        "3 layers: the token layer and 2 LSTM layers.",
        "",
        f"{'name':<15}{'parameters':>11}{'output dim':>12}  cached",
    ]
    for model in PUBLISHED_MODELS.values():
        urls = (model.options_url(base_url), model.weights_url(base_url))
        if not _is_remote(urls[0]):
            cached = "local"
        else:
            cached = "yes" if all(_cached_copy(url, cache_dir) for url in urls) else "no"
        lines.append(f"{model.name:<15}{model.parameters:>11}{model.output_dim:>12}  {cached}")
    for model in PUBLISHED_MODELS.values():
        lines += ["", f"{model.name}:"]
        lines += [f"  {model.options_url(base_url)}", f"  {model.weights_url(base_url)}"]
    source = base_url
    if os.environ.get(MODELS_URL_VARIABLE):
        source = f"{MODELS_URL_VARIABLE}={base_url}"
    lines += [
        "",
        f"Downloaded on first use from {source}",
        f"into {cache_dir} (ALLENNLP_CACHE_ROOT moves the cache; {MODELS_URL_VARIABLE} replaces",
        "the address, e.g. with a mirror or a local directory of the same layout).",
    ]
    return "\n".join(lines)
