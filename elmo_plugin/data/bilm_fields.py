"""
The contract between the ``bilm_corpus`` reader and the ``elmo_bilm`` model: the instance fields
(``forward``'s parameters, which a test checks), their token indexers and tensors.
"""
from typing import Dict

import torch

# Sentences mode: one field per instance, the sentence.
SENTENCE_FIELD = "tokens"
SENTENCE_FIELDS = (SENTENCE_FIELD,)

# Stream mode (bilm-tf's packing): each direction's input window and its next-token targets.
FORWARD_TOKENS_FIELD = "forward_tokens"
FORWARD_TARGETS_FIELD = "forward_targets"
BACKWARD_TOKENS_FIELD = "backward_tokens"
BACKWARD_TARGETS_FIELD = "backward_targets"
STREAM_FIELDS = (FORWARD_TOKENS_FIELD, FORWARD_TARGETS_FIELD, BACKWARD_TOKENS_FIELD, BACKWARD_TARGETS_FIELD)

# The indexers inside the token fields, and the key of the tensor each produces.
CHARACTERS_INDEXER = "elmo_characters"  # `ElmoCharactersIndexer`
CHARACTERS_TENSOR = "elmo_tokens"
TARGETS_INDEXER = "lm_targets"  # `SingleIdTokenIndexer` on the language model's namespace
TARGETS_TENSOR = "tokens"


def character_ids(field: Dict[str, Dict[str, torch.Tensor]]) -> torch.Tensor:
    """The ``(batch, time, max_characters_per_token)`` character ids of a batched token field."""
    return field[CHARACTERS_INDEXER][CHARACTERS_TENSOR]


def target_ids(field: Dict[str, Dict[str, torch.Tensor]]) -> torch.Tensor:
    """The ``(batch, time)`` vocabulary ids of a batched token field."""
    return field[TARGETS_INDEXER][TARGETS_TENSOR]
