"""
The one resolver of a named ELMo model (`MODEL_FORMS`, docs/models.md) or explicit bilm-tf files into
files on this machine (`ModelFiles`); a published model is resolved and checked once per process.
"""
import glob
import logging
import os
import tarfile
from dataclasses import dataclass
from typing import Dict, NamedTuple, Optional, Tuple

from allennlp.common.checks import ConfigurationError

from elmo_plugin.common.archive import is_model_archive
from elmo_plugin.common.paths import PathLike
from elmo_plugin.model_files.bilm_tf.directory import OPTIONS_NAME, WEIGHTS_NAME
from elmo_plugin.model_files.catalogue import (
    DEFAULT_MODEL,
    PUBLISHED_MODELS,
    is_published_url,
    models_url,
    models_url_note,
)
from elmo_plugin.model_files.download import DownloadError, default_cache_dir, fetch, is_remote
from elmo_plugin.model_files.elmoformanylangs import is_elmoformanylangs_directory
from elmo_plugin.model_files.tf_hub.elmo_module import is_tf_hub_module
from elmo_plugin.model_files.zip_model import (
    ZIP_WEIGHTS_NAME,
    is_zip_model,
    unpacked_zip_model,
    weights_name_in,
)

logger = logging.getLogger(__name__)

# What a model may be, as help texts and errors list it.
MODEL_FORMS = (
    f"a published model's name ({', '.join(PUBLISHED_MODELS)})",
    f"a directory with {OPTIONS_NAME} and {WEIGHTS_NAME} (or {ZIP_WEIGHTS_NAME})",
    f"an NLPL ZIP ({OPTIONS_NAME}, {ZIP_WEIGHTS_NAME})",
    "an elmo_bilm model.tar.gz or serialization directory",
    "an ELMoForManyLangs model directory",
    "a TF-Hub ELMo module's directory (saved_model.pb, variables/)",
)


def describe_model_forms() -> str:
    """`MODEL_FORMS` as one phrase: "a published model's name (...), a directory ..., or ..."."""
    return ", ".join(MODEL_FORMS[:-1]) + ", or " + MODEL_FORMS[-1]


class ArgumentNames(NamedTuple):
    """
    How the caller spells the model arguments (``options_file=`` or ``--options-file``), for errors.

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


PYTHON_ARGUMENTS = ArgumentNames("options_file", "weight_file", "model", "=")


@dataclass(frozen=True)
class ModelFiles:
    """A model resolved to files on this machine: a bilm-tf ``options_file`` and ``weight_file``, an
    ``elmo_bilm`` run's ``archive_file``, an ELMoForManyLangs or TF-Hub directory; ``description`` for logs."""

    options_file: Optional[str] = None
    weight_file: Optional[str] = None
    archive_file: Optional[str] = None
    description: str = ""
    elmoformanylangs_directory: Optional[str] = None
    tf_hub_directory: Optional[str] = None


class IncompleteFilePairError(ConfigurationError):
    """Only one of ``options_file`` and ``weight_file`` was given (a usage error for commands)."""


def check_file_pair(
    options_file: Optional[PathLike],
    weight_file: Optional[PathLike],
    argument_names: ArgumentNames = PYTHON_ARGUMENTS,
) -> None:
    """`IncompleteFilePairError` naming the missing one when only one of the two files is given."""
    if (options_file is None) == (weight_file is None):
        return
    missing = argument_names.weight_file if weight_file is None else argument_names.options_file
    raise IncompleteFilePairError(
        f"{missing} not given: ELMo needs {argument_names.options_file} and "
        f"{argument_names.weight_file} together (a bilm-tf options.json and the weights.hdf5 "
        f"that goes with it), or neither of them and {argument_names.model} (by default the "
        f"published {DEFAULT_MODEL!r} model)"
    )


def resolve_model(
    model: Optional[PathLike] = None,
    options_file: Optional[PathLike] = None,
    weight_file: Optional[PathLike] = None,
    archive_file: Optional[PathLike] = None,
    cache_dir: Optional[PathLike] = None,
    argument_names: ArgumentNames = PYTHON_ARGUMENTS,
) -> ModelFiles:
    """
    Finds the files of a model, downloading and checking them if they are remote.

    # Parameters

    model : `str` or `PathLike`, optional
        One of `MODEL_FORMS` (a ZIP may be a URL); nothing: `DEFAULT_MODEL`. A name wins over a
        directory of the same name (write ``./small`` for the directory).
    options_file : `PathLike`, optional
        A bilm-tf ``options.json``, a path or URL; with ``weight_file``, it wins over ``model``.
    weight_file : `PathLike`, optional
        The ``weights.hdf5`` that goes with ``options_file``; without it, perhaps a ``model.tar.gz``.
    archive_file : `PathLike`, optional
        The ``model.tar.gz`` or serialization directory of an ``elmo_bilm`` run; wins over ``model``.
    cache_dir : `PathLike`, optional
        Where downloads are cached and ZIPs unpacked (default: `default_cache_dir()`).
    argument_names : `ArgumentNames`, optional (default = `PYTHON_ARGUMENTS`)
        How errors spell the arguments.

    # Raises

    `ConfigurationError`
        On one line, for a model that cannot be found or downloaded, or a bad combination of arguments.
    """
    cache_dir = os.fspath(cache_dir) if cache_dir is not None else default_cache_dir()
    request = tuple(None if given is None else os.fspath(given)
                    for given in (model, options_file, weight_file, archive_file))
    published = PUBLISHED_MODELS.get((request[0] or DEFAULT_MODEL).lower())
    # One model however it is named: nothing, "original", "Original".
    key = (published.name if published else request[0], *request[1:], cache_dir, models_url())
    known = _RESOLVED.get(key)
    if known is not None and known[1] == _on_disk(known[0]):
        return known[0]
    files = _resolve(request, cache_dir, argument_names)
    if _never_change(files, request):
        _RESOLVED[key] = (files, _on_disk(files))
    return files


# The resolved published models of this process, with the size and time of their files then.
_RESOLVED: Dict[Tuple[Optional[str], ...], Tuple[ModelFiles, Tuple[Tuple[int, int], ...]]] = {}


def _on_disk(files: ModelFiles) -> Tuple[Tuple[int, int], ...]:
    """The size and modification time of each file: one replaced since it was checked is checked again."""
    try:
        statuses = [os.stat(path) for path in (files.options_file, files.weight_file)]
    except (OSError, TypeError):
        return ()
    return tuple((status.st_size, status.st_mtime_ns) for status in statuses)


def _never_change(files: ModelFiles, request: Tuple[Optional[str], ...]) -> bool:
    """Whether ``files`` are a published model's, which never change: only those are kept for the process."""
    model, options_file, weight_file, archive_file = request
    if archive_file is not None or files.options_file is None:
        return False
    if options_file is not None:
        return is_published_url(options_file) and is_published_url(weight_file)
    return PUBLISHED_MODELS.get((model or DEFAULT_MODEL).lower()) is not None


def _resolve(request: Tuple[Optional[str], ...], cache_dir: str, argument_names: ArgumentNames) -> ModelFiles:
    model, options_file, weight_file, archive_file = request
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
        _log_ignored_model(model, f"{argument_names.options_file} and {argument_names.weight_file}", argument_names)
        return ModelFiles(
            options_file=_fetch(options_file, "options", cache_dir, argument_names),
            weight_file=_fetch(weight_file, "weights", cache_dir, argument_names),
            description=f"{os.fspath(options_file)} and {os.fspath(weight_file)}",
        )

    name = model if model is not None else DEFAULT_MODEL
    published = PUBLISHED_MODELS.get(name.lower())
    if published is not None:
        base_url = models_url()
        options_url, weights_url = published.options_url(base_url), published.weights_url(base_url)
        return ModelFiles(
            options_file=_fetch(options_url, "options", cache_dir, argument_names),
            weight_file=_fetch(weights_url, "weights", cache_dir, argument_names),
            description=f"the published {published.name!r} model ({base_url})",
        )
    if is_remote(name) and name.lower().endswith(".zip"):
        archive = _fetch(name, "zip", cache_dir, argument_names)
        return _directory_model(unpacked_zip_model(archive, cache_dir), description=name)
    return _local_model(name, cache_dir, argument_names)


def _fetch(location: PathLike, kind: str, cache_dir: str, argument_names: ArgumentNames) -> str:
    """`fetch`, its error completed with `models_url_note` and, offline, how to pass local files."""
    location = os.fspath(location)
    try:
        return fetch(location, kind, cache_dir, immutable=is_published_url(location))
    except DownloadError as error:
        message = str(error)
        note = models_url_note(location)
        if note:
            message += f" ({note})"
        if error.offline:
            names, s = argument_names, argument_names.separator
            message += (
                f"; pass local files instead: {names.model}{s}DIRECTORY (holding {OPTIONS_NAME} and "
                f"{WEIGHTS_NAME}) or {names.options_file}{s}OPTIONS_JSON with {names.weight_file}{s}WEIGHTS_HDF5"
            )
        raise ConfigurationError(message) from None


def _log_ignored_model(model, winner: str, argument_names: ArgumentNames) -> None:
    if model is not None:
        logger.warning("%s %s is not used: %s name the model", argument_names.model, os.fspath(model), winner)


def _local_model(name: str, cache_dir: str, argument_names: ArgumentNames) -> ModelFiles:
    """A ``model`` that is not a published name: a directory or an archive on this machine."""
    path = os.path.expanduser(name)
    if os.path.isdir(path):
        return _directory_model(path)
    if os.path.isfile(path):
        if is_zip_model(path):
            return _directory_model(unpacked_zip_model(path, cache_dir), description=path)
        if tarfile.is_tarfile(path):
            return ModelFiles(archive_file=path, description=path)
        raise ConfigurationError(
            f"{argument_names.model} {path}: not a model directory, ZIP or model.tar.gz. For a "
            f"bilm-tf weights.hdf5 give {argument_names.options_file} and "
            f"{argument_names.weight_file}"
        )
    if is_remote(name):
        raise ConfigurationError(
            f"{argument_names.model} takes a published model's name, a local path or the URL of "
            f"a ZIP, not this URL ({name}); for files on a server give "
            f"{argument_names.options_file} and {argument_names.weight_file} as URLs"
        )
    raise ConfigurationError(
        f"unknown ELMo model {name!r}: not a published model ({', '.join(PUBLISHED_MODELS)}) "
        "and no such file or directory"
    )


def _directory_model(directory: str, description: Optional[str] = None) -> ModelFiles:
    """The model in a local directory; ``description``: what it was unpacked from, if it was."""
    if is_tf_hub_module(directory):
        return ModelFiles(tf_hub_directory=directory, description=f"{directory} (TF-Hub module)")
    # ELMoForManyLangs model directories first: they hold a config.json too.
    if is_elmoformanylangs_directory(directory):
        return ModelFiles(elmoformanylangs_directory=directory, description=f"{directory} (ELMoForManyLangs)")
    options = os.path.join(directory, OPTIONS_NAME)
    weights = os.path.join(directory, weights_name_in(directory))
    if os.path.isfile(options) and os.path.isfile(weights):
        description = directory if description is None else f"{description} (unpacked in {directory})"
        return ModelFiles(options_file=options, weight_file=weights, description=description)
    if os.path.isfile(os.path.join(directory, "config.json")):
        # A serialization directory (or an extracted model.tar.gz) of a training run.
        return ModelFiles(archive_file=directory, description=directory)
    # Published files as downloaded by hand: elmo_<architecture>_options.json and _weights.hdf5.
    options_files = glob.glob(os.path.join(glob.escape(directory), "*" + OPTIONS_NAME))
    weight_files = glob.glob(os.path.join(glob.escape(directory), "*" + WEIGHTS_NAME))
    if len(options_files) == 1 and len(weight_files) == 1:
        return ModelFiles(options_file=options_files[0], weight_file=weight_files[0], description=directory)
    raise ConfigurationError(
        f"{directory} holds no ELMo model: expected {OPTIONS_NAME} and {WEIGHTS_NAME} (what "
        f"allennlp elmo-export writes) or {ZIP_WEIGHTS_NAME} (an NLPL model), the config.json of "
        "an elmo_bilm training run, a TF-Hub module (saved_model.pb, variables/) or an "
        "ELMoForManyLangs model (config.json, char.dic, token_embedder.pkl, encoder.pkl)"
    )
