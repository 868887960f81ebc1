"""
``token_tag_conll``: the dataset reader for sequence tagging data in the two-column CoNLL
layout (``token<TAB>tag`` per line, a blank line after every sentence), e.g. the WikiANN and
WNUT-17 NER sets. Its instances fit allennlp-models' ``crf_tagger`` and ``simple_tagger``.
"""
import logging
from typing import Iterator, List, Optional, Sequence, Tuple, Union

from allennlp.common.checks import ConfigurationError
from allennlp.data.dataset_readers.dataset_reader import DatasetReader
from allennlp.data.instance import Instance
from allennlp.data.tokenizers import Token

from elmo_plugin.common.text_files import decoded_lines
from elmo_plugin.tasks.common.sharded_task_reader import ShardedTaskReader, no_instance_error
from elmo_plugin.tasks.common.task_data import task_data_path

logger = logging.getLogger(__name__)


def read_token_tag_sentences(path: str) -> Iterator[Tuple[List[str], List[str]]]:
    """
    Yields ``(tokens, tags)`` for every sentence of a ``token<TAB>tag`` file (UTF-8), lazily.

    A blank or whitespace-only line ends a sentence (a line holding only a TAB counts as
    blank: some releases separate sentences that way); several in a row are one break, and the
    last sentence needs none. Tokens are kept exactly as written (no stripping), since some
    data sets have tokens with invisible characters that are part of the token.

    # Raises

    `ConfigurationError` ``path:line: ...`` for a line that is not UTF-8, a non-blank line
    that does not have exactly two TAB-separated columns, and an empty token or tag.
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
            raise ConfigurationError(
                f"{path}:{line_index + 1}: empty {'token' if not token else 'tag'}: "
                f"{line[:80]!r}"
            )
        tokens.append(token)
        tags.append(tag)
    if tokens:
        yield tokens, tags


@DatasetReader.register("token_tag_conll")
class TokenTagConllReader(ShardedTaskReader):
    """
    Reads a sequence tagging file with one ``token<TAB>tag`` per line and a blank line after
    every sentence (the last sentence may or may not have one), e.g.

    ```
    Ann<TAB>B-PER
    lives<TAB>O
    in<TAB>O
    Paris<TAB>B-LOC

    ...
    ```

    One instance per sentence, with the fields ``tokens`` (`TextField`), ``tags``
    (`SequenceLabelField`) and ``metadata`` (`MetadataField` ``{"words": [...]}``), which is
    what allennlp-models' ``crf_tagger`` takes. The tags are used as written: nothing converts
    between tagging schemes, so give the ``crf_tagger`` the file's scheme (BIO for WikiANN and
    WNUT-17) as its ``label_encoding``.

    # Parameters

    token_indexers : `Dict[str, TokenIndexer]`, optional (default = `{"tokens": SingleIdTokenIndexer()}`)
        How to index the tokens.
    label_namespace : `str`, optional (default = `"labels"`)
        Vocabulary namespace of the tags (the taggers' default).
    **kwargs
        `DatasetReader`'s ``max_instances`` and ``serialization_dir``; the reader shards itself.

    # Raises

    `ConfigurationError` ``path:line: ...`` for a malformed line (see
    `read_token_tag_sentences`), and ``path: ...`` for a file without any sentence.
    """

    def _read(self, file_path) -> Iterator[Instance]:
        path = task_data_path(file_path)
        logger.info("Reading token<TAB>tag sentences from %s", path)
        for tokens, tags in self.shard_iterable(self._sentences(path)):
            yield self.text_to_instance(tokens, tags)

    @staticmethod
    def _sentences(path: str) -> Iterator[Tuple[List[str], List[str]]]:
        # Parsed before sharding, so that every shard checks the whole file and the empty-file
        # check sees all sentences, not one shard's.
        count = 0
        for sentence in read_token_tag_sentences(path):
            count += 1
            yield sentence
        if count == 0:
            raise no_instance_error(
                path, "sentences", " (expected token<TAB>tag lines)", hint="is it empty?"
            )

    def text_to_instance(  # type: ignore
        self, tokens: Sequence[Union[str, Token]], tags: Optional[List[str]] = None
    ) -> Instance:
        """
        ``tokens`` are strings or `Token`s; ``tags``, one per token, are left out when
        predicting.
        """
        return self.tagging_instance(tokens, tags)
