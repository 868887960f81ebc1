"""
The ELMo biLM as one module: character encoder + bidirectional LSTM, producing every layer.
"""
import logging
import os
from typing import Dict, Iterable, List, Optional, Union

import torch
from allennlp.common.checks import ConfigurationError
from torch import nn

from elmo_plugin.bilm_tf.options import BilmOptions
from elmo_plugin.bilm_tf.weights import read_bilm_tf_weights, write_bilm_tf_model
from elmo_plugin.common.archive import ModelArchive, open_model_archive, state_dict_under
from elmo_plugin.common.util import PathLike
from elmo_plugin.data.character_ids import ElmoCharacterIds
from elmo_plugin.model_files.allennlp_layout import bilm_state_layout, convert_allennlp_bilm_state
from elmo_plugin.modules.character_encoder import CharacterEncoder
from elmo_plugin.modules.elmo_lstm import ElmoBiLstm
from elmo_plugin.modules.token_cache import TokenEncodingCache, unique_rows
from elmo_plugin.modules.util import add_sentence_boundaries, character_mask

logger = logging.getLogger(__name__)

# The layout of the biLM's state dict, saved in it as the buffer ``format_version`` (so also in
# every model archive of a model that holds a biLM). Archives written before the format was
# recorded (elmo_plugin 0.1) have no such entry; `ElmoBiLm` converts them when they are loaded
# (see `_upgrade_unversioned_state`).
FORMAT_VERSION = 1


class ElmoBiLm(nn.Module):
    """
    A character-based bidirectional language model that returns ELMo's layers.

    Input is a ``(batch, time, max_characters_per_token)`` tensor of +1-shifted character ids
    *without* sentence boundaries (what the ``elmo_characters`` indexer produces); ``<S>`` and
    ``</S>`` are added here, as in AllenNLP's ``_ElmoBiLm``.

    # Parameters

    options : `BilmOptions`
        The architecture (see `BilmOptions.from_file`).
    stateful : `bool`, optional (default = `False`)
        Carry the LSTM state from one batch to the next, row by row, as the original bilm-tf did.
        The default starts every batch from zero, so a sentence always gets the same vectors.
    """

    def __init__(self, options: BilmOptions, stateful: bool = False) -> None:
        super().__init__()
        self.options = options
        self.character_ids = ElmoCharacterIds(options.max_characters_per_token)
        self.character_encoder = CharacterEncoder(
            filters=options.filters,
            char_embedding_dim=options.char_embedding_dim,
            n_highway=options.n_highway,
            projection_dim=options.projection_dim,
            activation=options.activation,
        )
        self.lstm = ElmoBiLstm(
            input_size=options.projection_dim,
            cell_size=options.lstm_dim,
            projection_size=options.projection_dim,
            num_layers=options.n_layers,
            cell_clip=options.cell_clip,
            proj_clip=options.proj_clip,
            use_skip_connections=options.use_skip_connections,
            dropout=options.dropout,
            stateful=stateful,
        )
        # Character-encoder outputs of frequent tokens (`cache_tokens`); None: encode everything.
        self.token_cache: Optional[TokenEncodingCache] = None
        self.register_buffer(
            "_bos_ids", torch.tensor(self.character_ids.beginning_of_sentence_ids), persistent=False
        )
        self.register_buffer(
            "_eos_ids", torch.tensor(self.character_ids.end_of_sentence_ids), persistent=False
        )
        self.register_buffer("format_version", torch.tensor(FORMAT_VERSION), persistent=True)
        # Loading weights (a model archive's over those of the files the model was built from)
        # must not leave a token cache computed from the old ones.
        self.register_load_state_dict_post_hook(_recompute_token_cache)

    @classmethod
    def from_files(
        cls,
        options_file: PathLike,
        weight_file: Optional[PathLike],
        stateful: bool = False,
        requires_grad: bool = False,
    ) -> "ElmoBiLm":
        """
        Builds the biLM from a bilm-tf ``options.json`` and loads ``weight_file`` (bilm-tf HDF5)
        into it. ``weight_file=None`` keeps the random initialisation.
        """
        options = BilmOptions.from_file(options_file)
        bilm = cls(options, stateful=stateful)
        if weight_file is not None:
            bilm.copy_weights_(
                read_bilm_tf_weights(weight_file, options, options_source=os.fspath(options_file))
            )
        bilm.requires_grad_(requires_grad)
        return bilm

    @classmethod
    def from_archive(
        cls, archive_file: PathLike, stateful: bool = False, requires_grad: bool = False
    ) -> "ElmoBiLm":
        """
        The biLM of an ``elmo_bilm`` training run: its ``model.tar.gz`` or serialization
        directory. Only the biLM's weights are read (the language model's softmax is not
        built); archives of earlier versions of the plugin are converted as they load.
        """
        with open_model_archive(archive_file) as archive:
            return cls.from_archive_contents(
                archive, stateful=stateful, requires_grad=requires_grad
            )

    @classmethod
    def from_archive_contents(
        cls,
        archive: ModelArchive,
        weights: Optional[Dict[str, torch.Tensor]] = None,
        stateful: bool = False,
        requires_grad: bool = False,
    ) -> "ElmoBiLm":
        """
        `from_archive` for an archive that is already open (`open_model_archive`); ``weights``
        is its state dict if the caller has read it already.
        """
        model_config = archive.config.get("model", {})
        if model_config.get("type") != "elmo_bilm":
            raise ConfigurationError(
                f"{archive.path} holds a model of type {model_config.get('type')!r}, not an "
                "elmo_bilm language model"
            )
        options = BilmOptions.from_dict(
            model_config.get("options"), source=f"{archive.path} (config.json: model.options)"
        )
        bilm = cls(options, stateful=stateful)
        if weights is None:
            weights = archive.load_weights()
        bilm.load_state_dict(state_dict_under(weights, "bilm."))
        bilm.requires_grad_(requires_grad)
        return bilm

    def to_files(
        self, options_file: PathLike, weight_file: PathLike, n_characters: Optional[int] = None
    ) -> None:
        """
        Writes the biLM as bilm-tf ``options.json`` and ``weights.hdf5``, each atomically;
        ``n_characters`` (261 or 262) overrides the options' value.
        """
        write_bilm_tf_model(self.state_dict(), self.options, options_file, weight_file, n_characters)

    def copy_weights_(self, state: Dict[str, torch.Tensor]) -> None:
        """
        Copies every parameter from ``state`` (a state dict in the current format, e.g. read from
        a bilm-tf file); a missing or extra name, or another shape, is an error.
        """
        parameters = dict(self.named_parameters())
        if set(parameters) != set(state):
            raise ValueError(
                f"the weights do not fit this biLM: missing {sorted(set(parameters) - set(state))}, "
                f"unexpected {sorted(set(state) - set(parameters))}"
            )
        with torch.no_grad():
            for name, parameter in parameters.items():
                parameter.copy_(state[name])

    def _load_from_state_dict(self, state_dict, prefix, *args, **kwargs):
        key = prefix + "format_version"
        # A model trained with AllenNLP's own elmo_token_embedder (see allennlp_layout).
        if bilm_state_layout(state_dict, prefix) == "allennlp":
            convert_allennlp_bilm_state(state_dict, prefix, self)
            state_dict[key] = torch.tensor(FORMAT_VERSION)
        if key not in state_dict:
            _upgrade_unversioned_state(state_dict, prefix, self)
            state_dict[key] = torch.tensor(FORMAT_VERSION)
        elif int(state_dict[key]) > FORMAT_VERSION:
            raise ConfigurationError(
                f"these weights have format version {int(state_dict[key])}, newer than this "
                f"elmo_plugin reads ({FORMAT_VERSION}); upgrade elmo_plugin"
            )
        super()._load_from_state_dict(state_dict, prefix, *args, **kwargs)

    @property
    def stateful(self) -> bool:
        return self.lstm.stateful

    @stateful.setter
    def stateful(self, value: bool) -> None:
        self.lstm.stateful = value
        self.lstm.reset_states()

    def reset_states(self) -> None:
        """Forget the state carried between batches (stateful mode only)."""
        self.lstm.reset_states()

    def get_output_dim(self) -> int:
        return self.options.output_dim

    @property
    def num_layers(self) -> int:
        """Number of output layers: the token layer plus one per LSTM layer."""
        return self.options.num_output_layers

    def add_sentence_boundaries(self, character_ids: torch.Tensor):
        """Adds ``<S>``/``</S>`` around every row; returns the new ids and their mask."""
        return add_sentence_boundaries(
            character_ids, character_mask(character_ids), self._bos_ids, self._eos_ids
        )

    def cache_tokens(self, tokens: Optional[Iterable[str]]) -> None:
        """
        Computes the character encoder's output once for each of ``tokens`` (and ``<S>``,
        ``</S>``) and reuses it while the encoder is frozen; ``None`` drops the cache. The cache is
        not saved with the weights; call this again after loading new ones.
        """
        self.token_cache = (
            None
            if tokens is None
            else TokenEncodingCache.build(tokens, self.character_ids, self.character_encoder)
        )

    def _cache_usable(self) -> bool:
        # A cache of a trainable encoder would go stale after the first update.
        return self.token_cache is not None and not any(
            parameter.requires_grad for parameter in self.character_encoder.parameters()
        )

    def _encode_unique(self, flat_ids: torch.Tensor) -> torch.Tensor:
        """
        The character encoder's output for ``(n, max_characters)`` ids, each distinct token
        encoded once: in running text most tokens of a batch repeat ("the", ".", "<S>"), and
        the character CNN and highway layers cost more than the LSTM at ELMo's Small size.
        Gradients flow back through the gather to every occurrence.
        """
        deduplicated = unique_rows(flat_ids) if flat_ids.size(0) > 1 else None
        if deduplicated is None:
            return self.character_encoder(flat_ids)
        unique_ids, inverse = deduplicated
        return self.character_encoder(unique_ids)[inverse]

    def encode_tokens(self, character_ids: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """Token vectors ``(batch, time, projection_dim)``, computed only at unmasked positions."""
        batch_size, num_tokens, num_chars = character_ids.shape
        flat_mask = mask.reshape(-1)
        flat_ids = character_ids.reshape(-1, num_chars)[flat_mask]
        if self._cache_usable():
            found, cached = self.token_cache.lookup(flat_ids)
            encoded = cached.new_empty(flat_ids.size(0), cached.size(-1))
            encoded[found] = cached
            missing = ~found
            if missing.any():
                encoded[missing] = self._encode_unique(flat_ids[missing])
        else:
            encoded = self._encode_unique(flat_ids)
        tokens = encoded.new_zeros(batch_size * num_tokens, encoded.size(-1))
        tokens[flat_mask] = encoded
        return tokens.view(batch_size, num_tokens, -1)

    def forward(self, character_ids: torch.Tensor) -> Dict[str, Union[torch.Tensor, List[torch.Tensor]]]:
        """
        # Returns

        ``"activations"``: a list of ``num_layers`` tensors ``(batch, time + 2, 2 * projection_dim)``
        (layer 0 is the token vector written twice, then one per LSTM layer), including the
        sentence boundary positions; ``"mask"``: ``(batch, time + 2)`` bool.
        """
        if character_ids.size(-1) != self.options.max_characters_per_token:
            raise ValueError(
                f"character ids have {character_ids.size(-1)} characters per token, but this "
                f"biLM was built for {self.options.max_characters_per_token}"
            )
        ids, mask = self.add_sentence_boundaries(character_ids)
        tokens = self.encode_tokens(ids, mask)
        layer_mask = mask.unsqueeze(-1).to(tokens.dtype)
        activations = [torch.cat([tokens, tokens], dim=-1)]
        activations.extend(layer * layer_mask for layer in self.lstm(tokens, mask))
        return {"activations": activations, "mask": mask}


def _recompute_token_cache(bilm: ElmoBiLm, incompatible_keys) -> None:
    if bilm.token_cache is not None:
        bilm.token_cache.recompute_(bilm.character_encoder)


def _upgrade_unversioned_state(state_dict: Dict[str, torch.Tensor], prefix: str, bilm: ElmoBiLm) -> None:
    """
    Converts, in place, the biLM weights of an archive written before the state dict recorded
    its format. Those archives differ only in the layout of the LSTM matrices:

    - elmo_plugin 0.1 from commit 56023b8 on (the last of them 4a227d1) stored them in
      TensorFlow's ``(in, out)`` layout, as now;
    - before that commit, in PyTorch's ``(out, in)`` layout.

    Which one a layer has is read off its recurrent matrix, ``(projection, 4 * cell)`` against
    ``(4 * cell, projection)``, and then applied to all three matrices of the layer: the
    projection matrix alone could not tell (it is square when ``cell == projection``). A layer
    whose recurrent matrix is square too (``projection == 4 * cell``) cannot be told at all and
    is an error rather than a guess.
    """
    for direction in ("forward_layers", "backward_layers"):
        for index, layer in enumerate(getattr(bilm.lstm, direction)):
            layer_prefix = f"{prefix}lstm.{direction}.{index}."
            recurrent = state_dict.get(layer_prefix + "recurrent_weight")
            if recurrent is None:
                continue  # missing keys are reported by load_state_dict
            current_shape = tuple(layer.recurrent_weight.shape)
            if current_shape[0] == current_shape[1]:
                raise ConfigurationError(
                    f"cannot convert {layer_prefix}recurrent_weight of an archive without a format "
                    f"version: it is square {current_shape}, so its layout is unknown"
                )
            if tuple(recurrent.shape) == current_shape:
                continue
            logger.info("converting %s* from the (out, in) layout of old archives", layer_prefix)
            for name in ("input_weight", "recurrent_weight", "projection_weight"):
                key = layer_prefix + name
                if key in state_dict:
                    state_dict[key] = state_dict[key].t()
