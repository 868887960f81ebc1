"""
``bilm_corpus``: the dataset reader for pretraining the ELMo biLM, from tokenized text files: one
instance per sentence, or bilm-tf's packed windows (stream mode); docs/implementation.md ("The
``bilm_corpus`` reader in detail") gives the fields, the sharding and the shuffling.
"""
import itertools
import logging
import multiprocessing
import multiprocessing.context
import os
import random
import zlib
from collections import Counter
from dataclasses import dataclass
from typing import Any, Callable, Dict, Iterable, Iterator, List, NamedTuple, Optional, Sequence, Tuple, Union

from allennlp.common.checks import ConfigurationError
from allennlp.data.dataset_readers.dataset_reader import DatasetReader
from allennlp.data.fields import TextField
from allennlp.data.instance import Instance
from allennlp.data.token_indexers import SingleIdTokenIndexer, TokenIndexer
from allennlp.data.tokenizers import Token

from elmo_plugin.common.text_files import decoded_lines, expand_corpus_glob
from elmo_plugin.data.bilm_fields import (
    BACKWARD_TARGETS_FIELD,
    CHARACTERS_INDEXER,
    FORWARD_TARGETS_FIELD,
    SENTENCE_FIELD,
    STREAM_FIELDS,
    TARGETS_INDEXER,
)
from elmo_plugin.data.character_ids import BOS_TOKEN, DEFAULT_MAX_CHARACTERS_PER_TOKEN, EOS_TOKEN
from elmo_plugin.data.dataset_readers.sharded_reader import ShardedDatasetReader
from elmo_plugin.data.token_indexers.elmo_characters_indexer import ElmoCharactersIndexer
from elmo_plugin.data.vocabulary import DEFAULT_LM_NAMESPACE

logger = logging.getLogger(__name__)

MODES = ("sentences", "stream")
DEFAULT_SHUFFLE_BUFFER_SIZE = 10_000
_PASS_COUNTER_SLOTS = 1024

# A window of one row: (input tokens, target tokens), equally long, at most unroll_steps.
Window = Tuple[List[Any], List[Any]]


@dataclass
class PassStats:
    """What one pass of the reader over its shard saw (stream mode: the forward stream)."""

    files: int = 0
    sentences: int = 0
    tokens: int = 0
    blank_lines: int = 0
    cut_sentences: int = 0


class _Pass(NamedTuple):
    """One pass of the reader over its shard; its counts (``stats``) come last."""

    pattern: str  # the glob, for messages
    files: List[str]
    shard: int
    num_shards: int
    pass_number: int
    stats: PassStats


def buffered_shuffle(items: Iterable, buffer_size: int, rng: random.Random) -> Iterator:
    """Shuffles a stream through a buffer of ``buffer_size`` items (memory bounded)."""
    buffer: List = []
    for item in items:
        if len(buffer) < buffer_size:
            buffer.append(item)
            continue
        index = rng.randrange(buffer_size)
        yield buffer[index]
        buffer[index] = item
    rng.shuffle(buffer)
    yield from buffer


def pack_windows(
    sentences: Iterable[List[Any]],
    batch_size: int,
    unroll_steps: int,
    reverse: bool = False,
    bos: Any = BOS_TOKEN,
    eos: Any = EOS_TOKEN,
) -> Iterator[List[Window]]:
    """bilm-tf's packing of one direction: each window step's ``batch_size`` ``(inputs, targets)``
    rows, each a stream of ``bos tokens eos`` (reversed when ``reverse``) taking the next sentence
    when it needs one; rows that run dry get short, then empty, windows."""
    pending: List[List[Any]] = [[] for _ in range(batch_size)]  # the rest of each row's sentence
    sentence_iterator = iter(sentences)
    while True:
        step: List[Window] = []
        for row in range(batch_size):
            inputs: List[Any] = []
            targets: List[Any] = []
            while len(inputs) < unroll_steps:
                if len(pending[row]) <= 1:
                    sentence = next(sentence_iterator, None)
                    if sentence is None:
                        break
                    pending[row] = [bos, *sentence, eos][:: -1 if reverse else 1]
                current = pending[row]
                how_many = min(len(current) - 1, unroll_steps - len(inputs))
                inputs.extend(current[:how_many])
                targets.extend(current[1 : how_many + 1])
                pending[row] = current[how_many:]
            step.append((inputs, targets))
        if not any(inputs for inputs, _ in step):
            return
        yield step


def _make_pass_counter():
    try:
        return multiprocessing.RawArray("q", _PASS_COUNTER_SLOTS)
    except Exception as error:  # no shared memory here: count in this process only
        logger.debug("no shared pass counter (%s); counting passes per process", error)
        return None


def _indexers(max_characters_per_token: int, namespace: str, min_length: int) -> Dict[str, TokenIndexer]:
    return {
        CHARACTERS_INDEXER: ElmoCharactersIndexer(
            max_characters_per_token=max_characters_per_token, token_min_padding_length=min_length
        ),
        TARGETS_INDEXER: SingleIdTokenIndexer(namespace=namespace, token_min_padding_length=min_length),
    }


@DatasetReader.register("bilm_corpus")
class BilmCorpusReader(ShardedDatasetReader):
    """
    Reads a tokenized corpus (a glob of files, one sentence per line) for biLM pretraining.

    # Parameters

    mode : `str`, optional (default = `"sentences"`)
        ``"sentences"``: one instance per sentence; ``"stream"``: bilm-tf's packed windows.
    max_characters_per_token : `int`, optional (default = `50`)
        For the ``elmo_characters`` indexer; must match the biLM's options.
    max_sentence_length : `int`, optional (default = `None`)
        Sentences with more tokens are cut to this many.
    shuffle : `bool`, optional (default = `True`)
        Shuffle the file order and, through a buffer, the sentence order of each pass.
    seed : `int`, optional (default = `None`)
        Seed of the shuffles (``None``: drawn from `random` when the reader is made).
    shuffle_buffer_size : `int`, optional (default = `10000`)
        Sentences held for shuffling.
    batch_size : `int`, optional (default = `None`)
        Stream mode (required): the rows; give the data loader the same and ``shuffle: false``.
    unroll_steps : `int`, optional (default = `20`)
        Stream mode: tokens per window.
    vocab_namespace : `str`, optional (default = `"lm_targets"`)
        Namespace of the ``lm_targets`` ids (a ``from_bilm_tf_file`` vocabulary).
    **kwargs
        `DatasetReader`'s ``max_instances`` and ``serialization_dir``.
    """

    def __init__(
        self,
        mode: str = "sentences",
        max_characters_per_token: int = DEFAULT_MAX_CHARACTERS_PER_TOKEN,
        max_sentence_length: Optional[int] = None,
        shuffle: bool = True,
        seed: Optional[int] = None,
        shuffle_buffer_size: int = DEFAULT_SHUFFLE_BUFFER_SIZE,
        batch_size: Optional[int] = None,
        unroll_steps: int = 20,
        vocab_namespace: str = DEFAULT_LM_NAMESPACE,
        **kwargs,
    ) -> None:
        super().__init__(**kwargs)
        if mode not in MODES:
            raise ConfigurationError(f"bilm_corpus: mode must be one of {MODES}, got {mode!r}")
        if max_sentence_length is not None and max_sentence_length < 1:
            raise ConfigurationError(f"bilm_corpus: max_sentence_length must be at least 1, got {max_sentence_length}")
        if shuffle_buffer_size < 1:
            raise ConfigurationError(f"bilm_corpus: shuffle_buffer_size must be at least 1, got {shuffle_buffer_size}")
        if mode == "stream":
            if batch_size is None or batch_size < 1:
                raise ConfigurationError(
                    "bilm_corpus: stream mode needs batch_size (the number of stream rows, a "
                    f"positive integer equal to the data loader's batch_size), got {batch_size}"
                )
            if unroll_steps < 1:
                raise ConfigurationError(f"bilm_corpus: unroll_steps must be at least 1, got {unroll_steps}")
        self.mode = mode
        self.max_characters_per_token = max_characters_per_token
        self.max_sentence_length = max_sentence_length
        self.shuffle = shuffle
        self.seed = random.randrange(2**31) if seed is None else seed
        self.shuffle_buffer_size = shuffle_buffer_size
        self.batch_size = batch_size
        self.unroll_steps = unroll_steps
        self.vocab_namespace = vocab_namespace
        self.last_pass_stats: Optional[PassStats] = None
        self._epoch: Optional[int] = None
        self._pass_counter = _make_pass_counter()
        self._local_pass_counts: Dict[str, int] = Counter()

        self._sentence_indexers = _indexers(max_characters_per_token, vocab_namespace, 0)
        # Stream fields are padded to exactly unroll_steps positions.
        min_length = unroll_steps if mode == "stream" else 0
        self._stream_input_indexers = _indexers(max_characters_per_token, vocab_namespace, min_length)
        self._stream_target_indexers = {TARGETS_INDEXER: self._stream_input_indexers[TARGETS_INDEXER]}

    def __getstate__(self):
        state = dict(self.__dict__)
        if multiprocessing.context.get_spawning_popen() is None:
            # A plain copy or pickle, not a loader worker being started: shared memory cannot go along.
            state["_pass_counter"] = None
            state["_local_pass_counts"] = Counter(self._local_pass_counts)
        return state

    def set_epoch(self, epoch: Optional[int]) -> None:
        """Use ``epoch`` as the pass number (shuffle order) of every following pass; ``None``: count."""
        self._epoch = epoch

    def text_to_instance(self, tokens: Sequence[Union[str, Token]]) -> Instance:  # type: ignore
        """A sentences-mode instance of a sentence without ``<S>``/``</S>``, cut to ``max_sentence_length``."""
        texts = [token.text if isinstance(token, Token) else token for token in tokens]
        if not texts:
            raise ValueError("bilm_corpus: a sentence needs at least one token")
        if self.max_sentence_length is not None:
            texts = texts[: self.max_sentence_length]
        instance = self._sentence_instance(texts)
        self.apply_token_indexers(instance)
        return instance

    def apply_token_indexers(self, instance: Instance) -> None:
        for name, field in instance.fields.items():
            if not isinstance(field, TextField):
                continue
            if name == SENTENCE_FIELD:
                field.token_indexers = self._sentence_indexers
            elif name in (FORWARD_TARGETS_FIELD, BACKWARD_TARGETS_FIELD):
                field.token_indexers = self._stream_target_indexers
            else:
                field.token_indexers = self._stream_input_indexers

    def _read(self, file_path) -> Iterator[Instance]:
        if self.mode == "sentences":
            this_pass = self._begin_pass(file_path)
            yield from map(self._sentence_instance, self._iter_sentences(this_pass, "sentences", this_pass.stats))
            return
        for forward_step, backward_step in self.stream_steps(file_path):
            for forward, backward in zip(forward_step, backward_step):
                windows = zip(STREAM_FIELDS, (*forward, *backward))
                yield Instance({name: TextField([Token(t) for t in tokens]) for name, tokens in windows})

    def _begin_pass(self, file_path) -> _Pass:
        pattern = (
            repr(os.fspath(file_path))
            if isinstance(file_path, (str, os.PathLike))
            else ", ".join(repr(os.fspath(p)) for p in file_path)
        )
        try:
            files = expand_corpus_glob(file_path)
        except ConfigurationError as error:
            raise ConfigurationError(f"bilm_corpus: {error}") from None
        shard, num_shards = self.shard()
        if self.mode == "stream" and self.get_worker_info() is not None:
            raise ConfigurationError(
                "bilm_corpus: stream mode needs num_workers 0 in the data loader: with worker "
                "processes the batches of several workers arrive interleaved, so stream rows "
                "would not continue from one batch to the next (distributed training is fine: "
                "each process keeps its own streams)"
            )
        self.last_pass_stats = PassStats()
        pass_number = self._next_pass(f"{pattern}|{shard}/{num_shards}")
        return _Pass(pattern, files, shard, num_shards, pass_number, self.last_pass_stats)

    def stream_steps(
        self, file_path, encode: Optional[Callable[[List[str]], List[Any]]] = None
    ) -> Iterator[Tuple[List[Window], List[Window]]]:
        """Stream mode, one pass: each window step's forward and backward windows, ``encode``-d if given."""
        stream_pass = self.begin_stream_pass(file_path)
        forward = self.direction_windows(stream_pass, "forward", encode)
        backward = self.direction_windows(stream_pass, "backward", encode)
        empty_step: List[Window] = [([], [])] * self.batch_size  # type: ignore[operator]
        yield from itertools.zip_longest(forward, backward, fillvalue=empty_step)

    def begin_stream_pass(self, file_path) -> _Pass:
        """Starts a pass of stream mode for `direction_windows` (two directions, packed apart)."""
        if self.mode != "stream":
            raise ConfigurationError("bilm_corpus: stream batching needs mode 'stream'")
        return self._begin_pass(file_path)

    def direction_windows(
        self, stream_pass: _Pass, direction: str, encode: Optional[Callable[[List[str]], List[Any]]] = None
    ) -> Iterator[List[Window]]:
        """The window steps of one direction (``"forward"`` or ``"backward"``) of a pass."""
        sentences: Iterable[List[Any]] = self._iter_sentences(
            stream_pass, direction, stream_pass.stats if direction == "forward" else None
        )
        bos, eos = BOS_TOKEN, EOS_TOKEN
        if encode is not None:
            sentences = map(encode, sentences)
            bos, eos = encode([BOS_TOKEN, EOS_TOKEN])
        return pack_windows(sentences, self.batch_size, self.unroll_steps, direction == "backward", bos, eos)

    def _sentence_instance(self, tokens: List[str]) -> Instance:
        return Instance({SENTENCE_FIELD: TextField([Token(text) for text in tokens])})

    def _iter_sentences(self, this_pass: _Pass, stream_name: str, stats: Optional[PassStats]) -> Iterator[List[str]]:
        """This shard's sentences for one pass, shuffled if asked, counted and logged unless ``stats`` is None."""
        pattern, files, shard, num_shards, pass_number, _ = this_pass
        by_line = len(files) < num_shards  # else whole files per shard
        assigned = [(i, path) for i, path in enumerate(files) if by_line or i % num_shards == shard]
        key = f"{self.seed}|{stream_name}|{shard}/{num_shards}|{pass_number}"
        if self.shuffle:
            random.Random(f"{key}|files").shuffle(assigned)
        sentences: Iterable[List[str]] = self._read_lines(assigned, by_line, shard, num_shards, stats)
        if self.shuffle:
            sentences = buffered_shuffle(sentences, self.shuffle_buffer_size, random.Random(f"{key}|sentences"))
        yield from sentences
        if stats is None:
            return
        if stats.sentences == 0:
            if num_shards == 1 or not any(text.split() for path in files for _, text, _ in decoded_lines(path)):
                raise ConfigurationError(
                    f"bilm_corpus: the corpus {pattern} ({len(files)} file(s)) contains no "
                    "sentences: every line is blank"
                )
            logger.warning(
                "bilm_corpus: shard %d of %d (process rank x loader worker) got no sentences "
                "from %s: fewer lines than shards", shard, num_shards, pattern,
            )
        logger.info(
            "bilm_corpus: read %d sentences (%d tokens) from %d file(s) of %s%s; skipped %d "
            "blank line(s); cut %d sentence(s) to max_sentence_length=%s", stats.sentences, stats.tokens,
            stats.files, pattern, f" (shard {shard} of {num_shards})" if num_shards > 1 else "",
            stats.blank_lines, stats.cut_sentences, self.max_sentence_length,
        )

    def _read_lines(
        self, assigned: List[Tuple[int, str]], by_line: bool, shard: int, num_shards: int, stats: Optional[PassStats]
    ) -> Iterator[List[str]]:
        counts = stats if stats is not None else PassStats()
        max_length = self.max_sentence_length
        for file_index, path in assigned:
            counts.files += 1
            warned = False
            for line_index, text, _ in decoded_lines(path):
                if by_line and (file_index + line_index) % num_shards != shard:
                    continue
                tokens = text.split()
                if not tokens:
                    counts.blank_lines += 1
                    continue
                if max_length is not None and len(tokens) > max_length:
                    counts.cut_sentences += 1
                    if not warned and stats is not None:
                        logger.warning(
                            "bilm_corpus: %s:%d has %d tokens, cut to max_sentence_length=%d "
                            "(warned once per file; the total is logged after the pass)",
                            path, line_index + 1, len(tokens), max_length,
                        )
                        warned = True
                    tokens = tokens[:max_length]
                counts.sentences += 1
                counts.tokens += len(tokens)
                yield tokens

    def _next_pass(self, key: str) -> int:
        if self._epoch is not None:
            return self._epoch
        counts, slot = self._local_pass_counts, key
        if self._pass_counter is not None:
            counts, slot = self._pass_counter, zlib.crc32(key.encode("utf-8")) % _PASS_COUNTER_SLOTS
        counts[slot] += 1
        return counts[slot] - 1
