"""
Files of pre-tokenized sentences, one per line, the input of ``allennlp elmo``: `check_sentence_file`
refuses, before a long run starts, what would fail in its middle; `read_sentences` yields the lines.
"""
import os
from typing import Dict, Iterator, List, Tuple

from allennlp.common.checks import ConfigurationError

from elmo_plugin.common.paths import PathLike
from elmo_plugin.common.text_files import DEFAULT_MAX_LISTED, check_is_file, decoded_lines, format_line_numbers
from elmo_plugin.model_files.bilm_tf.options import HDF5_SIGNATURE


def sentence_text(tokens: List[str]) -> str:
    """The canonical text of a tokenized sentence, its tokens joined by single spaces: the key of
    ``sentence_to_index`` and ``--use-sentence-keys``."""
    return " ".join(tokens)


def check_is_text_input(path: PathLike) -> None:
    """The cheap half of `check_sentence_file`: ``path`` exists and is not an HDF5 file (swapped
    arguments named as such, before an existing output is blamed)."""
    path = os.fspath(path)
    check_is_file(path)
    with open(path, "rb") as handle:
        if handle.read(len(HDF5_SIGNATURE)) == HDF5_SIGNATURE:
            raise ConfigurationError(
                f"{path} is an HDF5 file, not a text file of sentences: did you swap the input "
                "and the output? (the sentences come first, the HDF5 file to write second)"
            )


def check_sentence_file(
    path: PathLike, use_sentence_keys: bool = False, max_listed: int = DEFAULT_MAX_LISTED
) -> int:
    """
    Checks a file of tokenized sentences in one streaming pass and returns the number of sentences.

    # Parameters

    path : `PathLike`
        The file: one sentence per line, tokens separated by whitespace, UTF-8.
    use_sentence_keys : `bool`, optional (default = `False`)
        The sentences will be HDF5 keys, so each must be unique and a usable name (``/`` would
        nest groups, ``.`` names the root); their texts are kept in memory for the pass.
    max_listed : `int`, optional (default = `20`)
        At most this many line numbers are spelled out in an error message; the rest are counted.

    # Raises

    `ConfigurationError`
        For a missing or HDF5 file, bad UTF-8, blank lines, no lines, and with ``use_sentence_keys``
        repeats and sentences that cannot be names.
    """
    path = os.fspath(path)
    check_is_text_input(path)
    num_sentences = 0
    blank_lines: List[int] = []
    first_line_of: Dict[str, int] = {}
    duplicates: List[Tuple[int, int]] = []  # (line, line of its first occurrence), 1-based
    not_hdf5_names: List[int] = []
    for line_index, text, _ in decoded_lines(path):
        num_sentences += 1
        tokens = text.split()
        if not tokens:
            blank_lines.append(line_index + 1)
            continue
        if use_sentence_keys:
            key = sentence_text(tokens)
            first_line = first_line_of.setdefault(key, line_index + 1)
            if first_line != line_index + 1:
                duplicates.append((line_index + 1, first_line))
            if "/" in key or key == ".":
                not_hdf5_names.append(line_index + 1)

    if blank_lines:
        raise ConfigurationError(
            f"{path}: {len(blank_lines)} blank or whitespace-only line(s), at line(s) "
            f"{format_line_numbers(blank_lines, max_listed)} (1-based). Every line must hold "
            "one tokenized sentence; please remove them."
        )
    if num_sentences == 0:
        raise ConfigurationError(f"{path}: the file is empty; there are no sentences to read")
    if duplicates:
        pairs = ", ".join(f"line {line} repeats line {first}" for line, first in duplicates[:max_listed])
        if len(duplicates) > max_listed:
            pairs += f", ... ({len(duplicates)} in all)"
        raise ConfigurationError(
            f"{path}: sentences are used as keys, but {len(duplicates)} line(s) repeat an "
            f"earlier sentence: {pairs}. Remove the duplicates or key the sentences by line "
            "number instead."
        )
    if not_hdf5_names:
        raise ConfigurationError(
            f"{path}: with --use-sentence-keys every sentence becomes an HDF5 dataset name, but "
            f"{len(not_hdf5_names)} sentence(s) contain '/' (HDF5's group separator) or are '.': "
            f"line(s) {format_line_numbers(not_hdf5_names, max_listed)}. Key the sentences by "
            "line number instead (leave out --use-sentence-keys; sentence_to_index then maps "
            "the text)."
        )
    return num_sentences


def read_sentences(path: PathLike, skip_blank_lines: bool = False) -> Iterator[Tuple[int, List[str]]]:
    """
    Yields ``(line_index, tokens)`` (0-based, the HDF5 key ``allennlp elmo`` writes) for every line.

    # Parameters

    path : `PathLike`
        The file: one sentence per line, tokens separated by whitespace, UTF-8.
    skip_blank_lines : `bool`, optional (default = `False`)
        Leave out blank lines instead of yielding empty lists (line indices still count them).
    """
    path = os.fspath(path)
    check_is_file(path)  # here, not in a generator: a missing file fails at the call
    lines = ((line_index, text.split()) for line_index, text, _ in decoded_lines(path))
    return (line for line in lines if line[1] or not skip_blank_lines)
