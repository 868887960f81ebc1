"""``token_tag_conll``: sequence tagging data in the two-column CoNLL layout (WikiANN, WNUT-17)."""
import logging
from typing import Iterator, List, Tuple

from allennlp.common.checks import ConfigurationError
from allennlp.data.dataset_readers.dataset_reader import DatasetReader
from allennlp.data.instance import Instance

from elmo_plugin.common.text_files import decoded_lines
from elmo_plugin.tasks.common.sharded_task_reader import ShardedTaskReader, at_least_one, no_instance_error
from elmo_plugin.tasks.common.task_data import task_data_path

logger = logging.getLogger(__name__)


def read_token_tag_sentences(path: str) -> Iterator[Tuple[List[str], List[str]]]:
    """
    Yields ``(tokens, tags)`` for every sentence of a ``token<TAB>tag`` file (UTF-8), lazily. A
    blank line (or one holding only a TAB, as some releases write) ends a sentence; tokens are kept
    exactly as written, invisible characters included.

    # Raises

    `ConfigurationError` ``path:line: ...`` for bad UTF-8, a line without exactly two columns,
    and an empty token or tag.
    """
    tokens: List[str] = []
    tags: List[str] = []
    for line_index, text, _ in decoded_lines(path):
        line = text.rstrip("\r\n")
        if not line.strip():
            if tokens:
                yield tokens, tags
                tokens, tags = [], []
            continue
        columns = line.split("\t")
        if len(columns) != 2:
            raise ConfigurationError(
                f"{path}:{line_index + 1}: expected 2 tab-separated columns (token<TAB>tag), "
                f"found {len(columns)}: {line[:80]!r}"
            )
        token, tag = columns
        if not token or not tag:
            raise ConfigurationError(f"{path}:{line_index + 1}: empty {'tag' if token else 'token'}: {line[:80]!r}")
        tokens.append(token)
        tags.append(tag)
    if tokens:
        yield tokens, tags


@DatasetReader.register("token_tag_conll")
class TokenTagConllReader(ShardedTaskReader):
    """
    Reads `read_token_tag_sentences` into one instance per sentence with ``crf_tagger``'s fields:
    ``tokens``, ``tags`` (as written: give ``crf_tagger`` the file's scheme, e.g. BIO, as its
    ``label_encoding``) and ``metadata``.

    # Parameters

    token_indexers : `Dict[str, TokenIndexer]`, optional (default = `{"tokens": SingleIdTokenIndexer()}`)
        How to index the tokens.
    label_namespace : `str`, optional (default = `"labels"`)
        Vocabulary namespace of the tags (the taggers' default).
    **kwargs
        `DatasetReader`'s ``max_instances`` and ``serialization_dir``; the reader shards itself.

    # Raises

    `ConfigurationError` ``path:line: ...`` for a malformed line, ``path: ...`` for no sentence.
    """

    def _read(self, file_path) -> Iterator[Instance]:
        path = task_data_path(file_path)
        logger.info("Reading token<TAB>tag sentences from %s", path)
        # Parsed and checked before sharding: every shard checks the whole file.
        error = no_instance_error(path, "sentences", " (expected token<TAB>tag lines)", hint="is it empty?")
        for tokens, tags in self.shard_iterable(at_least_one(read_token_tag_sentences(path), error)):
            yield self.text_to_instance(tokens, tags)
