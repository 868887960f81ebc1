"""
What the dataset readers of the ELMo downstream tasks have in common: ``token_tag_conll``,
``conllu_tagging``, ``conllu_sentence_genre``, ``sentiment_tsv`` and ``universal_propbank_srl``.

They all make one instance per sentence, row or predicate, with the words in a ``tokens``
`TextField` and a ``metadata`` `MetadataField` ``{"words": [...], ...}``, labelled either per
token (a `SequenceLabelField`, for allennlp-models' taggers) or per instance (a `LabelField`,
for allennlp's ``basic_classifier``). `ShardedTaskReader` holds that shared part, so that the
readers differ only in how they parse their files, and every task gives its models the same
fields with the same sharding and indexing.
"""
from typing import Any, Dict, List, Optional, Sequence, Tuple, Union

from allennlp.common.checks import ConfigurationError
from allennlp.data.fields import Field, LabelField, MetadataField, SequenceLabelField, TextField
from allennlp.data.instance import Instance
from allennlp.data.token_indexers import SingleIdTokenIndexer, TokenIndexer
from allennlp.data.tokenizers import Token

from elmo_plugin.data.dataset_readers.sharded_reader import ShardedDatasetReader


def tokens_and_metadata(
    tokens: Sequence[Union[str, Token]], **metadata: Any
) -> Tuple[TextField, Dict[str, Any]]:
    """
    The ``tokens`` `TextField` (strings become `Token`\\ s; `Token`\\ s are used as they are,
    so a tokenizer's offsets and tags survive) and the metadata dict ``{"words": [...]}`` plus
    ``metadata``. The dict is returned unwrapped, for a reader that adds to it (the SRL reader
    adds the gold tags only when it has them).
    """
    text_field = TextField(
        [token if isinstance(token, Token) else Token(token) for token in tokens]
    )
    return text_field, {"words": [token.text for token in text_field.tokens], **metadata}


def no_instance_error(
    path: str,
    what: str,
    detail: str = "",
    hint: Optional[str] = "is it empty or in another format?",
) -> ConfigurationError:
    """
    The error for a file that gave nothing to train or evaluate on,
    ``path: no {what} in the file{detail}; {hint}`` (without ``; {hint}`` for ``hint=None``).
    Raised on the file as a whole (not on one shard's share of it, which may be empty): an
    empty or wrongly formatted file would otherwise give an empty data set, noticed later, if
    at all, by an error that does not name the file.
    """
    message = f"{path}: no {what} in the file{detail}"
    return ConfigurationError(f"{message}; {hint}" if hint else message)


class ShardedTaskReader(ShardedDatasetReader):
    """
    The base of the task readers (not registered itself): the ``token_indexers``, the
    ``label_namespace`` of the labels, sharding always on, `apply_token_indexers`, and the
    tagging and classification instances.

    A subclass implements ``_read``, passing what it parsed through `shard_iterable`, and
    ``text_to_instance``, usually with `tagging_instance` or `classification_instance`.

    # Parameters

    token_indexers : `Dict[str, TokenIndexer]`, optional (default = `{"tokens": SingleIdTokenIndexer()}`)
        How to index the tokens.
    label_namespace : `str`, optional (default = `"labels"`)
        Vocabulary namespace of the labels or tags (the default of allennlp's
        ``basic_classifier`` and allennlp-models' taggers).
    **kwargs
        `DatasetReader`'s ``max_instances`` and ``serialization_dir`` (see
        `ShardedDatasetReader`: the reader always shards itself).
    """

    def __init__(
        self,
        token_indexers: Optional[Dict[str, TokenIndexer]] = None,
        label_namespace: str = "labels",
        **kwargs,
    ) -> None:
        # Sharding by sentence (row, predicate) is cheap and exact: every shard parses and
        # checks the whole file and keeps every n-th instance (`shard_iterable`).
        super().__init__(**kwargs)
        self._token_indexers = token_indexers or {"tokens": SingleIdTokenIndexer()}
        self.label_namespace = label_namespace

    def apply_token_indexers(self, instance: Instance) -> None:
        # The data loader sets the indexers in the main process; `text_to_instance` leaves them
        # out, since instances made in data-loader workers must not carry them (AllenNLP
        # refuses such instances with ``num_workers`` > 0).
        instance["tokens"].token_indexers = self._token_indexers  # type: ignore

    def tagging_instance(
        self,
        tokens: Sequence[Union[str, Token]],
        tags: Optional[List[str]],
        **metadata: Any,
    ) -> Instance:
        """
        Fields ``tokens``, ``metadata`` (``{"words": [...]}`` plus ``metadata``) and, unless
        ``tags`` is `None` (predicting), ``tags``: one tag per token in ``label_namespace``,
        what allennlp-models' ``crf_tagger`` and ``simple_tagger`` take.
        """
        text_field, metadata_dict = tokens_and_metadata(tokens, **metadata)
        fields: Dict[str, Field] = {"tokens": text_field, "metadata": MetadataField(metadata_dict)}
        if tags is not None:
            fields["tags"] = SequenceLabelField(tags, text_field, self.label_namespace)
        return Instance(fields)

    def classification_instance(
        self,
        tokens: Sequence[Union[str, Token]],
        label: Optional[str],
        **metadata: Any,
    ) -> Instance:
        """
        Fields ``tokens``, ``metadata`` (``{"words": [...]}`` plus ``metadata``) and, unless
        ``label`` is `None` (predicting), ``label`` in ``label_namespace``: what allennlp's
        ``basic_classifier`` takes.
        """
        text_field, metadata_dict = tokens_and_metadata(tokens, **metadata)
        fields: Dict[str, Field] = {"tokens": text_field, "metadata": MetadataField(metadata_dict)}
        if label is not None:
            fields["label"] = LabelField(label, label_namespace=self.label_namespace)
        return Instance(fields)
