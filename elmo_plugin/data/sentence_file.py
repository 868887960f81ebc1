"""
Files of pre-tokenized sentences: one sentence per line, tokens separated by whitespace.

This is the input format of ``allennlp elmo`` (and of bilm-tf's training data). Two pieces:

- `check_sentence_file` makes one streaming pass over the file and raises a
  `ConfigurationError` for everything that would otherwise fail (or silently go wrong) in the
  middle of a long run: a missing file, bytes that are not UTF-8, blank lines, no sentences at
  all, and, when sentences are used as keys, duplicates.
- `read_sentences` then yields ``(line_index, tokens)`` one line at a time, so files larger
  than memory can be embedded or used for training.

Lines end at ``\\n`` (a ``\\r`` before it is whitespace and is stripped with the rest). A UTF-8
byte order mark at the very start of the file is dropped, so that it does not become part of
the first token.
"""
import os
from typing import Dict, Iterator, List, Tuple

from allennlp.common.checks import ConfigurationError

from elmo_plugin.common.paths import PathLike
from elmo_plugin.common.text_files import (
    DEFAULT_MAX_LISTED,
    check_is_file,
    decoded_lines,
    format_line_numbers,
)

# The first bytes of every HDF5 file (what ``allennlp elmo`` writes).
HDF5_SIGNATURE = b"\x89HDF\r\n\x1a\n"


def sentence_text(tokens: List[str]) -> str:
    """
    The canonical text of a tokenized sentence: its tokens joined by single spaces. This is what
    ``sentence_to_index`` maps and what ``--use-sentence-keys`` uses as the key, so two lines that
    differ only in their whitespace count as the same sentence.
    """
    return " ".join(tokens)


def check_is_text_input(path: PathLike) -> None:
    """
    The cheap half of `check_sentence_file`, which reads only the first bytes: ``path`` exists
    and is not an HDF5 file, the output given as the input. A command runs it before anything
    that would blame the other file (such as refusing an existing output), so that swapped
    arguments are named as such.
    """
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
    Checks a file of tokenized sentences in one streaming pass, before any expensive work, and
    returns the number of sentences (= lines) in it.

    # Parameters

    path : `PathLike`
        The file: one sentence per line, tokens separated by whitespace, UTF-8.
    use_sentence_keys : `bool`, optional (default = `False`)
        The sentences will be used as keys (``allennlp elmo --use-sentence-keys``), so every
        sentence must be unique and usable as an HDF5 name. This keeps the text of every
        sentence in memory for the pass.
    max_listed : `int`, optional (default = `20`)
        At most this many line numbers are spelled out in an error message; the rest are counted.

    # Raises

    `ConfigurationError`
        If the file does not exist, is an HDF5 file (the output given as the input), is not
        UTF-8 (naming the first bad line and its byte offset),
        has blank or whitespace-only lines (naming all of them, 1-based), has no lines at all, or,
        with ``use_sentence_keys``, repeats a sentence (naming the lines of the repeats and of
        their first occurrence) or has a sentence that cannot be an HDF5 name.

    h5py reads ``/`` as a group separator (``"1 / 2"`` would be stored as dataset ``" 2"`` inside
    group ``"1 "``, invisible to ``keys()``, and ``"a//b"`` would collide with ``"a/b"``), and
    ``"."`` names the root, so with ``use_sentence_keys`` such sentences are rejected here
    instead of failing or silently nesting in the middle of a run.
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
        pairs = ", ".join(
            f"line {line} repeats line {first}" for line, first in duplicates[:max_listed]
        )
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


def read_sentences(
    path: PathLike, skip_blank_lines: bool = False
) -> Iterator[Tuple[int, List[str]]]:
    """
    Yields ``(line_index, tokens)`` for every line of ``path``, lazily: only one line is in
    memory at a time. ``line_index`` is 0-based (the HDF5 key ``allennlp elmo`` writes).
    Run `check_sentence_file` first to reject bad files before any work is done; this generator
    raises the same `ConfigurationError` if it meets bytes that are not UTF-8.

    # Parameters

    path : `PathLike`
        The file: one sentence per line, tokens separated by whitespace, UTF-8.
    skip_blank_lines : `bool`, optional (default = `False`)
        Leave out blank and whitespace-only lines (useful for training corpora, where blank lines
        separate documents) instead of yielding them as empty token lists. Line indices still
        count them, so they always match the file.
    """
    path = os.fspath(path)
    # Checked here rather than inside the generator, so that a missing file fails at the call.
    check_is_file(path)
    return _tokenized_lines(path, skip_blank_lines)


def _tokenized_lines(path: str, skip_blank_lines: bool) -> Iterator[Tuple[int, List[str]]]:
    for line_index, text, _ in decoded_lines(path):
        tokens = text.split()
        if tokens or not skip_blank_lines:
            yield line_index, tokens
