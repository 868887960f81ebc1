"""
The ``elmoformanylangs_characters`` token indexer: the ids an ELMoForManyLangs model reads.
"""
from allennlp.data.token_indexers.token_indexer import TokenIndexer

from elmo_plugin.data.elmoformanylangs_character_ids import ElmoForManyLangsCharacterIds
from elmo_plugin.data.token_indexers.elmo_characters_indexer import CharacterRowsIndexer
from elmo_plugin.model_files.elmoformanylangs import ElmoForManyLangsModel


@TokenIndexer.register("elmoformanylangs_characters")
class ElmoForManyLangsCharactersIndexer(CharacterRowsIndexer):
    """
    Converts each token to the row of ids of one ELMoForManyLangs model (HIT-SCIR's ELMo for 44
    languages): its characters as ids of the model's ``char.dic`` (cut to
    ``max_characters_per_token - 2`` characters, framed by the model's word-boundary ids), followed,
    for models with a word embedding (``word_dim > 0``), by the token's id in ``word.dic``. Every
    id is shifted by +1 so that padding tokens are all-zero rows. See
    `elmo_plugin.data.elmoformanylangs_character_ids` for the exact rules (they are its code's).

    Use it where a bilm-tf model would use ``elmo_characters``, with the same model directory as
    the ``elmo_token_embedder``'s ``model``; the output key is the same (``"elmo_tokens"``):

    ```jsonnet
    "token_indexers": {"elmo": {"type": "elmoformanylangs_characters", "model": "ko.model"}}
    ...
    "elmo": {"type": "elmo_token_embedder", "model": "ko.model", "dropout": 0.5}
    ```

    Only the model's ``config.json``, options file and dictionaries are read, not its weights.

    # Parameters

    model : `str`
        The ELMoForManyLangs model directory.
    token_min_padding_length : `int`, optional (default = `0`)
        See `TokenIndexer`.
    """

    def __init__(self, model: str, token_min_padding_length: int = 0) -> None:
        super().__init__(token_min_padding_length)
        self.model = model
        self._character_ids = ElmoForManyLangsCharacterIds.from_model(
            ElmoForManyLangsModel(model, weights=False)
        )
        self.ids_per_token = self.row_width = self._character_ids.ids_per_token
