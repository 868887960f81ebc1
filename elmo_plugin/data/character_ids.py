"""
The ELMo character ids of bilm-tf and AllenNLP's ``ELMoCharacterMapper``: a token's UTF-8 bytes
framed by begin-of-word and end-of-word ids (256-260 are special) and padded to
``max_characters_per_token`` (a parameter here: the Korean model uses 30), every id +1-shifted so
that 0 means "no token here" (masked; the embedding matrices have 262 rows, row 0 all zeros).
"""
from typing import Callable, Dict, List, Optional, Sequence

import torch

from elmo_plugin.model_files.bilm_tf.options import NUM_TRAINING_CHARACTER_IDS  # noqa: F401 (part of this contract)

BEGINNING_OF_SENTENCE_CHARACTER = 256  # <begin sentence>
END_OF_SENTENCE_CHARACTER = 257  # <end sentence>
BEGINNING_OF_WORD_CHARACTER = 258  # <begin word>
END_OF_WORD_CHARACTER = 259  # <end word>
PADDING_CHARACTER = 260  # <padding>

BOS_TOKEN = "<S>"
EOS_TOKEN = "</S>"

DEFAULT_MAX_CHARACTERS_PER_TOKEN = 50


def _word_ids(characters: Sequence[int], max_characters_per_token: int) -> List[int]:
    """A token's row: begin-of-word, ``characters``, end-of-word, padding, every id +1-shifted."""
    padding = [PADDING_CHARACTER] * (max_characters_per_token - len(characters) - 2)
    return [i + 1 for i in (BEGINNING_OF_WORD_CHARACTER, *characters, END_OF_WORD_CHARACTER, *padding)]


class ElmoCharacterIds:
    """
    Maps tokens to ELMo character ids (already shifted by +1).

    # Parameters

    max_characters_per_token : `int`, optional (default = `50`)
        Length of every token's id row. Tokens longer than ``max_characters_per_token - 2`` bytes
        are cut, which may split a multi-byte UTF-8 character; bilm-tf does the same.
    tokens_to_add : `Dict[str, int]`, optional
        Extra tokens mapped to a single given id (AllenNLP's indexer has the same option).
    """

    def __init__(
        self,
        max_characters_per_token: int = DEFAULT_MAX_CHARACTERS_PER_TOKEN,
        tokens_to_add: Optional[Dict[str, int]] = None,
    ) -> None:
        if max_characters_per_token < 4:
            # BOW + at least one byte + EOW, and the sentence markers need 3 positions.
            raise ValueError(f"max_characters_per_token must be at least 4, got {max_characters_per_token}")
        self.max_characters_per_token = max_characters_per_token
        self.tokens_to_add = dict(tokens_to_add or {})
        self.beginning_of_sentence_ids = _word_ids([BEGINNING_OF_SENTENCE_CHARACTER], max_characters_per_token)
        self.end_of_sentence_ids = _word_ids([END_OF_SENTENCE_CHARACTER], max_characters_per_token)

    def token_to_ids(self, token: str) -> List[int]:
        """The +1-shifted character ids of one token, of length ``max_characters_per_token``."""
        if token in self.tokens_to_add:
            return _word_ids([self.tokens_to_add[token]], self.max_characters_per_token)
        if token == BOS_TOKEN:
            return list(self.beginning_of_sentence_ids)
        if token == EOS_TOKEN:
            return list(self.end_of_sentence_ids)
        # "ignore" drops lone surrogates, which cannot be encoded; this matches AllenNLP.
        encoded = token.encode("utf-8", "ignore")[: self.max_characters_per_token - 2]
        return _word_ids(encoded, self.max_characters_per_token)

    def batch_to_ids(self, batch: Sequence[Sequence[str]]) -> torch.Tensor:
        """The module function `batch_to_ids` (the biLM adds the sentence boundaries)."""
        return rows_to_batch(batch, self.token_to_ids, self.max_characters_per_token)


def batch_to_ids(
    batch: Sequence[Sequence[str]], max_characters_per_token: int = DEFAULT_MAX_CHARACTERS_PER_TOKEN
) -> torch.Tensor:
    """
    AllenNLP's ``batch_to_ids``: the character ids of tokenized sentences, the input of `Elmo`.

    # Parameters

    batch : `Sequence[Sequence[str]]`
        The sentences, each a list of tokens; an empty sentence gives an all-padding row.
    max_characters_per_token : `int`, optional (default = `50`)
        The model's ``max_characters_per_token`` (30 for the Korean course's models).

    # Returns

    `torch.LongTensor`
        ``(batch_size, max_sentence_length, max_characters_per_token)``, padded with 0.
    """
    return ElmoCharacterIds(max_characters_per_token).batch_to_ids(batch)


def rows_to_batch(
    batch: Sequence[Sequence[str]], token_to_ids: Callable[[str], List[int]], row_width: int
) -> torch.Tensor:
    """``(batch_size, max_sentence_length, row_width)``: each token's row, padded with all-zero rows."""
    max_length = max((len(sentence) for sentence in batch), default=0)
    ids = torch.zeros(len(batch), max_length, row_width, dtype=torch.long)
    for row, sentence in enumerate(batch):
        if sentence:
            ids[row, : len(sentence)] = torch.tensor([token_to_ids(token) for token in sentence], dtype=torch.long)
    return ids
