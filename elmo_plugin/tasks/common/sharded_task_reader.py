"""
What the dataset readers of the downstream tasks share: one instance per sentence, row or
predicate, with a ``tokens`` `TextField`, a ``metadata`` ``{"words": [...], ...}`` and per-token
``tags`` or one ``label``, sharded and indexed alike; they differ in how they parse their files.
"""
from typing import Any, Dict, Iterable, Iterator, List, Optional, Sequence, Tuple, TypeVar, Union

from allennlp.common.checks import ConfigurationError
from allennlp.data.fields import Field, LabelField, MetadataField, SequenceLabelField, TextField
from allennlp.data.instance import Instance
from allennlp.data.token_indexers import SingleIdTokenIndexer, TokenIndexer
from allennlp.data.tokenizers import Token

from elmo_plugin.data.dataset_readers.sharded_reader import ShardedDatasetReader

T = TypeVar("T")


def tokens_and_metadata(tokens: Sequence[Union[str, Token]], **metadata: Any) -> Tuple[TextField, Dict[str, Any]]:
    """The ``tokens`` `TextField` (`Token`\\ s kept as they are) and ``{"words": [...], **metadata}``."""
    text_field = TextField([token if isinstance(token, Token) else Token(token) for token in tokens])
    return text_field, {"words": [token.text for token in text_field.tokens], **metadata}


def no_instance_error(
    path: str, what: str, detail: str = "", hint: Optional[str] = "is it empty or in another format?"
) -> ConfigurationError:
    """
    ``path: no {what} in the file{detail}; {hint}``, raised on the whole file (one shard's share
    may be empty), so that an empty or wrongly formatted file is named, not noticed later.
    """
    message = f"{path}: no {what} in the file{detail}"
    return ConfigurationError(f"{message}; {hint}" if hint else message)


def at_least_one(items: Iterable[T], error: Exception) -> Iterator[T]:
    """``items``, then ``error`` raised if there were none (a `no_instance_error`)."""
    empty = True
    for item in items:
        empty = False
        yield item
    if empty:
        raise error


class ShardedTaskReader(ShardedDatasetReader):
    """
    The base of the task readers (not registered): a subclass implements ``_read``, passing what it
    parsed through `shard_iterable`; its ``text_to_instance``, if it has one, ends in this one's.

    # Parameters

    token_indexers : `Dict[str, TokenIndexer]`, optional (default = `{"tokens": SingleIdTokenIndexer()}`)
        How to index the tokens.
    label_namespace : `str`, optional (default = `"labels"`)
        Vocabulary namespace of the labels or tags (the default of the taggers and the classifier).
    **kwargs
        `DatasetReader`'s ``max_instances`` and ``serialization_dir``; the reader always shards itself.
    """

    def __init__(
        self, token_indexers: Optional[Dict[str, TokenIndexer]] = None, label_namespace: str = "labels", **kwargs
    ) -> None:
        # Sharding is cheap and exact: every shard parses and checks the whole file, keeping every n-th instance.
        super().__init__(**kwargs)
        self._token_indexers = token_indexers or {"tokens": SingleIdTokenIndexer()}
        self.label_namespace = label_namespace

    def apply_token_indexers(self, instance: Instance) -> None:
        # Not in `text_to_instance`: AllenNLP refuses instances made with indexers in data-loader
        # workers (``num_workers`` > 0); the data loader sets them in the main process.
        instance["tokens"].token_indexers = self._token_indexers  # type: ignore

    def text_to_instance(  # type: ignore
        self, tokens: Sequence[Union[str, Token]], tags: Optional[List[str]] = None, label: Optional[str] = None,
        **metadata: Any,
    ) -> Instance:
        """
        Fields ``tokens`` (strings or `Token`\\ s), ``metadata`` and, unless predicting, ``tags``
        (one per token) or ``label``.
        """
        text_field, metadata_dict = tokens_and_metadata(tokens, **metadata)
        fields: Dict[str, Field] = {"tokens": text_field, "metadata": MetadataField(metadata_dict)}
        if tags is not None:
            fields["tags"] = SequenceLabelField(tags, text_field, self.label_namespace)
        if label is not None:
            fields["label"] = LabelField(label, label_namespace=self.label_namespace)
        return Instance(fields)
