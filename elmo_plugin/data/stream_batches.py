"""
``bilm_stream``: the data loader of stream batching, which makes each batch's tensors straight
from the reader's windows, element for element those of AllenNLP's loader over the same reader
(docs/implementation.md, "The ``bilm_stream`` data loader").
"""
import itertools
import logging
import multiprocessing
import queue
from typing import Any, Dict, Iterator, List, Optional, Tuple, Union

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


class TokenTable:
    """Each distinct token seen, numbered once (from 1; 0 is padding): its character ids and its
    vocabulary id (``token_ids``, else ``unknown_id``), rows of two arrays indexed by its number."""

    def __init__(self, max_characters_per_token: int, token_ids: Dict[str, int], unknown_id: int) -> None:
        self._character_ids = ElmoCharacterIds(max_characters_per_token)
        self._token_ids = token_ids
        self._unknown_id = unknown_id
        self._numbers: Dict[str, int] = {}
        self.characters = np.zeros((1024, max_characters_per_token), dtype=np.int16)
        self.ids = np.zeros(1024, dtype=np.int64)
        self._size = 1  # number 0: padding

    def encode(self, tokens: List[str]) -> List[int]:
        """The tokens' numbers (new tokens added)."""
        get = self._numbers.get
        return [get(token) or self._add(token) for token in tokens]

    def _add(self, token: str) -> int:
        if self._size == len(self.ids):
            self.characters = np.concatenate([self.characters, np.zeros_like(self.characters)])
            self.ids = np.concatenate([self.ids, np.zeros_like(self.ids)])
        self.characters[self._size] = self._character_ids.token_to_ids(token)
        self.ids[self._size] = self._token_ids.get(token, self._unknown_id)
        self._numbers[token] = self._size
        self._size += 1
        return self._size - 1


def window_arrays(
    step: List[Window], unroll_steps: int, tokens: TokenTable
) -> Tuple[np.ndarray, np.ndarray, np.ndarray]:
    """One window step of one direction, its tokens numbered: the ``(rows, unroll_steps, characters)``
    character ids (int16) and the ``(rows, unroll_steps)`` input and target ids (int64), padding 0."""
    rows = len(step)
    lengths = np.fromiter((len(inputs) for inputs, _ in step), dtype=np.int64, count=rows)
    count = int(lengths.sum())
    real = np.arange(unroll_steps) < lengths[:, None]
    input_numbers, target_numbers = np.zeros((2, rows, unroll_steps), dtype=np.int64)
    input_numbers[real] = np.fromiter(itertools.chain.from_iterable(inputs for inputs, _ in step), np.int64, count)
    target_numbers[real] = np.fromiter(itertools.chain.from_iterable(targets for _, targets in step), np.int64, count)
    return tokens.characters[input_numbers], tokens.ids[input_numbers], tokens.ids[target_numbers]


def _make_direction(
    reader: BilmCorpusReader, stream_pass: Tuple[Any, ...], direction: str, tokens: TokenTable, arrays: Any
) -> None:
    """A process's work with ``parallel_directions``: one direction's arrays, into ``arrays``."""
    try:
        for step in reader.direction_windows(stream_pass, direction, encode=tokens.encode):
            arrays.put(("step", window_arrays(step, reader.unroll_steps, tokens)))
        arrays.put(("done", stream_pass[-1] if direction == "forward" else None))
    except BaseException as error:  # noqa: B036 (given to the training process to raise)
        arrays.put(("error", error))


@DataLoader.register("bilm_stream")
class BilmStreamDataLoader(DataLoader):
    """
    The batches of a ``bilm_corpus`` reader in stream mode, made directly from its windows: the
    tensors of AllenNLP's ``multiprocess`` loader with ``batch_size`` rows and ``shuffle: false``.

    # Parameters

    reader : `DatasetReader`
        A ``bilm_corpus`` reader in stream mode.
    data_path : `DatasetReaderInput`
    batch_size : `int`
        The reader's ``batch_size`` (the stream rows).
    batches_per_epoch : `int`, optional (default = `None`)
        As AllenNLP's loader: an epoch of this many batches, each epoch going on where the last
        one stopped (a new pass over the corpus when it runs out); ``None``: one pass.
    parallel_directions : `bool`, optional (default = `False`)
        Make the forward and the backward stream in two processes of their own (forked, or
        spawned where fork is not available): the same tensors.
    cuda_device : `Union[int, str, torch.device]`, optional
        Where the batches go (the trainer sets it).
    """

    def __init__(
        self,
        reader: DatasetReader,
        data_path: DatasetReaderInput,
        batch_size: int,
        batches_per_epoch: Optional[int] = None,
        parallel_directions: bool = False,
        cuda_device: Optional[Union[int, str, torch.device]] = None,
    ) -> None:
        if batches_per_epoch is not None and batches_per_epoch < 1:
            raise ConfigurationError(f"data_loader.batches_per_epoch must be at least 1, got {batches_per_epoch}")
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
        self.batches_per_epoch = batches_per_epoch
        self.parallel_directions = parallel_directions
        self._passes: Optional[Iterator[TensorDict]] = None  # with batches_per_epoch: the pass going on
        self.cuda_device: Optional[torch.device] = None
        if cuda_device is not None:
            device = int_to_device(cuda_device) if isinstance(cuda_device, int) else torch.device(cuda_device)
            self.set_target_device(device)
        self._vocab: Optional[Vocabulary] = None
        self._tokens: Optional[TokenTable] = None

    def index_with(self, vocab: Vocabulary) -> None:
        self._vocab = vocab
        token_ids = dict(vocab.get_token_to_index_vocabulary(self.reader.vocab_namespace))
        self._tokens = TokenTable(self.reader.max_characters_per_token, token_ids, token_ids.get(vocab._oov_token, 0))

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
        if self.batches_per_epoch is not None:
            return self.batches_per_epoch
        pinned = self.reader._epoch
        self.reader.set_epoch(0)
        try:
            return sum(1 for _ in self.reader.stream_steps(self.data_path))
        finally:
            self.reader.set_epoch(pinned)

    def __len__(self) -> int:
        if self.batches_per_epoch is None:
            raise TypeError("bilm_stream reads lazily: the batches of a pass are not known")
        return self.batches_per_epoch

    def __iter__(self) -> Iterator[TensorDict]:
        if self._tokens is None:
            raise ValueError("bilm_stream: call index_with(vocab) before iterating")
        if self.batches_per_epoch is None:
            yield from self._one_pass()
            return
        for _ in range(self.batches_per_epoch):
            batch = next(self._passes, None) if self._passes is not None else None
            if batch is None:
                self._passes = self._one_pass()
                batch = next(self._passes, None)
                if batch is None:
                    return  # an empty corpus: the reader has said so
            yield batch

    def _one_pass(self) -> Iterator[TensorDict]:
        steps = self._parallel_steps() if self.parallel_directions else self._steps()
        for forward, backward in steps:
            batch: TensorDict = {}
            for (tokens_field, targets_field), (characters, input_ids, target_ids) in (
                ((FORWARD_TOKENS_FIELD, FORWARD_TARGETS_FIELD), forward),
                ((BACKWARD_TOKENS_FIELD, BACKWARD_TARGETS_FIELD), backward),
            ):
                batch[tokens_field] = {
                    CHARACTERS_INDEXER: {"elmo_tokens": torch.from_numpy(characters.astype(np.int64))},
                    TARGETS_INDEXER: {"tokens": torch.from_numpy(input_ids)},
                }
                batch[targets_field] = {TARGETS_INDEXER: {"tokens": torch.from_numpy(target_ids)}}
            if self.cuda_device is not None and self.cuda_device.type != "cpu":
                batch = move_to_device(batch, self.cuda_device)
            yield batch

    def _steps(self) -> Iterator[Tuple[Tuple[np.ndarray, ...], Tuple[np.ndarray, ...]]]:
        """Both directions' arrays, made in this process."""
        assert self._tokens is not None
        tokens, width = self._tokens, self.reader.unroll_steps
        for forward_step, backward_step in self.reader.stream_steps(self.data_path, encode=tokens.encode):
            yield window_arrays(forward_step, width, tokens), window_arrays(backward_step, width, tokens)

    def _parallel_steps(self) -> Iterator[Tuple[Tuple[np.ndarray, ...], Tuple[np.ndarray, ...]]]:
        """Both directions' arrays, each made in a process of its own (`_make_direction`)."""
        stream_pass = self.reader.begin_stream_pass(self.data_path)
        context = multiprocessing.get_context("fork" if "fork" in multiprocessing.get_all_start_methods() else "spawn")
        queues = [context.Queue(maxsize=8) for _ in range(2)]
        processes = [
            context.Process(
                target=_make_direction,
                args=(self.reader, stream_pass, direction, self._tokens, arrays),
                daemon=True,
            )
            for direction, arrays in zip(("forward", "backward"), queues)
        ]
        for process in processes:
            process.start()
        empty = window_arrays([([], [])] * self.batch_size, self.reader.unroll_steps, self._tokens)
        running = [True, True]
        try:
            while any(running):
                arrays = [empty, empty]
                for index in (0, 1):
                    if not running[index]:
                        continue
                    kind, value = self._next_from(queues[index], processes[index])
                    if kind == "error":
                        raise value
                    if kind == "step":
                        arrays[index] = value
                        continue
                    running[index] = False
                    if value is not None:  # the forward direction's counts of the pass
                        self.reader.last_pass_stats = value
                if arrays[0] is not empty or arrays[1] is not empty:  # else one direction just ended
                    yield arrays[0], arrays[1]
        finally:
            for process in processes:
                if process.is_alive():
                    process.terminate()
                process.join()

    @staticmethod
    def _next_from(direction_queue: Any, process: Any) -> Tuple[str, Any]:
        while True:
            try:
                return direction_queue.get(timeout=5)
            except queue.Empty:
                if not process.is_alive():
                    raise RuntimeError(
                        f"bilm_stream: the process making a stream direction ended (exit code "
                        f"{process.exitcode}) without its batches"
                    ) from None
