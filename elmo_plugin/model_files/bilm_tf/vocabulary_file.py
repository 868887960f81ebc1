"""
Reading a bilm-tf vocabulary file: one token per line, ``<S>``, ``</S>`` and ``<UNK>`` among them,
one softmax row per line. It lives with the other bilm-tf file formats because a training
checkpoint's softmax rows are read against it; `elmo_plugin.data.vocabulary` builds and sorts
such files.
"""
import os
from typing import Dict, List

from allennlp.common.checks import ConfigurationError
from allennlp.common.file_utils import cached_path
from allennlp.data.vocabulary import DEFAULT_PADDING_TOKEN

from elmo_plugin.common.text_files import decoded_lines

UNK_TOKEN = "<UNK>"
SPECIAL_TOKENS = ("<S>", "</S>", UNK_TOKEN)

# AllenNLP's vocabulary files write "\n" inside a token as this marker, and read it back as "\n":
# a token containing it would not survive a model archive, so it is left out of (and refused in)
# vocabulary files.
ALLENNLP_NEWLINE_MARKER = "@@NEWLINE@@"


def read_bilm_tf_vocabulary(vocabulary_file: str) -> List[str]:
    """The tokens of a bilm-tf vocabulary file, checked (one token a line, no blank lines or
    duplicates, the special tokens anywhere); problems raise `ConfigurationError` naming ``file:line``."""
    try:
        path = cached_path(vocabulary_file)
    except (FileNotFoundError, ValueError) as error:
        raise ConfigurationError(f"vocabulary file not found: {vocabulary_file} ({error})") from None
    if not os.path.isfile(path):
        raise ConfigurationError(f"vocabulary file is not a file: {vocabulary_file}")
    first_line: Dict[str, int] = {}  # token -> line number, in the file's order
    for line_index, text, _ in decoded_lines(path):
        line_number = line_index + 1
        where = f"{vocabulary_file}:{line_number}"
        parts = text.split()
        if not parts:
            raise ConfigurationError(f"{where}: blank line (a bilm-tf vocabulary file has exactly one token per line)")
        if len(parts) > 1:
            raise ConfigurationError(
                f"{where}: {text.strip()!r} is more than one token (one token per line, no "
                "counts or other columns)"
            )
        token = parts[0]
        if token in first_line:
            raise ConfigurationError(f"{where}: duplicate token {token!r} (first on line {first_line[token]})")
        if ALLENNLP_NEWLINE_MARKER in token:
            raise ConfigurationError(
                f"{where}: token {token!r} contains {ALLENNLP_NEWLINE_MARKER}, which AllenNLP's "
                "vocabulary files use for a newline; it would not survive a model archive"
            )
        if line_number == 1 and token == DEFAULT_PADDING_TOKEN:
            raise ConfigurationError(
                f"{where}: {DEFAULT_PADDING_TOKEN} as the first token would be dropped when "
                "AllenNLP saves the vocabulary"
            )
        first_line[token] = line_number
    missing = [token for token in SPECIAL_TOKENS if token not in first_line]
    if missing:
        raise ConfigurationError(
            f"{vocabulary_file}: the vocabulary lacks {', '.join(missing)} (a bilm-tf vocabulary "
            f"must contain {', '.join(SPECIAL_TOKENS)}; build one with 'allennlp elmo-vocab')"
        )
    return list(first_line)
