from elmo_plugin.data.token_indexers.elmo_characters_indexer import ElmoCharactersIndexer

__all__ = [
    "ElmoCharactersIndexer",
]
