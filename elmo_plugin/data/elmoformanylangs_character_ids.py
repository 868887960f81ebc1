"""
The token ids of ELMoForManyLangs models (``elmoformanylangs``' ``frontend.create_one_batch``):
ids of the model's ``char.dic`` rather than UTF-8 bytes, the word-boundary ids swapped as its code
does, and, for a model with a word embedding, the ``word.dic`` id as one more column
(docs/elmoformanylangs.md). Every id is +1-shifted (0: masked).
"""
from typing import Dict, List, Optional, Sequence

import torch

from elmo_plugin.data.character_ids import rows_to_batch
from elmo_plugin.model_files.elmoformanylangs import (
    BOS_TOKEN,
    BOW_CHARACTER,
    EOS_TOKEN,
    EOW_CHARACTER,
    OOV_TOKEN,
    PAD_TOKEN,
    REQUIRED_CHARACTERS,
    REQUIRED_WORDS,
    ElmoForManyLangsModel,
)


class ElmoForManyLangsCharacterIds:
    """
    Maps tokens to the (+1-shifted) id rows of one ELMoForManyLangs model, with the interface of
    `elmo_plugin.data.character_ids.ElmoCharacterIds`.

    # Parameters

    char_to_id : `Dict[str, int]`
        ``char.dic``: character (or special entry) -> id, as the model's code reads it.
    max_characters_per_token : `int`
        The options' ``token_embedder.max_characters_per_token`` (50 in the released models).
    word_to_id : `Dict[str, int]`, optional
        ``word.dic``, for a model with a word embedding; then every row ends with the word id.
    """

    def __init__(
        self, char_to_id: Dict[str, int], max_characters_per_token: int, word_to_id: Optional[Dict[str, int]] = None
    ) -> None:
        dictionaries = (("character", char_to_id, REQUIRED_CHARACTERS), ("word", word_to_id, REQUIRED_WORDS))
        for kind, dictionary, required in dictionaries:
            missing = [key for key in required if dictionary is not None and key not in dictionary]
            if missing:
                raise ValueError(f"the {kind} dictionary lacks {', '.join(missing)}")
        if max_characters_per_token < 3:
            raise ValueError(f"max_characters_per_token must be at least 3, got {max_characters_per_token}")
        self.char_to_id = char_to_id
        self.word_to_id = word_to_id
        self.max_characters_per_token = max_characters_per_token
        # The swap of its create_one_batch (see the module documentation).
        self._begin = char_to_id[EOW_CHARACTER] + 1
        self._end = char_to_id[BOW_CHARACTER] + 1
        self._unknown = char_to_id[OOV_TOKEN]
        self.padding_id = char_to_id[PAD_TOKEN] + 1
        self.beginning_of_sentence_ids = self.token_to_ids(BOS_TOKEN)
        self.end_of_sentence_ids = self.token_to_ids(EOS_TOKEN)

    @property
    def ids_per_token(self) -> int:
        """Length of a token's row: the characters, plus the word id if the model reads one."""
        return self.max_characters_per_token + (self.word_to_id is not None)

    def token_to_ids(self, token: str) -> List[int]:
        """The +1-shifted id row of one token, of length `ids_per_token`."""
        token = token[: self.max_characters_per_token - 2]
        if token in (BOS_TOKEN, EOS_TOKEN):
            characters = [self.char_to_id[token] + 1]
        else:
            characters = [self.char_to_id.get(character, self._unknown) + 1 for character in token]
        padding = [self.padding_id] * (self.max_characters_per_token - len(characters) - 2)
        ids = [self._begin, *characters, self._end, *padding]
        if self.word_to_id is not None:
            ids.append(self.word_to_id.get(token, self.word_to_id[OOV_TOKEN]) + 1)
        return ids

    def batch_to_ids(self, batch: Sequence[Sequence[str]]) -> torch.Tensor:
        """``(batch_size, max_sentence_length, ids_per_token)``, padded with 0 (no sentence markers)."""
        return rows_to_batch(batch, self.token_to_ids, self.ids_per_token)

    @classmethod
    def from_model(cls, model: ElmoForManyLangsModel) -> "ElmoForManyLangsCharacterIds":
        """The ids of a model directory read by `ElmoForManyLangsModel` (its dictionaries)."""
        return cls(model.char_to_id, model.options.max_characters_per_token, model.word_to_id)

    def __eq__(self, other) -> bool:
        if isinstance(other, ElmoForManyLangsCharacterIds):
            return self.__dict__ == other.__dict__
        return NotImplemented
