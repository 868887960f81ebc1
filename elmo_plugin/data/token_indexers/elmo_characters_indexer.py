"""The ``elmo_characters`` token indexer, with a configurable ``max_characters_per_token``."""
import logging
from typing import Any, Dict, List, Optional

import torch
from allennlp.common.util import pad_sequence_to_length
from allennlp.data.token_indexers.token_indexer import IndexedTokenList, TokenIndexer
from allennlp.data.tokenizers import Token
from allennlp.data.vocabulary import Vocabulary

from elmo_plugin.common.registration import replace_registration
from elmo_plugin.data.character_ids import DEFAULT_MAX_CHARACTERS_PER_TOKEN, ElmoCharacterIds

logger = logging.getLogger(__name__)
_replacement_logged = False


class CharacterRowsIndexer(TokenIndexer):
    """What the ELMo indexers share (not registered): each token becomes one row of ``row_width`` ids
    (``self._character_ids.token_to_ids``) under ``"elmo_tokens"``; no vocabulary is used."""

    _character_ids: Any  # has token_to_ids(str) -> List[int]
    row_width: int

    def count_vocab_items(self, token: Token, counter: Dict[str, Dict[str, int]]) -> None:
        pass

    def get_empty_token_list(self) -> IndexedTokenList:
        return {"elmo_tokens": []}

    def tokens_to_indices(self, tokens: List[Token], vocabulary: Vocabulary) -> Dict[str, List[List[int]]]:
        return {"elmo_tokens": [self._character_ids.token_to_ids(t.ensure_text()) for t in tokens]}

    def as_padded_tensor_dict(
        self, tokens: IndexedTokenList, padding_lengths: Dict[str, int]
    ) -> Dict[str, torch.Tensor]:
        # Padding tokens are all-zero rows (the mask id), not the default scalar 0.
        width = self.row_width
        rows = pad_sequence_to_length(tokens["elmo_tokens"], padding_lengths["elmo_tokens"], lambda: [0] * width)
        return {"elmo_tokens": torch.LongTensor(rows)}


@replace_registration(TokenIndexer, "elmo_characters")
class ElmoCharactersIndexer(CharacterRowsIndexer):
    """
    Converts each token to its row of ELMo character ids (`elmo_plugin.data.character_ids`).
    Registered as ``"elmo_characters"``, **replacing AllenNLP's own ``ELMoTokenCharactersIndexer``**
    (which hard-codes 50 characters per token): the same ids, key and parameters, and
    ``max_characters_per_token``.

    # Parameters

    namespace : `str`, optional (default = `"elmo_characters"`)
        Kept for compatibility; this indexer needs no vocabulary.
    tokens_to_add : `Dict[str, int]`, optional (default = `None`)
        Special tokens mapped to one character id each (an id below 261 that text does not give).
    token_min_padding_length : `int`, optional (default = `0`)
        See `TokenIndexer`.
    max_characters_per_token : `int`, optional (default = `50`)
        Must equal the biLM's ``char_cnn.max_characters_per_token`` (30 for the Korean model).
    """

    def __init__(
        self,
        namespace: str = "elmo_characters",
        tokens_to_add: Optional[Dict[str, int]] = None,
        token_min_padding_length: int = 0,
        max_characters_per_token: int = DEFAULT_MAX_CHARACTERS_PER_TOKEN,
    ) -> None:
        super().__init__(token_min_padding_length)
        global _replacement_logged
        if not _replacement_logged:
            logger.info(
                "elmo_plugin: 'elmo_characters' is elmo_plugin's indexer (replacing AllenNLP's), "
                "max_characters_per_token=%d", max_characters_per_token,
            )
            _replacement_logged = True
        self._namespace = namespace
        self._character_ids = ElmoCharacterIds(max_characters_per_token, tokens_to_add)
        self.max_characters_per_token = max_characters_per_token
        self.row_width = max_characters_per_token
