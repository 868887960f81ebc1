"""
The bilm-tf vocabulary file, and an AllenNLP `Vocabulary` that reads it.

The file has one token per line: ``<S>``, ``</S>`` and ``<UNK>`` first, then the corpus tokens by
descending frequency (ties broken by the token itself), because the sampled softmax's
log-uniform sampler assumes that id order (Zipf). Nothing else is on a line (no counts).

- `build_lm_vocabulary` counts a tokenized corpus (a glob of files, one sentence per line,
  tokens split on whitespace) and writes the file; ``allennlp elmo-vocab`` runs it.
- ``{"type": "from_bilm_tf_file", "vocabulary_file": ..., "namespace": "lm_targets"}`` in a
  training config reads it into a *non-padded* namespace: the id of a token is its 0-based line
  number, exactly as in bilm-tf, and out-of-vocabulary tokens map to ``<UNK>``.

Corpus files are read as bytes, one ``\\n``-terminated line at a time, decoded as UTF-8 (an
error names ``file:line``); a UTF-8 byte order mark at the start of a file is dropped; tokens
are ``line.split()`` (any Unicode whitespace, ``\\r`` included); blank lines are skipped.
"""
import logging
import os
from collections import Counter
from dataclasses import dataclass
from typing import List, Optional, Sequence, Union

from allennlp.common.checks import ConfigurationError
from allennlp.common.file_utils import cached_path
from allennlp.common.tqdm import Tqdm
from allennlp.data.vocabulary import (
    DEFAULT_NON_PADDED_NAMESPACES,
    DEFAULT_PADDING_TOKEN,
    Vocabulary,
)

from elmo_plugin.common.atomic_output import atomic_output
from elmo_plugin.data.character_ids import BOS_TOKEN, EOS_TOKEN
from elmo_plugin.common.text_files import decoded_lines, expand_corpus_glob
from elmo_plugin.common.util import PathLike

logger = logging.getLogger(__name__)

UNK_TOKEN = "<UNK>"
SPECIAL_TOKENS = (BOS_TOKEN, EOS_TOKEN, UNK_TOKEN)
DEFAULT_LM_NAMESPACE = "lm_targets"

# AllenNLP's `Vocabulary.save_to_files` writes "\n" inside a token as this marker and
# `set_from_file` turns the marker back into "\n": a token containing it would not survive a
# model archive, so such tokens are left out of (and refused in) vocabulary files.
_ALLENNLP_NEWLINE_MARKER = "@@NEWLINE@@"
_PROGRESS_EVERY_LINES = 10_000



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
    Counts the tokens of a tokenized corpus and writes the bilm-tf vocabulary file:
    ``<S>``, ``</S>``, ``<UNK>``, then every token seen at least ``min_count`` times, sorted by
    ``(-count, token)``, at most ``max_size`` lines in all (the 3 special tokens included).

    The corpus is streamed (only the counts are kept in memory). Corpus occurrences of the
    special tokens themselves are counted (as covered) but not listed twice; tokens containing
    AllenNLP's ``@@NEWLINE@@`` marker are left out (they would not survive a model archive).
    The file is written to a temporary file next to ``output_file`` and renamed, so it only
    appears complete; nothing else is written. Raises `ConfigurationError` for an empty glob, a
    corpus without tokens, bad UTF-8 (``file:line``), a missing output directory or bad sizes.
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

    counts: Counter = Counter()
    num_sentences = num_blank = 0
    total_bytes = sum(os.path.getsize(path) for path in files)
    with Tqdm.tqdm(
        total=total_bytes,
        unit="B",
        unit_scale=True,
        desc="counting tokens",
        disable=not progress,
    ) as bar:
        for path in files:
            bar.set_postfix_str(os.path.basename(path))
            unreported = 0
            for line_index, text, size in decoded_lines(path):
                line_number = line_index + 1
                tokens = text.split()
                if tokens:
                    counts.update(tokens)
                    num_sentences += 1
                else:
                    num_blank += 1
                unreported += size
                if line_number % _PROGRESS_EVERY_LINES == 0:
                    bar.update(unreported)
                    unreported = 0
            bar.update(unreported)
    num_tokens = sum(counts.values())
    if num_tokens == 0:
        raise ConfigurationError(
            f"the corpus {pattern_text} contains no tokens ({len(files)} file(s), all lines "
            "blank)"
        )

    dropped = [token for token in counts if _ALLENNLP_NEWLINE_MARKER in token]
    if dropped:
        logger.warning(
            "left out %d token type(s) containing %s (AllenNLP's newline marker), e.g. %r",
            len(dropped),
            _ALLENNLP_NEWLINE_MARKER,
            dropped[0],
        )
    candidates = [
        (token, count)
        for token, count in counts.items()
        if count >= min_count
        and token not in SPECIAL_TOKENS
        and _ALLENNLP_NEWLINE_MARKER not in token
    ]
    candidates.sort(key=lambda item: (-item[1], item[0]))
    if max_size is not None:
        candidates = candidates[: max_size - len(SPECIAL_TOKENS)]
    vocabulary = list(SPECIAL_TOKENS) + [token for token, _ in candidates]
    covered = sum(count for _, count in candidates) + sum(counts[t] for t in SPECIAL_TOKENS)

    with atomic_output(output_file) as temporary:
        with open(temporary, "w", encoding="utf-8", newline="\n") as out:
            for token in vocabulary:
                out.write(token)
                out.write("\n")

    stats = LmVocabularyStats(
        output_file=output_file,
        num_files=len(files),
        num_sentences=num_sentences,
        num_blank_lines=num_blank,
        num_tokens=num_tokens,
        num_types=len(counts),
        vocab_size=len(vocabulary),
        num_covered_tokens=covered,
    )
    logger.info(
        "wrote %d tokens to %s (%d corpus tokens, %d types, coverage %.4f)",
        stats.vocab_size,
        output_file,
        stats.num_tokens,
        stats.num_types,
        stats.coverage,
    )
    return stats


def read_bilm_tf_vocabulary(vocabulary_file: str) -> List[str]:
    """
    Reads and checks a bilm-tf vocabulary file: UTF-8, one token per line (surrounding
    whitespace is ignored), no blank lines, no duplicates, no whitespace inside a token, and
    ``<S>``, ``</S>``, ``<UNK>`` present (anywhere: released files put ``</S>`` first). A final
    newline is optional. Problems raise `ConfigurationError` naming ``file:line``.
    """
    try:
        path = cached_path(vocabulary_file)
    except (FileNotFoundError, ValueError) as error:
        raise ConfigurationError(f"vocabulary file not found: {vocabulary_file} ({error})") from None
    if not os.path.isfile(path):
        raise ConfigurationError(f"vocabulary file is not a file: {vocabulary_file}")
    tokens: List[str] = []
    first_line = {}
    for line_index, text, _ in decoded_lines(path):
        line_number = line_index + 1
        where = f"{vocabulary_file}:{line_number}"
        parts = text.split()
        if not parts:
            raise ConfigurationError(
                f"{where}: blank line (a bilm-tf vocabulary file has exactly one token per line)"
            )
        if len(parts) > 1:
            raise ConfigurationError(
                f"{where}: {text.strip()!r} is more than one token (one token per line, no "
                "counts or other columns)"
            )
        token = parts[0]
        if token in first_line:
            raise ConfigurationError(
                f"{where}: duplicate token {token!r} (first on line {first_line[token]})"
            )
        if _ALLENNLP_NEWLINE_MARKER in token:
            raise ConfigurationError(
                f"{where}: token {token!r} contains {_ALLENNLP_NEWLINE_MARKER}, which AllenNLP's "
                "vocabulary files use for a newline; it would not survive a model archive"
            )
        if line_number == 1 and token == DEFAULT_PADDING_TOKEN:
            raise ConfigurationError(
                f"{where}: {DEFAULT_PADDING_TOKEN} as the first token would be dropped when "
                "AllenNLP saves the vocabulary"
            )
        first_line[token] = line_number
        tokens.append(token)
    missing = [token for token in SPECIAL_TOKENS if token not in first_line]
    if missing:
        raise ConfigurationError(
            f"{vocabulary_file}: the vocabulary lacks {', '.join(missing)} (a bilm-tf vocabulary "
            f"must contain {', '.join(SPECIAL_TOKENS)}; build one with 'allennlp elmo-vocab')"
        )
    return tokens


@Vocabulary.register("from_bilm_tf_file", constructor="from_bilm_tf_file")
class BilmTfVocabulary(Vocabulary):
    """
    A `Vocabulary` whose OOV token is ``<UNK>`` and which can load a bilm-tf vocabulary file
    into a non-padded namespace. Registered as ``"from_bilm_tf_file"``:

    ```jsonnet
    "vocabulary": {"type": "from_bilm_tf_file", "vocabulary_file": "vocab.txt",
                   "namespace": "lm_targets"}
    ```

    In that namespace id ``k`` is line ``k`` (0-based) of the file, there is no
    ``@@PADDING@@``/``@@UNKNOWN@@``, and `get_token_index` of an unknown token gives the id of
    ``<UNK>``. Padding in tensors of that namespace is id 0, a real token (usually ``<S>``): take
    masks from another field (e.g. the ``elmo_characters`` ids), never from these ids.

    Model archives save the vocabulary with `save_to_files` and `Model._load` reloads it with
    ``BilmTfVocabulary.from_files(directory, padding_token, oov_token)`` (both ``None`` unless the
    config gives them); `from_files` here makes ``<UNK>`` the OOV token, so the reloaded
    vocabulary is identical. Other namespaces behave as in `Vocabulary`, except that padded
    ones use ``<UNK>`` as their OOV token.
    """

    def __init__(self, *args, oov_token: Optional[str] = UNK_TOKEN, **kwargs) -> None:
        super().__init__(*args, oov_token=UNK_TOKEN if oov_token is None else oov_token, **kwargs)

    @classmethod
    def from_bilm_tf_file(
        cls, vocabulary_file: str, namespace: str = DEFAULT_LM_NAMESPACE
    ) -> "BilmTfVocabulary":
        """Reads ``vocabulary_file`` (see `read_bilm_tf_vocabulary`) into ``namespace``."""
        tokens = read_bilm_tf_vocabulary(vocabulary_file)
        vocab = cls(
            non_padded_namespaces=(*DEFAULT_NON_PADDED_NAMESPACES, namespace),
            oov_token=UNK_TOKEN,
        )
        for index, token in enumerate(tokens):
            vocab._token_to_index[namespace][token] = index
            vocab._index_to_token[namespace][index] = token
        logger.info("read %d tokens from %s into namespace %r", len(tokens), vocabulary_file, namespace)
        return vocab

    @classmethod
    def from_files(
        cls,
        directory: Union[str, "os.PathLike[str]"],
        padding_token: Optional[str] = DEFAULT_PADDING_TOKEN,
        oov_token: Optional[str] = UNK_TOKEN,
    ) -> "Vocabulary":
        """`Vocabulary.from_files`, with ``<UNK>`` as the OOV token unless another is given."""
        return super().from_files(
            directory, padding_token, UNK_TOKEN if oov_token is None else oov_token
        )

