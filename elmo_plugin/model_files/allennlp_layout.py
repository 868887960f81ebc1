"""
The state-dict layout of AllenNLP's own ELMo biLM (``allennlp.modules.elmo._ElmoBiLm``), converted
to ours as a model trained with AllenNLP's embedder is loaded (docs/implementation.md, "Weight
layouts"). The layout is told by key names only, never by shapes.
"""
import logging
from typing import Dict, List, Mapping, Optional, Set

import torch
from allennlp.common.checks import ConfigurationError

from elmo_plugin.model_files import parameter_names as names
from elmo_plugin.model_files.allennlp_conventions import (
    highway_key,
    highways_from_allennlp,
    lstm_cell_key,
    lstm_cell_shape,
    lstm_stack_from_allennlp,
)
from elmo_plugin.model_files.bilm_tf.options import BilmOptions

logger = logging.getLogger(__name__)

# Where AllenNLP's _ElmoBiLm keeps its parts, relative to the biLM.
_TOKEN_EMBEDDER = "_token_embedder."
_HIGHWAYS = _TOKEN_EMBEDDER + "_highways."
_LSTM = "_elmo_lstm."
# First components of the keys of AllenNLP's layout (ours: `parameter_names.ROOTS`), relative to the biLM.
ALLENNLP_ROOTS = ("_token_embedder", "_elmo_lstm", "_word_embedding", "_bos_embedding", "_eos_embedding")
# AllenNLP's vocab_to_cache tables: not parameters of the biLM's computation.
_CACHE_KEYS = ("_word_embedding.weight", "_bos_embedding", "_eos_embedding")
_SHOWN_KEYS = 8


def _listing(keys: List[str]) -> str:
    shown = ", ".join(sorted(keys)[:_SHOWN_KEYS])
    return shown + (f", ... ({len(keys)} in all)" if len(keys) > _SHOWN_KEYS else "")


def bilm_state_layout(state_dict: Mapping[str, torch.Tensor], prefix: str) -> Optional[str]:
    """``"allennlp"`` or ``"elmo_plugin"``: the layout of the biLM weights under ``prefix`` in
    ``state_dict``; None if there are none. A mix of both, or keys of neither, is a `ConfigurationError`."""
    roots: Dict[str, List[str]] = {"allennlp": [], "elmo_plugin": [], "neither": []}
    for key in state_dict:
        if key.startswith(prefix):
            root = key[len(prefix) :].split(".", 1)[0]
            layout = "allennlp" if root in ALLENNLP_ROOTS else "elmo_plugin" if root in names.ROOTS else "neither"
            roots[layout].append(key)
    where = f"the biLM weights under '{prefix}'" if prefix else "the biLM weights"
    if roots["neither"]:
        raise ConfigurationError(
            f"{where} fit neither elmo_plugin's layout (character_encoder.*, lstm.*) nor "
            f"AllenNLP's (_token_embedder.*, _elmo_lstm.*): {_listing(roots['neither'])}"
        )
    if roots["allennlp"] and roots["elmo_plugin"]:
        raise ConfigurationError(
            f"{where} mix AllenNLP's layout ({_listing(roots['allennlp'])}) with elmo_plugin's "
            f"({_listing(roots['elmo_plugin'])})"
        )
    return next((layout for layout in ("allennlp", "elmo_plugin") if roots[layout]), None)


def allennlp_bilm_key_map(options: BilmOptions, has_projection: Optional[bool] = None) -> Dict[str, str]:
    """Every key of AllenNLP's layout for a biLM of ``options``' architecture, mapped to the key of
    ours it becomes, both relative to the biLM. ``has_projection`` as in `parameter_names.state_dict_keys`."""
    if has_projection is None:
        has_projection = options.has_character_projection
    mapping = {_TOKEN_EMBEDDER + "_char_embedding_weights": names.CHARACTER_EMBEDDING}
    for kind in names.WEIGHT_AND_BIAS:
        for index in range(len(options.filters)):
            mapping[f"{_TOKEN_EMBEDDER}char_conv_{index}.{kind}"] = names.convolution(index, kind)
        for index in range(options.n_highway):
            mapping[_HIGHWAYS + highway_key(index, kind)] = names.highway(index, kind)
        if has_projection:
            mapping[f"{_TOKEN_EMBEDDER}_projection.{kind}"] = names.projection(kind)
    for direction in names.DIRECTIONS:
        for layer in range(options.n_layers):
            for parameter in names.LSTM_PARAMETERS:
                mapping[_LSTM + lstm_cell_key(direction, layer, parameter)] = names.lstm(direction, layer, parameter)
    return mapping


def convert_allennlp_bilm_state(
    state_dict: Dict[str, torch.Tensor],
    prefix: str,
    options: BilmOptions,
    own_state: Mapping[str, torch.Tensor],
) -> None:
    """Replaces, in place, the AllenNLP-layout biLM weights under ``prefix`` in ``state_dict`` by ours,
    for the biLM of ``options`` whose own state dict is ``own_state``; a `ConfigurationError` where they
    do not fit."""
    mapping = allennlp_bilm_key_map(options, has_projection=names.projection("weight") in own_state)
    present: Set[str] = {key[len(prefix) :] for key in state_dict if key.startswith(prefix)}
    unknown = sorted(prefix + key for key in present if key not in mapping and key not in _CACHE_KEYS)
    missing = sorted(prefix + key for key in mapping if key not in present)
    if unknown or missing:
        problems = []
        if unknown:
            problems.append(f"keys this biLM's options do not have: {_listing(unknown)}")
        if missing:
            problems.append(f"missing keys: {_listing(missing)}")
        raise ConfigurationError(
            f"the biLM weights under '{prefix}' are in AllenNLP's layout but do not fit this "
            f"biLM ({options.n_layers} LSTM layers, {len(options.filters)} filter "
            f"widths, {options.n_highway} highway layers; is it built from the options "
            f"the model was trained with?): {'; '.join(problems)}"
        )
    for theirs, ours in mapping.items():
        value = state_dict[prefix + theirs]
        expected = tuple(own_state[ours].shape)
        if ours.startswith(names.LSTM + "."):
            expected = lstm_cell_shape(ours.rsplit(".", 1)[1], expected)
        if tuple(value.shape) != expected:
            raise ConfigurationError(
                f"{prefix}{theirs} (AllenNLP's layout) has shape {tuple(value.shape)}, but this "
                f"biLM needs {expected} there; is it built from the options the model was "
                "trained with?"
            )
    converted = {ours: state_dict[prefix + theirs] for theirs, ours in mapping.items()}
    # Row 0, the padding id, which AllenNLP's loader leaves as it finds it, is our zero padding_idx.
    embedding = converted[names.CHARACTER_EMBEDDING].clone()
    embedding[0] = 0.0
    converted[names.CHARACTER_EMBEDDING] = embedding
    converted.update(highways_from_allennlp(state_dict, prefix + _HIGHWAYS, options.n_highway))
    converted.update(lstm_stack_from_allennlp(state_dict, prefix + _LSTM, options.n_layers, options.lstm_dim))
    for key in present:
        del state_dict[prefix + key]
    state_dict.update({prefix + key: value.contiguous() for key, value in converted.items()})
    logger.info("converted the biLM weights under '%s' from AllenNLP's layout", prefix)
