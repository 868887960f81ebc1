"""
Reading what an ``allennlp train`` run saved (``model.tar.gz`` or serialization directory),
without building its model as ``load_archive`` does, with errors that name the file.
"""
import contextlib
import json
import os
import tarfile
import tempfile
import zlib
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any, Dict, Iterator

import torch
from allennlp.common.checks import ConfigurationError
from allennlp.models.archival import _WEIGHTS_NAME, CONFIG_NAME  # "config.json", "weights.th"
from allennlp.models.model import _DEFAULT_WEIGHTS  # "best.th", in a serialization directory

from elmo_plugin.common.paths import PathLike
from elmo_plugin.common.write_errors import is_write_failure, write_failure

VOCABULARY_DIRECTORY = "vocabulary"


def is_model_archive(path: PathLike) -> bool:
    """True for a ``model.tar.gz`` or a directory (a serialization directory), not for an HDF5 file."""
    path = os.fspath(path)
    return os.path.isdir(path) or (os.path.isfile(path) and tarfile.is_tarfile(path))


@dataclass
class ModelArchive:
    """The files of a training run (``path`` as given, for messages), on disk for as long as
    `open_model_archive`'s block runs."""

    path: str
    config: Dict[str, Any]
    weights_file: str
    vocabulary_directory: str

    def load_weights(self) -> Dict[str, torch.Tensor]:
        """The model's state dict, on the CPU."""
        try:
            return torch.load(self.weights_file, map_location="cpu", weights_only=True)
        except (RuntimeError, EOFError, OSError, ValueError) as error:
            raise ConfigurationError(
                f"{self.path}: cannot read the model weights {os.path.basename(self.weights_file)} "
                f"({error}); is the archive complete?"
            ) from None


@contextlib.contextmanager
def open_model_archive(path: PathLike) -> Iterator[ModelArchive]:
    """
    Opens a ``model.tar.gz`` (extracted into a temporary directory) or a serialization directory.
    Raises `ConfigurationError` naming ``path`` when it does not exist, is neither, is damaged, or
    lacks the config or the weights.
    """
    path = os.fspath(path)
    if not os.path.exists(path):
        raise ConfigurationError(f"no model archive or serialization directory at {path}")
    if os.path.isdir(path):
        yield _archive_in_directory(path, path, _DEFAULT_WEIGHTS)
        return
    if not tarfile.is_tarfile(path):
        raise ConfigurationError(f"{path} is neither a model archive (model.tar.gz) nor a serialization directory")
    with tempfile.TemporaryDirectory(prefix="elmo_plugin_archive_") as directory:
        try:
            with tarfile.open(path, "r:*") as archive:
                archive.extractall(directory, filter="data")
        except (tarfile.TarError, EOFError, zlib.error, OSError) as error:
            if is_write_failure(error):
                # Not the archive's fault: its temporary copy did not fit.
                raise write_failure(
                    f"{directory} (where {path} is extracted; TMPDIR chooses the place)",
                    error,
                    "nothing else was touched",
                ) from None
            raise ConfigurationError(
                f"{path}: the model archive is damaged or incomplete ({type(error).__name__}: "
                f"{error}); was it copied whole?"
            ) from None
        yield _archive_in_directory(path, directory, _WEIGHTS_NAME)


def _archive_in_directory(path: str, directory: str, weights_name: str) -> ModelArchive:
    config_file = os.path.join(directory, CONFIG_NAME)
    weights_file = os.path.join(directory, weights_name)
    missing = [name for name, file in ((CONFIG_NAME, config_file), (weights_name, weights_file))
               if not os.path.isfile(file)]
    if missing:
        what = "the serialization directory of a trained model" if path == directory else "a model archive"
        hint = " (has training finished an epoch yet?)" if path == directory else ""
        raise ConfigurationError(f"{path} is not {what}: it has no {' and no '.join(missing)}{hint}")
    try:
        with open(config_file, encoding="utf-8") as handle:
            config = json.load(handle)
    except (ValueError, OSError) as error:
        raise ConfigurationError(f"{path}: cannot read {CONFIG_NAME} ({error})") from None
    return ModelArchive(path, config, weights_file, os.path.join(directory, VOCABULARY_DIRECTORY))


def state_dict_under(state_dict: Dict[str, torch.Tensor], prefix: str) -> Dict[str, torch.Tensor]:
    """The entries of ``state_dict`` below the submodule ``prefix`` (``"bilm."``), with the prefix
    removed, and PyTorch's per-module ``_metadata`` along with them."""
    selected: Dict[str, torch.Tensor] = OrderedDict(
        (key[len(prefix) :], value) for key, value in state_dict.items() if key.startswith(prefix)
    )
    metadata = getattr(state_dict, "_metadata", None)
    if metadata is not None:
        module = prefix.rstrip(".")
        selected._metadata = OrderedDict(  # type: ignore[attr-defined]
            ("" if key == module else key[len(prefix) :], value)
            for key, value in metadata.items()
            if key == module or key.startswith(prefix)
        )
    return selected
