"""Universal Dependencies (CoNLL-U) tasks: part-of-speech tagging (``conllu_tagging``) and the
sentence's genre (``conllu_sentence_genre``), both read from the same files."""
from elmo_plugin.tasks.universal_dependencies.conllu import (
    ConlluSentenceGenreReader,
    ConlluTaggingReader,
)

__all__ = [
    "ConlluSentenceGenreReader",
    "ConlluTaggingReader",
]
