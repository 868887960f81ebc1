"""
A biLM as its files store it, read from any model that `elmo_plugin.model_files.resolve` names:
what `ElmoBiLm.from_stored` builds the network from.
"""
import logging
import os
from dataclasses import dataclass
from typing import Dict, Optional, Union

import torch
from allennlp.common.checks import ConfigurationError

from elmo_plugin.common.archive import ModelArchive, open_model_archive, state_dict_under
from elmo_plugin.common.paths import PathLike
from elmo_plugin.model_files.bilm_tf.options import BilmOptions, SwappedModelFilesError
from elmo_plugin.model_files.bilm_tf.weights import read_bilm_tf_weights
from elmo_plugin.model_files.elmoformanylangs import ElmoForManyLangsModel, read_options
from elmo_plugin.model_files.resolve import (
    PYTHON_ARGUMENTS,
    ArgumentNames,
    ModelFiles,
    resolve_model,
)
from elmo_plugin.model_files.tf_hub.elmo_module import read_tf_hub_module

logger = logging.getLogger(__name__)

# The language model's submodule that holds the biLM (`elmo_plugin.models.elmo_language_model`).
_BILM_PREFIX = "bilm."


@dataclass
class StoredBilm:
    """
    A biLM read from its files.

    # Parameters

    options : `BilmOptions`
        Its architecture.
    state : `Dict[str, torch.Tensor]`, optional
        Its state dict, in a layout `ElmoBiLm.load_state_dict` reads; None: no weights.
    elmoformanylangs : `ElmoForManyLangsModel`, optional
        For an ELMoForManyLangs model: its dictionaries (its own character and word ids).
    """

    options: BilmOptions
    state: Optional[Dict[str, torch.Tensor]]
    elmoformanylangs: Optional[ElmoForManyLangsModel] = None


def read_stored_bilm(
    model: Optional[Union[PathLike, ModelFiles]] = None,
    options_file: Optional[PathLike] = None,
    weight_file: Optional[PathLike] = None,
    archive_file: Optional[PathLike] = None,
    argument_names: ArgumentNames = PYTHON_ARGUMENTS,
) -> StoredBilm:
    """
    The biLM of a model, read from its files.

    # Parameters

    model : `str`, `PathLike` or `ModelFiles`, optional
        The model as `resolve_model` takes it, or files already resolved (a ``weight_file`` of
        None: the options only).
    options_file, weight_file, archive_file : `PathLike`, optional
        As `resolve_model` takes them; not together with resolved files.
    argument_names : `ArgumentNames`, optional (default = `PYTHON_ARGUMENTS`)
        How errors spell the model's arguments.

    # Raises

    `ConfigurationError`
        For a model that cannot be found, downloaded or read, on one line naming the file.
    """
    if isinstance(model, ModelFiles):
        if not all(given is None for given in (options_file, weight_file, archive_file)):
            raise ValueError("resolved ModelFiles name the model: give no other files with them")
        files = model
    else:
        files = resolve_model(model, options_file, weight_file, archive_file, argument_names=argument_names)
    logger.info("Loading the ELMo biLM: %s", files.description)
    if files.elmoformanylangs_directory is not None:
        return read_elmoformanylangs_bilm(files.elmoformanylangs_directory)
    if files.tf_hub_directory is not None:
        module = read_tf_hub_module(files.tf_hub_directory)
        return StoredBilm(module.options, module.state)
    if files.archive_file is not None:
        with open_model_archive(files.archive_file) as archive:
            return read_archive_bilm(archive)
    try:
        options = BilmOptions.from_file(files.options_file)
    except SwappedModelFilesError as error:
        # Named as the caller names the two arguments (the command's --options-file).
        raise SwappedModelFilesError(error.path, argument_names.options_file, argument_names.weight_file) from None
    if files.weight_file is None:
        return StoredBilm(options, None)
    state = read_bilm_tf_weights(files.weight_file, options, options_source=os.fspath(files.options_file))
    return StoredBilm(options, state)


def read_stored_options(files: ModelFiles) -> BilmOptions:
    """The architecture of resolved model files, without reading the weights."""
    if files.elmoformanylangs_directory is not None:
        return read_options(files.elmoformanylangs_directory).to_bilm_options()
    if files.tf_hub_directory is not None:
        # Its options come from its variables' shapes: reading them is reading the module.
        return read_tf_hub_module(files.tf_hub_directory).options
    if files.archive_file is not None:
        with open_model_archive(files.archive_file) as archive:
            return _archive_options(archive)
    return BilmOptions.from_file(files.options_file)


def read_elmoformanylangs_bilm(directory: PathLike) -> StoredBilm:
    """The biLM of the ELMoForManyLangs model in ``directory`` (`ElmoForManyLangsModel`)."""
    model = ElmoForManyLangsModel(directory)
    options = model.options
    words = f"{len(model.word_to_id)} words" if model.word_to_id else "no word embedding"
    logger.info(
        "ELMoForManyLangs model %s: %d characters, %s, %d LSTM layers of %d/%d",
        model.directory, len(model.char_to_id), words, options.n_layers, options.lstm_dim, options.projection_dim,
    )
    return StoredBilm(options.to_bilm_options(), model.state, elmoformanylangs=model)


def read_archive_bilm(archive: ModelArchive, weights: Optional[Dict[str, torch.Tensor]] = None) -> StoredBilm:
    """The biLM of an ``elmo_bilm`` training run open as ``archive`` (``weights``: its state dict, if
    the caller has read it already), without the softmax."""
    options = _archive_options(archive)
    if weights is None:
        weights = archive.load_weights()
    return StoredBilm(options, state_dict_under(weights, _BILM_PREFIX))


def _archive_options(archive: ModelArchive) -> BilmOptions:
    model_config = archive.config.get("model", {})
    if model_config.get("type") != "elmo_bilm":
        raise ConfigurationError(
            f"{archive.path} holds a model of type {model_config.get('type')!r}, not an "
            "elmo_bilm language model"
        )
    return BilmOptions.from_dict(model_config.get("options"), source=f"{archive.path} (config.json: model.options)")
