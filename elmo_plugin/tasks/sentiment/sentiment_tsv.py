"""
``sentiment_tsv``: text classification from a tab-separated file with a header, such as the
NSMC-style Korean sentiment set (``ko/sentiment/{train,test}.tsv``: ``id``, ``text``, ``label``).
"""
import logging
from typing import Dict, Iterator, List, Optional, Sequence, Tuple, Union

from allennlp.common.checks import ConfigurationError
from allennlp.data.dataset_readers.dataset_reader import DatasetReader
from allennlp.data.instance import Instance
from allennlp.data.token_indexers import TokenIndexer
from allennlp.data.tokenizers import Token, Tokenizer

from elmo_plugin.common.text_files import decoded_lines
from elmo_plugin.korean.tokenizers import MecabKoTokenizer, is_blank
from elmo_plugin.tasks.common.sharded_task_reader import ShardedTaskReader, no_instance_error
from elmo_plugin.tasks.common.task_data import task_data_path

logger = logging.getLogger(__name__)

# (line number, id or None, text, label) of one data row.
Row = Tuple[int, Optional[str], str, str]


@DatasetReader.register("sentiment_tsv")
class SentimentTsvReader(ShardedTaskReader):
    """
    Reads a TSV file with a header (split on TAB, no quoting), one instance per row, with
    ``basic_classifier``'s fields: ``tokens``, ``label`` and ``metadata`` (``{"words", "id"}``).
    Rows whose text gives no token and empty lines are skipped and counted.

    # Parameters

    tokenizer : `Tokenizer`, optional (default = `MecabKoTokenizer()`, i.e. ``{"type": "korean"}``)
        Splits the text into tokens (``korean``, ``kiwi``, or any AllenNLP tokenizer).
    token_indexers : `Dict[str, TokenIndexer]`, optional (default = `{"tokens": SingleIdTokenIndexer()}`)
        How to index the tokens.
    text_column : `str`, optional (default = `"text"`)
        The header name of the text column.
    label_column : `str`, optional (default = `"label"`)
        The header name of the label column. An empty label is an error.
    id_column : `Optional[str]`, optional (default = `"id"`)
        The header name of the column that goes into the metadata as ``"id"`` (`None` without it).
    max_tokens : `Optional[int]`, optional (default = `None`)
        Keep at most this many tokens of each text; the texts cut are counted.
    label_namespace : `str`, optional (default = `"labels"`)
        Vocabulary namespace of the labels (``basic_classifier``'s default).
    **kwargs
        `DatasetReader`'s ``max_instances`` and ``serialization_dir``; the reader shards itself.

    # Raises

    `ConfigurationError` ``path:line: ...`` for a header without the columns (or with one twice),
    a row of another width, and an empty label; ``path: ...`` for no header or no instance.
    """

    def __init__(
        self, tokenizer: Optional[Tokenizer] = None, token_indexers: Optional[Dict[str, TokenIndexer]] = None,
        text_column: str = "text", label_column: str = "label", id_column: Optional[str] = "id",
        max_tokens: Optional[int] = None, label_namespace: str = "labels", **kwargs,
    ) -> None:
        super().__init__(token_indexers, label_namespace, **kwargs)
        if max_tokens is not None and max_tokens < 1:
            raise ConfigurationError(f"sentiment_tsv: max_tokens must be at least 1 (or null), got {max_tokens}")
        if text_column == label_column:
            raise ConfigurationError(f"sentiment_tsv: text_column and label_column are both {text_column!r}")
        self._tokenizer = tokenizer or MecabKoTokenizer()
        self.text_column = text_column
        self.label_column = label_column
        self.id_column = id_column
        self.max_tokens = max_tokens

    def _read(self, file_path) -> Iterator[Instance]:
        path = task_data_path(file_path)
        instances = skipped = truncated = 0  # skipped: rows whose text gives no token
        first_skipped: Optional[int] = None
        # Rows are checked before sharding (every shard checks the whole file), tokenized after.
        for line_number, row_id, text, label in self.shard_iterable(self._rows(path)):
            tokens = self._tokenizer.tokenize(text)
            if not tokens:
                skipped += 1
                first_skipped = first_skipped or line_number
                continue
            if self.max_tokens is not None and len(tokens) > self.max_tokens:
                truncated += 1
            instances += 1
            yield self.text_to_instance(tokens[: self.max_tokens], label, row_id)
        _, shards = self.shard()
        where = f" (one of {shards} shards)" if shards > 1 else ""
        if instances == 0:
            # A shard may get no row of a small file; `_rows` has checked the file has a non-blank text.
            if shards == 1:
                detail = f": every text gives no token ({skipped} row(s) skipped)"
                raise no_instance_error(path, "instance", detail, hint=None)
            logger.warning("sentiment_tsv: no instance from %s%s", path, where)
        logger.info(
            "sentiment_tsv: read %d instance(s) from %s%s; skipped %d row(s) whose text gives "
            "no token%s; cut %d text(s) to max_tokens=%s", instances, path, where, skipped,
            f" (first at line {first_skipped})" if first_skipped else "", truncated, self.max_tokens,
        )

    def _rows(self, path: str) -> Iterator[Row]:
        """The checked data rows ``(line_number, id, text, label)``; raises for a bad header or row,
        and at the end for a file without any row whose text is not blank."""
        lines = decoded_lines(path)
        first = next(lines, None)
        if first is None:
            raise ConfigurationError(f"{path}: empty file, no header and no instance")
        # Only the line break goes: a trailing TAB is an (empty) last field.
        header = [name.strip() for name in first[1].rstrip("\r\n").split("\t")]
        text_index, label_index, id_index = self._column_indices(path, header)
        rows = non_blank_texts = empty_lines = 0
        for line_index, raw, _ in lines:
            line = raw.rstrip("\r\n")
            if not line:
                empty_lines += 1
                continue
            fields = line.split("\t")
            if len(fields) != len(header):
                raise ConfigurationError(
                    f"{path}:{line_index + 1}: {len(fields)} tab-separated field(s), but the "
                    f"header names {len(header)} ({', '.join(header)}): {line[:80]!r}"
                )
            label = fields[label_index].strip()
            if not label:
                raise ConfigurationError(f"{path}:{line_index + 1}: empty label (column {self.label_column!r})")
            rows += 1
            non_blank_texts += not is_blank(fields[text_index])
            yield line_index + 1, (fields[id_index] if id_index is not None else None), fields[text_index], label
        if non_blank_texts == 0:
            detail = f": {rows} row(s)" + (", every text blank" if rows else "")
            detail += f", {empty_lines} empty line(s)" if empty_lines else ""
            raise no_instance_error(path, "instance", detail, hint=None)
        if empty_lines:
            logger.info("sentiment_tsv: skipped %d empty line(s) in %s", empty_lines, path)

    def _column_indices(self, path: str, header: List[str]) -> Tuple[int, int, Optional[int]]:
        duplicates = sorted({name for name in header if header.count(name) > 1})
        if duplicates:
            raise ConfigurationError(
                f"{path}:1: the header names the column(s) {', '.join(map(repr, duplicates))} more than once"
            )
        for column in (self.text_column, self.label_column):
            if column not in header:
                raise ConfigurationError(
                    f"{path}:1: no column {column!r} in the header (columns: "
                    f"{', '.join(map(repr, header))}); is this a TSV file with a header line?"
                )
        id_index = header.index(self.id_column) if self.id_column in header else None
        return header.index(self.text_column), header.index(self.label_column), id_index

    def text_to_instance(  # type: ignore
        self, text: Union[str, Sequence[Union[str, Token]]], label: Optional[str] = None,
        instance_id: Optional[str] = None,
    ) -> Instance:
        """``text`` is the raw text (tokenized here, cut to ``max_tokens``) or its tokens (used as
        they are); ``label`` is left out when predicting."""
        tokens = self._tokenizer.tokenize(text)[: self.max_tokens] if isinstance(text, str) else text
        return super().text_to_instance(tokens, label=label, id=instance_id)
