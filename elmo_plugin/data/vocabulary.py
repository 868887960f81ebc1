"""
The bilm-tf vocabulary file (one token per line: ``<S>``, ``</S>``, ``<UNK>``, then the corpus
tokens by descending frequency, the order the sampled softmax's log-uniform sampler assumes):
`build_lm_vocabulary` writes it, `BilmTfVocabulary` reads it, `VocabularyOrderCheck` refuses one
clearly not sorted by frequency in the training data.
"""
import logging
import os
from collections import Counter
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Sequence, Tuple, Union

import numpy as np
import torch
from allennlp.common.checks import ConfigurationError
from allennlp.common.tqdm import Tqdm
from allennlp.data.vocabulary import DEFAULT_NON_PADDED_NAMESPACES, DEFAULT_PADDING_TOKEN, Vocabulary

from elmo_plugin.common.atomic_output import atomic_output, input_at
from elmo_plugin.common.paths import PathLike
from elmo_plugin.common.text_files import decoded_lines, expand_corpus_glob
from elmo_plugin.data.character_ids import BOS_TOKEN, EOS_TOKEN
from elmo_plugin.model_files.bilm_tf.vocabulary_file import (  # noqa: F401 (public here too)
    ALLENNLP_NEWLINE_MARKER,
    SPECIAL_TOKENS,
    UNK_TOKEN,
    read_bilm_tf_vocabulary,
)

logger = logging.getLogger(__name__)

assert SPECIAL_TOKENS[:2] == (BOS_TOKEN, EOS_TOKEN)  # the file's sentence marks are the character ids'
DEFAULT_LM_NAMESPACE = "lm_targets"
_PROGRESS_EVERY_LINES = 10_000

# `VocabularyOrderCheck`: the training targets counted before judging the order.
DEFAULT_ORDER_CHECK_TOKENS = 100_000
# Two counts are "clearly different" beyond this many standard deviations of two Poisson counts
# (sqrt(a + b)) and a factor of 2 (about 1e-4 per pair for equal true frequencies). The order is
# judged with at least this many such pairs, and refused when this fraction of them (and this
# many) are in the wrong order (docs/implementation.md, "The vocabulary order check").
_ORDER_CHECK_Z = 4.0
_ORDER_CHECK_RATIO = 2.0
_ORDER_CHECK_MIN_PAIRS = 100
_ORDER_CHECK_MAX_WRONG_FRACTION = 0.05
_ORDER_CHECK_MIN_WRONG_PAIRS = 10
# Above this many pairs of entries, a random sample of this many pairs is judged.
_ORDER_CHECK_MAX_PAIRS = 1_000_000


@dataclass
class LmVocabularyStats:
    """What `build_lm_vocabulary` counted and wrote."""

    output_file: str
    num_files: int
    num_sentences: int  # non-blank lines
    num_blank_lines: int
    num_tokens: int  # corpus tokens counted
    num_types: int  # distinct corpus tokens
    vocab_size: int  # lines written, the 3 special tokens included
    num_covered_tokens: int  # corpus tokens that are in the written vocabulary
    # Files the glob matched that are the output file itself (an earlier vocabulary), not read.
    excluded_files: List[str] = field(default_factory=list)

    @property
    def coverage(self) -> float:
        """Fraction of the corpus tokens that are in the vocabulary (the rest become <UNK>)."""
        return self.num_covered_tokens / self.num_tokens if self.num_tokens else 0.0


def build_lm_vocabulary(
    file_glob_or_paths: Union[PathLike, Sequence[PathLike]],
    output_file: PathLike,
    min_count: int = 1,
    max_size: Optional[int] = None,
    progress: bool = True,
) -> LmVocabularyStats:
    """
    Counts the tokens of a tokenized corpus and writes the bilm-tf vocabulary file: ``<S>``,
    ``</S>``, ``<UNK>``, then every token seen at least ``min_count`` times (but those with
    AllenNLP's ``@@NEWLINE@@`` marker), sorted by ``(-count, token)``.

    # Parameters

    file_glob_or_paths : `Union[PathLike, Sequence[PathLike]]`
        The corpus (tokenized, one sentence a line): a glob (``"corpus/train/*.txt"``) or path(s).
    output_file : `PathLike`
        Where to write the vocabulary, one token per line.
    min_count : `int`, optional (default = `1`)
        Tokens seen fewer times are left out (they become ``<UNK>``).
    max_size : `int`, optional (default = `None`)
        At most this many lines in all, the special tokens included; `None` keeps every token
        that meets ``min_count``.
    progress : `bool`, optional (default = `True`)
        Show a progress bar over the corpus files.

    # Raises

    `ConfigurationError`
        For an empty glob or corpus, bad UTF-8, bad sizes, or an ``output_file`` among the corpus files.
    """
    if min_count < 1:
        raise ConfigurationError(f"min_count must be at least 1, got {min_count}")
    if max_size is not None and max_size < len(SPECIAL_TOKENS):
        raise ConfigurationError(
            f"max_size must be at least {len(SPECIAL_TOKENS)} (it counts the special tokens "
            f"{', '.join(SPECIAL_TOKENS)}), got {max_size}"
        )
    output_file = os.fspath(output_file)
    output_dir = os.path.dirname(os.path.abspath(output_file))
    if not os.path.isdir(output_dir):
        raise ConfigurationError(f"the directory of the output file does not exist: {output_dir}")
    files = expand_corpus_glob(file_glob_or_paths)
    pattern_text = (
        repr(os.fspath(file_glob_or_paths))
        if isinstance(file_glob_or_paths, (str, os.PathLike))
        else ", ".join(repr(os.fspath(p)) for p in file_glob_or_paths)
    )
    files, excluded = _without_earlier_output(files, output_file, pattern_text)

    corpus = count_corpus_tokens(files, pattern_text, progress)
    counts = corpus.counts

    dropped = [token for token in counts if ALLENNLP_NEWLINE_MARKER in token]
    if dropped:
        logger.warning(
            "left out %d token type(s) containing %s (AllenNLP's newline marker), e.g. %r",
            len(dropped), ALLENNLP_NEWLINE_MARKER, dropped[0],
        )
    candidates = [
        (token, count) for token, count in counts.items()
        if count >= min_count and token not in SPECIAL_TOKENS and ALLENNLP_NEWLINE_MARKER not in token
    ]
    candidates.sort(key=lambda item: (-item[1], item[0]))
    if max_size is not None:
        candidates = candidates[: max_size - len(SPECIAL_TOKENS)]
    vocabulary = list(SPECIAL_TOKENS) + [token for token, _ in candidates]
    covered = sum(count for _, count in candidates) + sum(counts[t] for t in SPECIAL_TOKENS)

    with atomic_output(output_file) as temporary, open(temporary, "w", encoding="utf-8", newline="\n") as out:
        out.writelines(token + "\n" for token in vocabulary)
    stats = LmVocabularyStats(
        output_file, len(files), corpus.num_sentences, corpus.num_lines - corpus.num_sentences, corpus.num_tokens,
        len(counts), len(vocabulary),
        covered, excluded,
    )
    logger.info(
        "wrote %d tokens to %s (%d corpus tokens, %d types, coverage %.4f)",
        stats.vocab_size, output_file, stats.num_tokens, stats.num_types, stats.coverage,
    )
    return stats


@dataclass
class CorpusCounts:
    """The tokens of a tokenized corpus, counted (`count_corpus_tokens`)."""

    counts: Counter
    num_files: int
    num_sentences: int  # non-blank lines
    num_lines: int

    @property
    def num_tokens(self) -> int:
        return sum(self.counts.values())


def count_corpus_tokens(files: Sequence[str], pattern_text: str, progress: bool = True) -> CorpusCounts:
    """
    Counts the whitespace-separated tokens of ``files`` (one sentence a line), with a progress bar
    over their bytes; `ConfigurationError` for bad UTF-8 (naming ``file:line``) or a corpus without
    tokens (naming ``pattern_text``, how the caller named the corpus).
    """
    counts: Counter = Counter()
    num_sentences = num_lines = 0
    total_bytes = sum(os.path.getsize(path) for path in files)
    with Tqdm.tqdm(total=total_bytes, unit="B", unit_scale=True, desc="counting tokens", disable=not progress) as bar:
        for path in files:
            bar.set_postfix_str(os.path.basename(path))
            unreported = 0
            for line_index, text, size in decoded_lines(path):
                tokens = text.split()
                counts.update(tokens)
                num_sentences += bool(tokens)
                num_lines += 1
                unreported += size
                if (line_index + 1) % _PROGRESS_EVERY_LINES == 0:
                    bar.update(unreported)
                    unreported = 0
            bar.update(unreported)
    if not counts:
        raise ConfigurationError(
            f"the corpus {pattern_text} contains no tokens ({len(files)} file(s), all lines blank)"
        )
    return CorpusCounts(counts, len(files), num_sentences, num_lines)


def _starts_with_special_tokens(path: str) -> bool:
    """Whether ``path`` starts with the special tokens in any order (a bilm-tf vocabulary)."""
    try:
        with open(path, "rb") as handle:
            first = [handle.readline().decode("utf-8").strip() for _ in SPECIAL_TOKENS]
    except (OSError, UnicodeDecodeError):
        return False
    return sorted(first) == sorted(SPECIAL_TOKENS)


def _without_earlier_output(files: List[str], output_file: str, pattern_text: str) -> Tuple[List[str], List[str]]:
    """``(corpus files, left out)``: ``output_file`` among them is an error, or an earlier vocabulary."""
    clash = input_at(output_file, files)
    if clash is None:
        return files, []
    if not _starts_with_special_tokens(output_file):
        raise ConfigurationError(
            f"the output file {output_file} would replace the corpus file {clash}; choose an "
            "output path that is not one of the corpus files"
        )
    excluded = [path for path in files if input_at(output_file, [path]) is not None]
    remaining = [path for path in files if path not in excluded]
    logger.warning(
        "left %s out of the corpus: the glob %s matches it, but it is the output file, a "
        "vocabulary written earlier (it is replaced, not counted as corpus text)", ", ".join(excluded), pattern_text,
    )
    if not remaining:
        raise ConfigurationError(
            f"the corpus glob {pattern_text} matches only the output file {output_file}, a "
            "vocabulary; give the corpus files"
        )
    return remaining, excluded


@dataclass
class OrderJudgement:
    """What `judge_frequency_order` found; ``first_wrong`` and ``later`` are entry positions."""

    wrong_pairs: int  # clearly different pairs (sampled above 1M) whose later entry is counted more
    clear_pairs: int  # clearly different pairs judged
    first_wrong: Optional[int]  # the first entry that a later entry clearly outnumbers
    later: Optional[int]  # the most counted entry after it

    @property
    def judged(self) -> bool:
        return self.clear_pairs >= _ORDER_CHECK_MIN_PAIRS

    @property
    def out_of_order(self) -> bool:
        threshold = max(_ORDER_CHECK_MIN_WRONG_PAIRS, _ORDER_CHECK_MAX_WRONG_FRACTION * self.clear_pairs)
        return self.judged and self.wrong_pairs >= threshold


def _clearly_more(larger: np.ndarray, smaller: np.ndarray) -> np.ndarray:
    """Where count ``larger`` clearly exceeds count ``smaller`` (see `_ORDER_CHECK_Z`)."""
    return (larger - smaller > _ORDER_CHECK_Z * np.sqrt(larger + smaller)) & (larger >= _ORDER_CHECK_RATIO * smaller)


def judge_frequency_order(counts: Sequence[int]) -> OrderJudgement:
    """Whether entries in ``counts``' order (a sample of the corpus) are sorted by descending frequency,
    judged on the pairs of clearly different counts only (noise inverts a few pairs, shuffling half)."""
    values = np.asarray(counts, dtype=np.float64)
    size = len(values)
    if size * (size - 1) // 2 <= _ORDER_CHECK_MAX_PAIRS:
        first, second = np.triu_indices(size, 1)
    else:
        # A fixed seed and a generator of its own: the same verdict every time, the global random
        # state untouched.
        generator = np.random.default_rng(0)
        a = generator.integers(0, size, _ORDER_CHECK_MAX_PAIRS)
        b = generator.integers(0, size, _ORDER_CHECK_MAX_PAIRS)
        distinct = a != b
        first, second = np.minimum(a, b)[distinct], np.maximum(a, b)[distinct]
    earlier, later = values[first], values[second]
    wrong = int(_clearly_more(later, earlier).sum())
    right = int(_clearly_more(earlier, later).sum())
    # The first entry clearly outnumbered by the largest count after it.
    largest_after = np.append(np.maximum.accumulate(values[::-1])[::-1][1:], 0.0)
    outnumbered = np.flatnonzero(_clearly_more(largest_after, values))
    first_wrong = later_entry = None
    if len(outnumbered):
        first_wrong = int(outnumbered[0])
        later_entry = first_wrong + 1 + int(np.argmax(values[first_wrong + 1 :]))
    return OrderJudgement(wrong, wrong + right, first_wrong, later_entry)


class VocabularyOrderCheck:
    """
    Checks that a vocabulary is sorted by descending frequency, as the sampled softmax assumes:
    `count` counts the first ``check_after_tokens`` training targets, `finish` judges them once
    (`judge_frequency_order`), raising `ConfigurationError` naming the first line out of order.

    # Parameters

    vocab : `Vocabulary`
        The vocabulary; a `BilmTfVocabulary` read from a file names the file in the error.
    namespace : `str`
        The namespace of the target ids.
    check_after_tokens : `int`, optional (default = `100000`)
        Targets to count before judging.
    enabled : `bool`, optional (default = `True`)
        False makes `observe` and `finish` do nothing (an order that is intended).
    """

    def __init__(
        self,
        vocab: Vocabulary,
        namespace: str,
        check_after_tokens: int = DEFAULT_ORDER_CHECK_TOKENS,
        enabled: bool = True,
    ) -> None:
        self._vocab = vocab
        self._namespace = namespace
        self._check_after_tokens = check_after_tokens
        self._counts: Optional[torch.Tensor] = None
        self._num_counted = 0
        self.done = not enabled

    def observe(self, target_ids: torch.Tensor) -> None:
        """Counts a tensor of target ids (padding removed), and judges once enough are counted."""
        self.count(target_ids)
        if self.due:
            self.finish()

    def count(self, target_ids: torch.Tensor, mask: Optional[torch.Tensor] = None) -> None:
        """Counts the target ids where ``mask`` is true, on their device, up to ``check_after_tokens``."""
        if self.done or self.due:
            return
        ids = target_ids.reshape(-1)
        if self._counts is None:
            size = self._vocab.get_vocab_size(self._namespace)
            self._counts = torch.zeros(size, dtype=torch.long, device=ids.device)
        weights = torch.ones_like(ids) if mask is None else mask.reshape(-1).to(self._counts.dtype)
        self._counts.index_add_(0, ids, weights)
        self._num_counted += ids.numel()

    @property
    def due(self) -> bool:
        """Whether ``check_after_tokens`` positions are counted and the order not judged yet."""
        return not self.done and self._num_counted >= self._check_after_tokens

    def finish(self) -> None:
        """Judges the counts so far (once); raises `ConfigurationError` when clearly out of order."""
        if self.done or self._counts is None:
            return
        self.done = True
        counts = self._counts.cpu().numpy()
        self._counts = None  # the memory of one vector of the vocabulary's size
        self._num_counted = int(counts.sum())  # the targets, without the padding
        tokens = self._vocab.get_index_to_token_vocabulary(self._namespace)
        # The special tokens' places are fixed (first, in any order), whatever their counts.
        token_to_index = self._vocab.get_token_to_index_vocabulary(self._namespace)
        ids = np.setdiff1d(np.arange(len(counts)), [token_to_index[t] for t in SPECIAL_TOKENS if t in token_to_index])
        judgement = judge_frequency_order(counts[ids])
        if not judgement.out_of_order:
            logger.info(
                "vocabulary order checked on %d training targets: %d of %d clearly different "
                "pairs of entries in the wrong order%s", self._num_counted, judgement.wrong_pairs,
                judgement.clear_pairs, "" if judgement.judged else " (too few to judge)",
            )
            return
        assert judgement.first_wrong is not None and judgement.later is not None
        source = getattr(self._vocab, "bilm_tf_files", {}).get(self._namespace)

        def describe(position: int) -> str:
            index = int(ids[position])
            # Id k is line k + 1 of a bilm-tf vocabulary file.
            where = f"{source}:{index + 1}" if source else f"entry {index}"
            return f"{where} {tokens[index]!r} (counted {int(counts[index])} times)"

        raise ConfigurationError(
            f"the vocabulary {source or repr(self._namespace)} is not sorted by descending "
            "frequency, which the sampled softmax's log-uniform sampler assumes (training "
            "would sample the wrong negatives and report a wrong perplexity): in the first "
            f"{self._num_counted} training targets, {judgement.wrong_pairs} of "
            f"{judgement.clear_pairs} pairs of entries with clearly different counts are in the "
            f"wrong order. The first line out of order: {describe(judgement.first_wrong)} comes "
            f"before {describe(judgement.later)}. Build the vocabulary from the training corpus "
            "with 'allennlp elmo-vocab', or, if this order is intended, turn this check off: "
            """-o '{"model.check_vocabulary_order": false}'"""
        )


@Vocabulary.register("from_bilm_tf_file", constructor="from_bilm_tf_file")
class BilmTfVocabulary(Vocabulary):
    """
    A `Vocabulary` whose OOV token is ``<UNK>``, which reads a bilm-tf vocabulary file into a
    non-padded namespace (``{"type": "from_bilm_tf_file", "vocabulary_file": ..., "namespace":
    "lm_targets"}``): id ``k`` is line ``k`` (0-based); padding is id 0, a real token.

    # Parameters

    oov_token : `str`, optional (default = `"<UNK>"`)
        The OOV token of the padded namespaces; None is ``<UNK>`` too. Other arguments: `Vocabulary`'s.
    """

    def __init__(self, *args, oov_token: Optional[str] = UNK_TOKEN, **kwargs) -> None:
        super().__init__(*args, oov_token=UNK_TOKEN if oov_token is None else oov_token, **kwargs)
        self.bilm_tf_files: Dict[str, str] = {}  # namespace -> the file it was read from, for messages

    def __eq__(self, other) -> bool:
        # Where a namespace was read from is not part of the vocabulary (so it equals its reload).
        if not isinstance(self, other.__class__):
            return False
        return {**self.__dict__, "bilm_tf_files": None} == {**other.__dict__, "bilm_tf_files": None}

    @classmethod
    def from_bilm_tf_file(cls, vocabulary_file: str, namespace: str = DEFAULT_LM_NAMESPACE) -> "BilmTfVocabulary":
        """Reads ``vocabulary_file`` (see `read_bilm_tf_vocabulary`) into ``namespace``."""
        tokens = read_bilm_tf_vocabulary(vocabulary_file)
        vocab = cls.from_tokens(tokens, namespace)
        vocab.bilm_tf_files[namespace] = vocabulary_file
        logger.info("read %d tokens from %s into namespace %r", len(tokens), vocabulary_file, namespace)
        return vocab

    @classmethod
    def from_tokens(cls, tokens: Sequence[str], namespace: str = DEFAULT_LM_NAMESPACE) -> "BilmTfVocabulary":
        """A vocabulary whose ``namespace`` holds ``tokens``, id k the k-th (line k of a bilm-tf vocabulary)."""
        vocab = cls(non_padded_namespaces=(*DEFAULT_NON_PADDED_NAMESPACES, namespace), oov_token=UNK_TOKEN)
        vocab._token_to_index[namespace].update((token, index) for index, token in enumerate(tokens))
        vocab._index_to_token[namespace].update(enumerate(tokens))
        return vocab

    @classmethod
    def from_files(
        cls,
        directory: Union[str, "os.PathLike[str]"],
        padding_token: Optional[str] = DEFAULT_PADDING_TOKEN,
        oov_token: Optional[str] = UNK_TOKEN,
    ) -> "Vocabulary":
        """`Vocabulary.from_files`, with ``<UNK>`` as the OOV token unless another is given."""
        return super().from_files(directory, padding_token, UNK_TOKEN if oov_token is None else oov_token)

