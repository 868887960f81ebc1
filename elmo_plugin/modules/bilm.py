"""
The ELMo biLM as one module: character encoder + bidirectional LSTM, producing every layer.
"""
import logging
import os
from typing import Dict, Iterable, List, Optional, Union

import torch
from torch import nn

from elmo_plugin.modules.elmo_lstm import ElmoBiLstm
from elmo_plugin.modules.character_encoder import CharacterEncoder
from elmo_plugin.data.character_ids import ElmoCharacterIds
from elmo_plugin.bilm_tf.options import BilmOptions
from elmo_plugin.modules.token_cache import TokenEncodingCache, unique_rows

logger = logging.getLogger(__name__)


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

    @classmethod
    def from_files(
        cls,
        options_file: Union[str, os.PathLike],
        weight_file: Optional[Union[str, os.PathLike]],
        stateful: bool = False,
        requires_grad: bool = False,
    ) -> "ElmoBiLm":
        """
        Builds the biLM from a bilm-tf ``options.json`` and loads ``weight_file`` (bilm-tf HDF5)
        into it. ``weight_file=None`` keeps the random initialisation.
        """
        from elmo_plugin.bilm_tf.weights import load_bilm_tf_weights

        bilm = cls(BilmOptions.from_file(options_file), stateful=stateful)
        if weight_file is not None:
            load_bilm_tf_weights(bilm, weight_file, options_source=os.fspath(options_file))
        for parameter in bilm.parameters():
            parameter.requires_grad_(requires_grad)
        return bilm

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
        mask = (character_ids > 0).any(dim=-1)
        lengths = mask.sum(dim=1)
        batch_size, num_tokens, num_chars = character_ids.shape
        with_boundaries = character_ids.new_zeros(batch_size, num_tokens + 2, num_chars)
        with_boundaries[:, 1 : num_tokens + 1] = character_ids
        with_boundaries[:, 0] = self._bos_ids
        with_boundaries[torch.arange(batch_size, device=character_ids.device), lengths + 1] = (
            self._eos_ids
        )
        return with_boundaries, (with_boundaries > 0).any(dim=-1)

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
