"""
``bilm_stream``: the data loader of stream batching, which makes each batch's tensors straight
from the reader's windows.

AllenNLP's loader builds an `Instance` of four `TextField`s per row, a `Token` object per token,
indexes every token through its token indexers into Python lists, pads them, and only then makes
tensors: about 5,000 tokens/s on one core, far below what a GPU step consumes (the recipe's step
is to run at 150,000 tokens/s). Here the reader's windows (`BilmCorpusReader.stream_steps`: the
same packing, shuffling and sharding) become the batch's tensors in one pass per direction: each
token is numbered by one dict lookup, its character ids and vocabulary id are rows of tables that
grow by each new token once (`TokenTable`), gathered with numpy indexing. The tensors are those
of AllenNLP's loader over the same reader, equal element for element (tests/data); that loader
stays the reference, and the one for sentences batching.
"""
import itertools
import logging
from typing import Dict, Iterator, List, Optional, Sequence, Tuple, Union

import numpy as np
import torch
from allennlp.common.checks import ConfigurationError
from allennlp.common.util import int_to_device
from allennlp.data.data_loaders.data_loader import DataLoader, TensorDict
from allennlp.data.dataset_readers.dataset_reader import DatasetReader, DatasetReaderInput
from allennlp.data.instance import Instance
from allennlp.data.vocabulary import Vocabulary
from allennlp.nn.util import move_to_device

from elmo_plugin.data.bilm_fields import (
    BACKWARD_TARGETS_FIELD,
    BACKWARD_TOKENS_FIELD,
    CHARACTERS_INDEXER,
    FORWARD_TARGETS_FIELD,
    FORWARD_TOKENS_FIELD,
    TARGETS_INDEXER,
)
from elmo_plugin.data.character_ids import ElmoCharacterIds
from elmo_plugin.data.dataset_readers.bilm_corpus import BilmCorpusReader, Window

logger = logging.getLogger(__name__)

# Distinct tokens whose character ids the table keeps (50 int16 each: 1M tokens are 100 MB);
# past it, new tokens are encoded for their batch only.
MAX_CACHED_TOKENS = 1_000_000


class TokenTable:
    """
    Each distinct token seen, once: its row of character ids (`ElmoCharacterIds.token_to_ids`)
    and its vocabulary id, in two arrays indexed by the token's number, so that a window's ids
    are one dict lookup per token and two numpy gathers. Number 0 is padding: all-zero
    characters, id 0.

    # Parameters

    character_ids : `ElmoCharacterIds`
    token_ids : `Dict[str, int]`
        The vocabulary's ids; a token not in it gets ``unknown_id``.
    unknown_id : `int`
    max_tokens : `int`, optional (default = `1_000_000`)
        Distinct tokens kept (50 int16 each: 100 MB at a million); later new tokens are
        numbered for one batch only.
    """

    def __init__(
        self,
        character_ids: ElmoCharacterIds,
        token_ids: Dict[str, int],
        unknown_id: int,
        max_tokens: int = MAX_CACHED_TOKENS,
    ) -> None:
        self._character_ids = character_ids
        self._token_ids = token_ids
        self._unknown_id = unknown_id
        self._max_tokens = max_tokens
        self._numbers: Dict[str, int] = {}
        self._characters = np.zeros((1024, character_ids.max_characters_per_token), dtype=np.int16)
        self._ids = np.zeros(1024, dtype=np.int64)
        self._size = 1  # number 0: padding

    def numbers(self, tokens: Sequence[str]) -> Tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(characters, ids, numbers)``: the tables (new tokens added) and each token's number."""
        get = self._numbers.get
        numbers = [get(token, 0) for token in tokens]
        if 0 in numbers:
            extra: List[str] = []
            for position, number in enumerate(numbers):
                if number == 0:
                    numbers[position] = self._add(tokens[position], extra)
            if extra:
                characters = np.concatenate([
                    self._characters[: self._size],
                    np.asarray([self._character_ids.token_to_ids(t) for t in extra], np.int16),
                ])
                ids = np.concatenate([
                    self._ids[: self._size],
                    np.asarray([self._token_ids.get(t, self._unknown_id) for t in extra], np.int64),
                ])
                return characters, ids, np.asarray(numbers, dtype=np.int64)
        return self._characters, self._ids, np.asarray(numbers, dtype=np.int64)

    def _add(self, token: str, extra: List[str]) -> int:
        number = self._numbers.get(token)
        if number is not None:
            return number
        if len(self._numbers) >= self._max_tokens:
            extra.append(token)
            return self._size + len(extra) - 1
        if self._size == len(self._ids):
            self._characters = np.concatenate([self._characters, np.zeros_like(self._characters)])
            self._ids = np.concatenate([self._ids, np.zeros_like(self._ids)])
        self._characters[self._size] = self._character_ids.token_to_ids(token)
        self._ids[self._size] = self._token_ids.get(token, self._unknown_id)
        self._numbers[token] = self._size
        self._size += 1
        return self._size - 1


@DataLoader.register("bilm_stream")
class BilmStreamDataLoader(DataLoader):
    """
    The batches of a ``bilm_corpus`` reader in stream mode, as tensors made directly from its
    windows (see the module's documentation); the same tensors as AllenNLP's ``multiprocess``
    loader with ``batch_size`` rows and ``shuffle: false`` over that reader.

    Registered as a `DataLoader` with name ``"bilm_stream"``.

    # Parameters

    reader : `DatasetReader`
        A ``bilm_corpus`` reader in stream mode.
    data_path : `DatasetReaderInput`
    batch_size : `int`
        The reader's ``batch_size`` (the stream rows).
    cuda_device : `Union[int, str, torch.device]`, optional
        Where the batches go (the trainer sets it).
    """

    def __init__(
        self,
        reader: DatasetReader,
        data_path: DatasetReaderInput,
        batch_size: int,
        cuda_device: Optional[Union[int, str, torch.device]] = None,
    ) -> None:
        if not isinstance(reader, BilmCorpusReader) or reader.mode != "stream":
            raise ConfigurationError(
                "data_loader type 'bilm_stream' needs a 'bilm_corpus' dataset reader in stream "
                f"mode, got {type(reader).__name__}"
                + (f" in mode {reader.mode!r}" if isinstance(reader, BilmCorpusReader) else "")
            )
        if batch_size != reader.batch_size:
            raise ConfigurationError(
                f"data_loader.batch_size ({batch_size}) must equal dataset_reader.batch_size "
                f"({reader.batch_size}): the stream rows"
            )
        self.reader = reader
        self.data_path = data_path
        self.batch_size = batch_size
        self.cuda_device: Optional[torch.device] = None
        if cuda_device is not None:
            self.set_target_device(
                int_to_device(cuda_device) if isinstance(cuda_device, int) else torch.device(cuda_device)
            )
        self._vocab: Optional[Vocabulary] = None
        self._tokens: Optional[TokenTable] = None

    def index_with(self, vocab: Vocabulary) -> None:
        self._vocab = vocab
        token_ids = dict(vocab.get_token_to_index_vocabulary(self.reader.vocab_namespace))
        self._tokens = TokenTable(
            ElmoCharacterIds(self.reader.max_characters_per_token),
            token_ids,
            token_ids.get(vocab._oov_token, 0),
            max_tokens=MAX_CACHED_TOKENS,
        )

    def set_target_device(self, device: torch.device) -> None:
        self.cuda_device = device

    def iter_instances(self) -> Iterator[Instance]:
        """The reader's instances (for a vocabulary built from the data)."""
        for instance in self.reader.read(self.data_path):
            if self._vocab is not None:
                instance.index_fields(self._vocab)
            yield instance

    def count_batches(self) -> int:
        """Batches in one epoch, from the reader's windows (pass number pinned: none used up)."""
        pinned = self.reader._epoch
        self.reader.set_epoch(0)
        try:
            return sum(1 for _ in self.reader.stream_steps(self.data_path))
        finally:
            self.reader.set_epoch(pinned)

    def __iter__(self) -> Iterator[TensorDict]:
        if self._tokens is None:
            raise ValueError("bilm_stream: call index_with(vocab) before iterating")
        for forward_step, backward_step in self.reader.stream_steps(self.data_path):
            batch: TensorDict = {}
            for (tokens_field, targets_field), step in (
                ((FORWARD_TOKENS_FIELD, FORWARD_TARGETS_FIELD), forward_step),
                ((BACKWARD_TOKENS_FIELD, BACKWARD_TARGETS_FIELD), backward_step),
            ):
                characters, input_ids, target_ids = self._direction_tensors(step)
                batch[tokens_field] = {
                    CHARACTERS_INDEXER: {"elmo_tokens": characters},
                    TARGETS_INDEXER: {"tokens": input_ids},
                }
                batch[targets_field] = {TARGETS_INDEXER: {"tokens": target_ids}}
            if self.cuda_device is not None and self.cuda_device.type != "cpu":
                batch = move_to_device(batch, self.cuda_device)
            yield batch

    def _direction_tensors(
        self, step: List[Window]
    ) -> Tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """``(rows, unroll_steps, characters)`` ids and the ``(rows, unroll_steps)`` input and
        target ids of one window step of one direction, padding 0 (a row of zeros)."""
        assert self._tokens is not None
        rows, width = len(step), self.reader.unroll_steps
        lengths = np.fromiter((len(inputs) for inputs, _ in step), dtype=np.int64, count=rows)
        real = np.arange(width) < lengths[:, None]
        input_numbers = np.zeros((rows, width), dtype=np.int64)
        target_numbers = np.zeros((rows, width), dtype=np.int64)
        # Inputs and targets in one lookup: the tables may grow in between.
        tokens = list(itertools.chain.from_iterable(inputs for inputs, _ in step))
        count = len(tokens)
        tokens.extend(itertools.chain.from_iterable(targets for _, targets in step))
        characters, ids, numbers = self._tokens.numbers(tokens)
        input_numbers[real] = numbers[:count]
        target_numbers[real] = numbers[count:]
        return (
            torch.from_numpy(characters[input_numbers].astype(np.int64)),
            torch.from_numpy(ids[input_numbers]),
            torch.from_numpy(ids[target_numbers]),
        )
