"""
CoNLL-U (Universal Dependencies) readers ``conllu_tagging`` (part-of-speech tags) and
``conllu_sentence_genre`` (the genre prefix of ``sent_id``), and `read_conllu_sentences`.
"""
import os
import re
from dataclasses import dataclass, field
from typing import Dict, Iterator, List, Optional, Sequence, Tuple, Union

from allennlp.common.checks import ConfigurationError
from allennlp.data.dataset_readers.dataset_reader import DatasetReader
from allennlp.data.instance import Instance
from allennlp.data.token_indexers import TokenIndexer
from allennlp.data.tokenizers import Token

from elmo_plugin.common.text_files import decoded_lines
from elmo_plugin.tasks.common.sharded_task_reader import ShardedTaskReader, at_least_one, no_instance_error
from elmo_plugin.tasks.common.task_data import task_data_path

# CoNLL-U's ten columns (0-based indices into a row).
ID, FORM, LEMMA, UPOS, XPOS, FEATS, HEAD, DEPREL, DEPS, MISC = range(10)
CONLLU_COLUMNS = 10

TAG_COLUMNS = {"upos": UPOS, "xpos": XPOS}

_WORD_ID = re.compile(r"[0-9]+")
# Multiword tokens ("1-2": the surface token "don't" over the words "do" "n't") and empty nodes
# ("8.1": enhanced-dependency nodes without a surface word) are not words of the sentence.
_MULTIWORD_OR_EMPTY_NODE_ID = re.compile(r"[0-9]+[-.][0-9]+")


@dataclass
class ConlluSentence:
    """A CoNLL-U sentence: its first line (1-based), ``# key = value`` comments (``# newpar``: `None`),
    word rows split on TAB (no multiword tokens nor empty nodes) and each row's line number."""

    start_line: int
    comments: Dict[str, Optional[str]] = field(default_factory=dict)
    rows: List[List[str]] = field(default_factory=list)
    line_numbers: List[int] = field(default_factory=list)

    @property
    def words(self) -> List[str]:
        return [row[FORM] for row in self.rows]


def read_conllu_sentences(path: Union[str, "os.PathLike[str]"]) -> Iterator[ConlluSentence]:
    """
    Yields the sentences of the CoNLL-U file ``path`` (UTF-8) lazily, one at a time, separated by
    blank lines; the rows are exactly the words of the dependency tree.

    # Raises

    `ConfigurationError` ``path:line: ...`` for bad UTF-8, short word lines, bad or out of
    sequence IDs, and a sentence of comments only.
    """
    path = os.fspath(path)
    sentence: Optional[ConlluSentence] = None
    for line_index, text, _ in decoded_lines(path):
        line_number = line_index + 1
        # Only the line break goes: a trailing TAB is an (empty) column in extended formats.
        line = text.rstrip("\r\n")
        if not line.strip():
            if sentence is not None:
                yield _finished(path, sentence)
                sentence = None
            continue
        if sentence is None:
            sentence = ConlluSentence(start_line=line_number)
        if line.startswith("#"):
            key, equals, value = line[1:].partition("=")
            sentence.comments[key.strip()] = value.strip() if equals else None
            continue
        columns = line.split("\t")
        if len(columns) < CONLLU_COLUMNS:
            raise ConfigurationError(
                f"{path}:{line_number}: a CoNLL-U word line needs at least {CONLLU_COLUMNS} "
                f"tab-separated columns, found {len(columns)}: {line[:80]!r}"
            )
        word_id = columns[ID]
        if _MULTIWORD_OR_EMPTY_NODE_ID.fullmatch(word_id):
            continue
        if not _WORD_ID.fullmatch(word_id):
            raise ConfigurationError(
                f"{path}:{line_number}: the ID {word_id!r} is not an integer (nor a multiword "
                "range like '1-2' or an empty node like '8.1')"
            )
        if int(word_id) != len(sentence.rows) + 1:
            raise ConfigurationError(
                f"{path}:{line_number}: word ID {word_id} out of sequence, expected "
                f"{len(sentence.rows) + 1} (is a blank line missing between two sentences?)"
            )
        sentence.rows.append(columns)
        sentence.line_numbers.append(line_number)
    if sentence is not None:
        yield _finished(path, sentence)


def _finished(path: str, sentence: ConlluSentence) -> ConlluSentence:
    if not sentence.rows:
        raise ConfigurationError(f"{path}:{sentence.start_line}: comment lines without any word line after them")
    return sentence


@DatasetReader.register("conllu_tagging")
class ConlluTaggingReader(ShardedTaskReader):
    """
    Reads a CoNLL-U file for part-of-speech tagging, one instance per sentence, with the fields
    allennlp-models' ``crf_tagger`` takes: ``tokens``, ``tags`` and ``metadata``.

    # Parameters

    token_indexers : `Dict[str, TokenIndexer]`, optional (default = `{"tokens": SingleIdTokenIndexer()}`)
        How to index the words.
    tag_column : `str`, optional (default = `"upos"`)
        ``"upos"`` (column 4, universal POS tags) or ``"xpos"`` (column 5, language-specific
        tags: Penn Treebank tags in English-EWT).
    label_namespace : `str`, optional (default = `"labels"`)
        Vocabulary namespace of the tags (the taggers' default).
    **kwargs
        `DatasetReader`'s ``max_instances`` and ``serialization_dir``; the reader shards itself.
    """

    def __init__(
        self, token_indexers: Optional[Dict[str, TokenIndexer]] = None, tag_column: str = "upos",
        label_namespace: str = "labels", **kwargs,
    ) -> None:
        super().__init__(token_indexers, label_namespace, **kwargs)
        if tag_column not in TAG_COLUMNS:
            raise ConfigurationError(
                f"conllu_tagging: tag_column must be one of {sorted(TAG_COLUMNS)}, got {tag_column!r}"
            )
        self.tag_column = tag_column

    def _read(self, file_path) -> Iterator[Instance]:
        path = task_data_path(file_path)
        column = TAG_COLUMNS[self.tag_column]
        sentences = at_least_one(read_conllu_sentences(path), no_instance_error(path, "CoNLL-U sentences"))
        for sentence in self.shard_iterable(sentences):
            yield self.text_to_instance(sentence.words, [row[column] for row in sentence.rows])


@DatasetReader.register("conllu_sentence_genre")
class ConlluSentenceGenreReader(ShardedTaskReader):
    """
    Reads a CoNLL-U file as sentence classification: the label is the genre prefix of the
    ``sent_id`` comment, the text before the first ``-`` (EWT's ``weblog-blogspot.com_...``), with
    the fields allennlp's ``basic_classifier`` takes: ``tokens``, ``label`` and ``metadata``.

    # Parameters

    token_indexers : `Dict[str, TokenIndexer]`, optional (default = `{"tokens": SingleIdTokenIndexer()}`)
        How to index the words.
    label_namespace : `str`, optional (default = `"labels"`)
        Vocabulary namespace of the genre labels (``basic_classifier``'s default).
    **kwargs
        `DatasetReader`'s ``max_instances`` and ``serialization_dir``; the reader shards itself.

    # Raises

    `ConfigurationError` ``path:line: ...`` for a sentence without a ``sent_id`` with a genre prefix.
    """

    def _read(self, file_path) -> Iterator[Instance]:
        path = task_data_path(file_path)
        sentences = at_least_one(self._sent_ids(path), no_instance_error(path, "CoNLL-U sentences"))
        for sentence, genre, sent_id in self.shard_iterable(sentences):
            yield self.text_to_instance(sentence.words, genre, sent_id)

    @staticmethod
    def _sent_ids(path: str) -> Iterator[Tuple[ConlluSentence, str, str]]:
        for sentence in read_conllu_sentences(path):
            sent_id = sentence.comments.get("sent_id")
            if not sent_id:
                raise ConfigurationError(
                    f"{path}:{sentence.start_line}: the sentence has no '# sent_id = ...' "
                    "comment, so it has no genre label"
                )
            genre, dash, _ = sent_id.partition("-")
            if not dash or not genre:
                raise ConfigurationError(
                    f"{path}:{sentence.start_line}: sent_id {sent_id!r} has no genre prefix "
                    "(the text before the first '-')"
                )
            yield sentence, genre, sent_id

    def text_to_instance(  # type: ignore
        self, tokens: Sequence[Union[str, Token]], label: Optional[str] = None, sent_id: Optional[str] = None
    ) -> Instance:
        """``label`` (the genre) is left out when predicting."""
        return super().text_to_instance(tokens, label=label, sent_id=sent_id)
