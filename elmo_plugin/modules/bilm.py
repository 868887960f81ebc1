"""
The ELMo biLM as one module: character encoder + bidirectional LSTM, producing every layer.
"""
import logging
import os
from typing import Dict, Iterable, List, Optional, Tuple, Union

import torch
from allennlp.common.checks import ConfigurationError
from torch import nn

from elmo_plugin.model_files.bilm_tf.options import BilmOptions
from elmo_plugin.model_files.bilm_tf.weights import read_bilm_tf_weights
from elmo_plugin.common.archive import ModelArchive, open_model_archive, state_dict_under
from elmo_plugin.common.paths import PathLike
from elmo_plugin.data.elmoformanylangs_character_ids import ElmoForManyLangsCharacterIds
from elmo_plugin.model_files.elmoformanylangs import ElmoForManyLangsModel
from elmo_plugin.model_files.resolve import ModelFiles, resolve_model
from elmo_plugin.data.character_ids import ElmoCharacterIds
from elmo_plugin.model_files import parameter_names as names
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
    character_ids : `ElmoCharacterIds`, optional
        How tokens become rows of ids, including the ``<S>``/``</S>`` rows added here. By
        default bilm-tf's UTF-8 byte ids; a model with its own character vocabulary passes its
        own scheme with the same interface (`elmo_plugin.data.elmoformanylangs_character_ids`),
        whose rows may also carry a word id.
    character_encoder : `CharacterEncoder`, optional
        The token encoder, when it is not the one ``options`` describe (a different character
        vocabulary, a word embedding); built from ``options`` by default.
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
            character_encoder = CharacterEncoder(
                filters=options.filters,
                char_embedding_dim=options.char_embedding_dim,
                n_highway=options.n_highway,
                projection_dim=options.projection_dim,
                activation=options.activation,
            )
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
    def from_model(
        cls,
        model: Optional[Union[PathLike, ModelFiles]] = None,
        options_file: Optional[PathLike] = None,
        weight_file: Optional[PathLike] = None,
        archive_file: Optional[PathLike] = None,
        stateful: bool = False,
        requires_grad: bool = False,
    ) -> "ElmoBiLm":
        """
        The biLM of a model named as `resolve_model` takes it (a published model's name, a
        directory, an archive, or bilm-tf files; nothing: the published ``original``), loaded by
        `from_model_files`.
        """
        files = resolve_model(
            model, options_file=options_file, weight_file=weight_file, archive_file=archive_file
        )
        return cls.from_model_files(files, stateful=stateful, requires_grad=requires_grad)

    @classmethod
    def from_model_files(
        cls, files: ModelFiles, stateful: bool = False, requires_grad: bool = False
    ) -> "ElmoBiLm":
        """The biLM with its weights from resolved files (`from_files` or `from_archive`)."""
        logger.info("Loading the ELMo biLM: %s", files.description)
        if files.elmoformanylangs_directory is not None:
            return cls.from_elmoformanylangs(
                files.elmoformanylangs_directory, stateful=stateful, requires_grad=requires_grad
            )
        if files.archive_file is not None:
            return cls.from_archive(files.archive_file, stateful=stateful, requires_grad=requires_grad)
        return cls.from_files(
            files.options_file, files.weight_file, stateful=stateful, requires_grad=requires_grad
        )

    @classmethod
    def from_elmoformanylangs(
        cls, directory: PathLike, stateful: bool = False, requires_grad: bool = False
    ) -> "ElmoBiLm":
        """
        The biLM of the ELMoForManyLangs model in ``directory`` (`ElmoForManyLangsModel`), with
        its own character and word ids: stateless unless ``stateful``, frozen unless
        ``requires_grad``. Bad input (a missing or truncated file, options and weights or
        dictionaries and weights that do not fit) is one `ConfigurationError` naming the file.
        """
        model = ElmoForManyLangsModel(directory)
        options = model.options
        character_ids = ElmoForManyLangsCharacterIds.from_model(model)
        logger.info(
            "ELMoForManyLangs model %s: %d characters, %s, %d LSTM layers of %d/%d",
            model.directory,
            len(model.char_to_id),
            f"{len(model.word_to_id)} words" if model.word_to_id else "no word embedding",
            options.n_layers,
            options.cell_dim,
            options.projection_dim,
        )
        encoder = CharacterEncoder(
            filters=options.filters,
            char_embedding_dim=options.char_dim,
            n_highway=options.n_highway,
            projection_dim=options.projection_dim,
            activation=options.activation,
            num_character_ids=len(model.char_to_id) + 1,
            padding_id=character_ids.padding_id,
            num_word_ids=len(model.word_to_id) + 1 if model.word_to_id else 0,
            word_embedding_dim=options.word_dim,
            project=True,
        )
        bilm = cls(
            options.to_bilm_options(),
            stateful=stateful,
            character_ids=character_ids,  # type: ignore[arg-type]
            character_encoder=encoder,
        )
        bilm.copy_weights_(model.state)
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
            convert_allennlp_bilm_state(state_dict, prefix, self.options, self.state_dict())
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
    def training_dropout(self) -> float:
        """
        The dropout on every LSTM layer's input while training (bilm-tf's ``DropoutWrapper``;
        ``options.dropout``, which a training run's options set). `Elmo` sets it to 0: a task
        model puts its dropout on the mixed vectors.
        """
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

    def stream_direction(
        self, direction: int, character_ids: torch.Tensor
    ) -> Tuple[torch.Tensor, torch.Tensor]:
        """
        One direction of bilm-tf's stream-mode training (0 = forward, 1 = backward): the
        ``(batch, time, max_characters_per_token)`` ids are a window of that direction's own
        token stream (the backward LM's already reversed, boundaries included by the reader), run
        through the token encoder and that direction's LSTM stack only, each row continuing the
        state that the same row of the previous window left. The first stream window after
        sentences (or after `end_stream`) starts from zero.

        # Returns

        The top layer's ``(batch, time, projection_dim)`` output and the ``(batch, time)`` mask.
        """
        if not self.stateful:
            self.stateful = True  # resets the carried state: a new stream starts from zero
        mask = character_mask(character_ids)
        tokens = self.encode_tokens(character_ids, mask)
        return self.lstm.run_direction(direction, tokens, mask)[-1], mask

    def end_stream(self) -> None:
        """
        Leaves stream mode (see `stream_direction`): `forward` is stateless again and the next
        stream starts from zero. Nothing happens when no stream is running.
        """
        if self.stateful:
            self.stateful = False

    def forward(self, character_ids: torch.Tensor) -> Dict[str, Union[torch.Tensor, List[torch.Tensor]]]:
        """
        # Returns

        ``"activations"``: a list of ``num_layers`` tensors ``(batch, time + 2, 2 * projection_dim)``
        (layer 0 is the token vector written twice, then one per LSTM layer), including the
        sentence boundary positions; ``"mask"``: ``(batch, time + 2)`` bool.
        """
        # The width of a token's row of ids, as the id scheme writes <S>: max_characters_per_token,
        # plus one for a word id in models that read one.
        ids_per_token = self._bos_ids.numel()
        if character_ids.size(-1) != ids_per_token:
            max_characters = self.options.max_characters_per_token
            word_id = ", plus the word id" if ids_per_token > max_characters else ""
            raise ValueError(
                f"character ids have {character_ids.size(-1)} ids per token, but this biLM was "
                f"built for {ids_per_token} (max_characters_per_token {max_characters}{word_id})"
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
    # Every layer's recurrent matrix, (projection, 4 * cell) here.
    current_shape = (bilm.options.projection_dim, 4 * bilm.options.lstm_dim)
    for direction in names.DIRECTIONS:
        for layer in range(bilm.options.n_layers):
            recurrent_key = prefix + names.lstm(direction, layer, "recurrent_weight")
            recurrent = state_dict.get(recurrent_key)
            if recurrent is None:
                continue  # missing keys are reported by load_state_dict
            if current_shape[0] == current_shape[1]:
                raise ConfigurationError(
                    f"cannot convert {recurrent_key} of an archive without a format "
                    f"version: it is square {current_shape}, so its layout is unknown"
                )
            if tuple(recurrent.shape) == current_shape:
                continue
            logger.info(
                "converting %s from the (out, in) layout of old archives",
                prefix + names.lstm(direction, layer, "*"),
            )
            for name in names.LSTM_MATRICES:
                key = prefix + names.lstm(direction, layer, name)
                if key in state_dict:
                    state_dict[key] = state_dict[key].t()
