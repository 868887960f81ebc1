"""
What the dataset readers of the ELMo downstream tasks have in common: one instance per sentence,
row or predicate, with a ``tokens`` `TextField` and a ``metadata`` ``{"words": [...], ...}``,
labelled per token (for allennlp-models' taggers) or per instance (for ``basic_classifier``), with
the same sharding and indexing; the readers differ only in how they parse their files.
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
    The ``tokens`` `TextField` (`Token`\\ s used as they are, so a tokenizer's offsets and tags
    survive) and the metadata dict ``{"words": [...]}`` plus ``metadata``, unwrapped for a reader
    that adds to it.
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
    ``path: no {what} in the file{detail}; {hint}``, for a file that gave nothing to train or
    evaluate on, raised on the whole file (one shard's share may be empty), so that an empty or
    wrongly formatted file is named rather than an empty data set noticed later.
    """
    message = f"{path}: no {what} in the file{detail}"
    return ConfigurationError(f"{message}; {hint}" if hint else message)


class ShardedTaskReader(ShardedDatasetReader):
    """
    The base of the task readers (not registered): a subclass implements ``_read``, passing what it
    parsed through `shard_iterable`, and ``text_to_instance``, with `tagging_instance` or
    `classification_instance`.

    # Parameters

    token_indexers : `Dict[str, TokenIndexer]`, optional (default = `{"tokens": SingleIdTokenIndexer()}`)
        How to index the tokens.
    label_namespace : `str`, optional (default = `"labels"`)
        Vocabulary namespace of the labels or tags (the default of the taggers and the classifier).
    **kwargs
        `DatasetReader`'s ``max_instances`` and ``serialization_dir``; the reader always shards itself.
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
        """Fields ``tokens``, ``metadata`` and, unless predicting, ``tags`` (one per token)."""
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
        """Fields ``tokens``, ``metadata`` and, unless predicting, ``label``."""
        text_field, metadata_dict = tokens_and_metadata(tokens, **metadata)
        fields: Dict[str, Field] = {"tokens": text_field, "metadata": MetadataField(metadata_dict)}
        if label is not None:
            fields["label"] = LabelField(label, label_namespace=self.label_namespace)
        return Instance(fields)
