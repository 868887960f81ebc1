"""
Reading text files line by line, with errors that name the file and the line.

Every text file the plugin reads (sentences to embed, pretraining corpora, vocabularies, task
data, raw text to tokenize) goes through `decoded_lines`, so a byte that is not UTF-8 is always
reported the same way: ``path:line: not valid UTF-8 (byte offset ...)``, before any output is
written by the callers that check their input first.
"""
import glob
import os
from typing import Iterator, List, Sequence, Tuple, Union

from allennlp.common.checks import ConfigurationError

from elmo_plugin.common.util import PathLike

_UTF8_BOM = "\ufeff"

# How many line numbers an error message lists before it only gives a count.
DEFAULT_MAX_LISTED = 20


def format_line_numbers(line_numbers: List[int], max_listed: int = DEFAULT_MAX_LISTED) -> str:
    """
    ``"3, 7, 12"``, or the first ``max_listed`` numbers followed by ``"... (45 in all)"``, so that a
    file with millions of bad lines still gives a one-line message.
    """
    listed = ", ".join(str(number) for number in line_numbers[:max_listed])
    if len(line_numbers) > max_listed:
        listed += f", ... ({len(line_numbers)} in all)"
    return listed


def check_is_file(path: str) -> None:
    if not os.path.exists(path):
        raise ConfigurationError(f"input file not found: {path}")
    if not os.path.isfile(path):
        raise ConfigurationError(f"input path is not a file: {path}")


def decoded_lines(path: str) -> Iterator[Tuple[int, str, int]]:
    """
    Yields ``(line_index, text, size_in_bytes)`` (0-based index) for every line of ``path``,
    blank ones included. The file is read as bytes so that a decoding error can name the exact
    place: `ConfigurationError` ``path:line: not valid UTF-8 (byte offset ...)`` at the first line
    that is not UTF-8. A UTF-8 byte order mark at the start is dropped. Every reader of tokenized
    text in this plugin (``allennlp elmo`` input, pretraining corpora, vocabularies) uses this.
    """
    offset = 0
    with open(path, "rb") as handle:
        for line_index, raw_line in enumerate(handle):
            try:
                text = raw_line.decode("utf-8")
            except UnicodeDecodeError as error:
                bad_bytes = raw_line[error.start : error.end].hex(" ")
                raise ConfigurationError(
                    f"{path}:{line_index + 1}: not valid UTF-8 (byte offset "
                    f"{offset + error.start} in the file, bytes {bad_bytes}: {error.reason}); "
                    "the text must be UTF-8, e.g. convert it with "
                    "'iconv -f <its encoding> -t UTF-8'"
                ) from None
            if line_index == 0 and text.startswith(_UTF8_BOM):
                text = text[len(_UTF8_BOM) :]
            offset += len(raw_line)
            yield line_index, text, len(raw_line)


def expand_corpus_glob(file_glob_or_paths: Union[PathLike, Sequence[PathLike]]) -> List[str]:
    """
    The files of a corpus, sorted: a glob pattern (``"data/train/*.txt"``, ``~`` expanded), a
    plain path, or a list of either. Directories matched by a pattern are ignored. Raises a
    `ConfigurationError` naming the pattern(s) when nothing matches.
    """
    patterns = (
        [file_glob_or_paths]
        if isinstance(file_glob_or_paths, (str, os.PathLike))
        else list(file_glob_or_paths)
    )
    files = set()
    for pattern in patterns:
        expanded = os.path.expanduser(os.fspath(pattern))
        files.update(path for path in glob.glob(expanded) if os.path.isfile(path))
    if not files:
        shown = ", ".join(repr(os.fspath(pattern)) for pattern in patterns) or "[]"
        raise ConfigurationError(f"no files match the corpus glob {shown}")
    return sorted(files)
