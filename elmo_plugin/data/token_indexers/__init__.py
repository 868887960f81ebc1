from elmo_plugin.data.token_indexers.elmo_characters_indexer import ElmoCharactersIndexer
from elmo_plugin.data.token_indexers.elmoformanylangs_indexer import ElmoForManyLangsCharactersIndexer

__all__ = ["ElmoCharactersIndexer", "ElmoForManyLangsCharactersIndexer"]
