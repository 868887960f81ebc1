"""
The ELMo biLM as one module: character encoder + bidirectional LSTM, producing every layer.
"""
import os
from typing import Any, Dict, Iterable, List, Optional, Tuple, Union

import torch
from torch import nn

from elmo_plugin.common.paths import PathLike
from elmo_plugin.data.character_ids import ElmoCharacterIds
from elmo_plugin.data.elmoformanylangs_character_ids import ElmoForManyLangsCharacterIds
from elmo_plugin.model_files import parameter_names
from elmo_plugin.model_files.bilm_state import format_version, upgrade_bilm_state
from elmo_plugin.model_files.bilm_tf.options import BilmOptions
from elmo_plugin.model_files.elmoformanylangs import ElmoForManyLangsModel
from elmo_plugin.model_files.resolve import PYTHON_ARGUMENTS, ArgumentNames, ModelFiles
from elmo_plugin.model_files.stored_bilm import StoredBilm, read_stored_bilm
from elmo_plugin.modules.character_encoder import CharacterEncoder
from elmo_plugin.modules.elmo_lstm import ElmoBiLstm
from elmo_plugin.modules.execution.plan import ExecutionPlan, fixed_shape
from elmo_plugin.modules.token_cache import TokenEncodingCache, unique_rows
from elmo_plugin.modules.util import add_sentence_boundaries, character_mask


class ElmoBiLm(nn.Module):
    """
    A character-based bidirectional language model that returns ELMo's layers, built with random
    weights; `from_model` and `from_files` load a pretrained one as the class they are called on,
    and ``load_state_dict`` takes any earlier layout (`elmo_plugin.model_files.bilm_state`).
    Its input is the ``elmo_characters`` indexer's character ids; ``<S>`` and ``</S>`` are added
    here, as in AllenNLP's ``_ElmoBiLm``.

    # Parameters

    options : `BilmOptions`
        The architecture (see `BilmOptions.from_file`).
    stateful : `bool`, optional (default = `False`)
        Carry the LSTM state from one batch to the next, row by row, as bilm-tf did.
    character_ids : `ElmoCharacterIds`, optional
        How tokens become rows of ids, ``<S>``/``</S>`` included; bilm-tf's UTF-8 byte ids by
        default (ELMoForManyLangs' rows carry a word id too).
    character_encoder : `CharacterEncoder`, optional
        The token encoder, when it is not the one ``options`` describe.
    """

    def __init__(
        self,
        options: BilmOptions,
        stateful: bool = False,
        character_ids: Optional[ElmoCharacterIds] = None,
        character_encoder: Optional[CharacterEncoder] = None,
    ) -> None:
        super().__init__()
        self.options = options
        if character_ids is None:
            character_ids = ElmoCharacterIds(options.max_characters_per_token)
        self.character_ids = character_ids
        if character_encoder is None:
            character_encoder = CharacterEncoder.from_options(options)
        self.character_encoder = character_encoder
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
        for name, ids in (("_bos_ids", character_ids.beginning_of_sentence_ids),
                          ("_eos_ids", character_ids.end_of_sentence_ids)):
            self.register_buffer(name, torch.tensor(ids), persistent=False)
        self.register_buffer(parameter_names.FORMAT_VERSION, format_version(), persistent=True)
        # Loading weights (a model archive's over those of the files the model was built from)
        # must not leave a token cache computed from the old ones.
        self.register_load_state_dict_post_hook(_recompute_token_cache)

    @classmethod
    def from_model(
        cls,
        model: Optional[Union[PathLike, ModelFiles]] = None,
        options_file: Optional[PathLike] = None,
        weight_file: Optional[PathLike] = None,
        archive_file: Optional[PathLike] = None,
        stateful: bool = False,
        requires_grad: bool = False,
        argument_names: ArgumentNames = PYTHON_ARGUMENTS,
        **kwargs: Any,
    ) -> "ElmoBiLm":
        """
        The pretrained biLM of a model, built as this class (a subclass gets itself back).

        # Parameters

        model : `str`, `PathLike` or `ModelFiles`, optional
            Any model `elmo_plugin.model_files.resolve.resolve_model` names (nothing: the
            published ``original``), or files already resolved.
        options_file, weight_file, archive_file : `PathLike`, optional
            As `resolve_model` takes them.
        stateful : `bool`, optional (default = `False`)
        requires_grad : `bool`, optional (default = `False`)
            Leave the weights trainable; by default the biLM is frozen.
        argument_names : `ArgumentNames`, optional (default = `PYTHON_ARGUMENTS`)
            How errors spell the model's arguments (a command passes its own options' names).
        **kwargs
            Passed on to the constructor.
        """
        stored = read_stored_bilm(
            model,
            options_file=options_file,
            weight_file=weight_file,
            archive_file=archive_file,
            argument_names=argument_names,
        )
        return cls.from_stored(stored, stateful=stateful, requires_grad=requires_grad, **kwargs)

    @classmethod
    def from_files(
        cls,
        options_file: PathLike,
        weight_file: Optional[PathLike],
        stateful: bool = False,
        requires_grad: bool = False,
        **kwargs: Any,
    ) -> "ElmoBiLm":
        """
        `from_model` of a local bilm-tf ``options.json`` and ``weight_file`` (None: random weights).
        """
        files = ModelFiles(
            options_file=os.fspath(options_file),
            weight_file=None if weight_file is None else os.fspath(weight_file),
            description=f"{os.fspath(options_file)} and {weight_file}",
        )
        return cls.from_model(files, stateful=stateful, requires_grad=requires_grad, **kwargs)

    @classmethod
    def from_stored(
        cls, stored: StoredBilm, stateful: bool = False, requires_grad: bool = False, **kwargs: Any
    ) -> "ElmoBiLm":
        """This class built as ``stored`` describes it, with its weights if it has them."""
        if stored.elmoformanylangs is not None:
            kwargs = {**_elmoformanylangs_parts(stored.options, stored.elmoformanylangs), **kwargs}
        bilm = cls(stored.options, stateful=stateful, **kwargs)
        if stored.state is not None:
            bilm.load_state_dict(stored.state)
        bilm.requires_grad_(requires_grad)
        return bilm

    def _load_from_state_dict(self, state_dict, prefix, *args, **kwargs):
        # Weights saved in an earlier layout are converted wherever a model holds the biLM.
        upgrade_bilm_state(state_dict, prefix, self.options, self.state_dict())
        super()._load_from_state_dict(state_dict, prefix, *args, **kwargs)

    @property
    def training_dropout(self) -> float:
        """The dropout on every LSTM layer's input while training (``options.dropout``)."""
        return self.lstm.dropout

    @training_dropout.setter
    def training_dropout(self, value: float) -> None:
        self.lstm.dropout = value

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
        ``</S>``) and reuses it while the encoder is frozen; ``None`` drops the cache.
        """
        self.token_cache = None if tokens is None else TokenEncodingCache.build(
            tokens, self.character_ids, self.character_encoder
        )

    def _cache_usable(self) -> bool:
        # A cache of a trainable encoder would go stale after the first update.
        return self.token_cache is not None and not any(
            parameter.requires_grad for parameter in self.character_encoder.parameters()
        )

    def _encode_unique(self, flat_ids: torch.Tensor, execution: Optional[ExecutionPlan] = None
                       ) -> torch.Tensor:
        # Each distinct token once: most tokens of a batch repeat ("the", ".", "<S>"), and the
        # character CNN costs more than the LSTM at ELMo's Small size.
        deduplicated = unique_rows(flat_ids) if flat_ids.size(0) > 1 else None
        if deduplicated is None:
            return self.character_encoder(flat_ids, execution)
        unique_ids, inverse = deduplicated
        return self.character_encoder(unique_ids, execution)[inverse]

    def encode_tokens(self, character_ids: torch.Tensor, mask: torch.Tensor,
                      execution: Optional[ExecutionPlan] = None) -> torch.Tensor:
        """
        Token vectors ``(batch, time, projection_dim)``, zero at masked positions; with a plan's
        ``fixed_shape`` every position is encoded (no shape depends on the data).
        """
        batch_size, num_tokens, num_chars = character_ids.shape
        if fixed_shape(execution):
            encoded = self.character_encoder(character_ids.reshape(-1, num_chars), execution)
            encoded = encoded.view(batch_size, num_tokens, encoded.size(-1))
            return torch.where(mask.unsqueeze(-1), encoded, encoded.new_zeros(()))
        flat_mask = mask.reshape(-1)
        flat_ids = character_ids.reshape(-1, num_chars)[flat_mask]
        if self._cache_usable():
            found, cached = self.token_cache.lookup(flat_ids)
            encoded = cached.new_empty(flat_ids.size(0), cached.size(-1))
            encoded[found] = cached
            missing = ~found
            if missing.any():
                encoded[missing] = self._encode_unique(flat_ids[missing], execution)
        else:
            encoded = self._encode_unique(flat_ids, execution)
        tokens = encoded.new_zeros(batch_size * num_tokens, encoded.size(-1))
        tokens[flat_mask] = encoded
        return tokens.view(batch_size, num_tokens, encoded.size(-1))

    def stream_direction(self, direction: int, character_ids: torch.Tensor,
                         execution: Optional[ExecutionPlan] = None
                         ) -> Tuple[torch.Tensor, torch.Tensor]:
        """
        One direction of bilm-tf's stream-mode training (0 = forward, 1 = backward, its stream
        already reversed): a window through the encoder and that direction's LSTM stack, each row
        continuing the previous window's state; the top layer's output and the mask.
        """
        if not self.stateful:
            self.stateful = True  # resets the carried state: a new stream starts from zero
        mask = character_mask(character_ids)
        tokens = self.encode_tokens(character_ids, mask, execution)
        return self.lstm.run_direction(direction, tokens, mask, execution)[-1], mask

    def end_stream(self) -> None:
        """Leaves stream mode: `forward` is stateless again and the next stream starts from zero."""
        if self.stateful:
            self.stateful = False

    def forward(self, character_ids: torch.Tensor, execution: Optional[ExecutionPlan] = None
                ) -> Dict[str, Union[torch.Tensor, List[torch.Tensor]]]:
        """
        ``execution``: how the encoder and the LSTM run (`ExecutionPlan`; None: plain PyTorch).
        Returns ``"activations"``, ``num_layers`` tensors ``(batch, time + 2, 2 * projection_dim)``
        (the token vector written twice, then the LSTM layers), and ``"mask"``, ``(batch, time + 2)``.
        """
        ids_per_token = self._bos_ids.numel()
        if character_ids.size(-1) != ids_per_token:
            max_characters = self.options.max_characters_per_token
            word_id = ", plus the word id" if ids_per_token > max_characters else ""
            raise ValueError(
                f"character ids have {character_ids.size(-1)} ids per token, but this biLM was "
                f"built for {ids_per_token} (max_characters_per_token {max_characters}{word_id})"
            )
        ids, mask = self.add_sentence_boundaries(character_ids)
        tokens = self.encode_tokens(ids, mask, execution)
        layer_mask = mask.unsqueeze(-1).to(tokens.dtype)
        activations = [torch.cat([tokens, tokens], dim=-1)]
        activations.extend(layer * layer_mask for layer in self.lstm(tokens, mask, execution))
        return {"activations": activations, "mask": mask}


def _elmoformanylangs_parts(options: BilmOptions, model: ElmoForManyLangsModel) -> Dict[str, Any]:
    """The constructor arguments of an ELMoForManyLangs model's biLM: its own ids and encoder."""
    character_ids = ElmoForManyLangsCharacterIds.from_model(model)
    encoder = CharacterEncoder.from_options(
        options,
        num_character_ids=len(model.char_to_id) + 1,
        padding_id=character_ids.padding_id,
        num_word_ids=len(model.word_to_id) + 1 if model.word_to_id else 0,
        word_embedding_dim=model.options.word_dim,
        # Its token embedder always projects, even where the sizes would allow none.
        project=True,
    )
    return {"character_ids": character_ids, "character_encoder": encoder}


def _recompute_token_cache(bilm: ElmoBiLm, incompatible_keys) -> None:
    if bilm.token_cache is not None:
        bilm.token_cache.recompute_(bilm.character_encoder)

