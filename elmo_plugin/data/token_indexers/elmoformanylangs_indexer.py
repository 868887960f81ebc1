"""The ``elmoformanylangs_characters`` token indexer: the ids an ELMoForManyLangs model reads."""
from allennlp.data.token_indexers.token_indexer import TokenIndexer

from elmo_plugin.data.elmoformanylangs_character_ids import ElmoForManyLangsCharacterIds
from elmo_plugin.data.token_indexers.elmo_characters_indexer import CharacterRowsIndexer
from elmo_plugin.model_files.elmoformanylangs import ElmoForManyLangsModel


@TokenIndexer.register("elmoformanylangs_characters")
class ElmoForManyLangsCharactersIndexer(CharacterRowsIndexer):
    """
    Converts each token to the row of ids of one ELMoForManyLangs model (only its dictionaries and
    options are read) under ``"elmo_tokens"``: ``elmo_characters`` of such a model, with the
    ``elmo_token_embedder``'s ``model`` directory (docs/elmoformanylangs.md).

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
