"""
Reading text files line by line (every text file the plugin reads goes through `decoded_lines`),
with errors that name the file and the line.
"""
import glob
import os
from typing import Iterator, List, Sequence, Tuple, Union

from allennlp.common.checks import ConfigurationError

from elmo_plugin.common.paths import PathLike

_UTF8_BOM = "\ufeff"
# UTF-16's byte order marks, little- and big-endian: a file that starts with one is UTF-16
# (0xFF and 0xFE never occur in UTF-8).
_UTF16_BOMS = (b"\xff\xfe", b"\xfe\xff")
_UTF16_HINT = "convert it with 'iconv -f UTF-16 -t UTF-8'"
_NUL = b"\x00"

# How many line numbers an error message lists before it only gives a count.
DEFAULT_MAX_LISTED = 20


def format_line_numbers(line_numbers: List[int], max_listed: int = DEFAULT_MAX_LISTED) -> str:
    """``"3, 7, 12"``, or the first ``max_listed`` numbers followed by ``"... (45 in all)"``."""
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
    Yields ``(line_index, text, size_in_bytes)`` for every line of ``path``, blank ones included.
    A `ConfigurationError` ``path:line: ... (byte offset ...)`` at the first line that is not
    UTF-8 or has a NUL byte, or at a UTF-16 byte order mark; a UTF-8 one is dropped.
    """
    offset = 0
    with open(path, "rb") as handle:
        for line_index, raw_line in enumerate(handle):
            if offset == 0 and raw_line.startswith(_UTF16_BOMS):
                raise ConfigurationError(
                    f"{path}:1: not UTF-8: the file starts with a UTF-16 byte order mark "
                    f"({raw_line[:2].hex(' ')}); {_UTF16_HINT}"
                )
            if _NUL in raw_line:
                # Before decoding: UTF-16 text with non-ASCII characters may also be invalid
                # UTF-8, and the NUL bytes are what points to UTF-16.
                raise ConfigurationError(
                    f"{path}:{line_index + 1}: NUL byte (byte offset "
                    f"{offset + raw_line.index(_NUL)} in the file); a text file has none: "
                    "this looks like UTF-16 without a byte order mark (a 0 byte next to every "
                    "ASCII character) or a binary file. If it is UTF-16, convert it with "
                    "'iconv -f UTF-16LE -t UTF-8' (UTF-16BE if the 0 bytes come first)"
                )
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
    The files of a corpus, sorted: a glob pattern (``~`` expanded), a plain path, or a list of
    either; directories are ignored. A `ConfigurationError` naming the pattern(s) when nothing matches.
    """
    patterns = [file_glob_or_paths] if isinstance(file_glob_or_paths, (str, os.PathLike)) else list(file_glob_or_paths)
    files = set()
    for pattern in patterns:
        expanded = os.path.expanduser(os.fspath(pattern))
        files.update(path for path in glob.glob(expanded) if os.path.isfile(path))
    if not files:
        shown = ", ".join(repr(os.fspath(pattern)) for pattern in patterns) or "[]"
        raise ConfigurationError(f"no files match the corpus glob {shown}")
    return sorted(files)
