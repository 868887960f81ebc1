"""Universal Dependencies (CoNLL-U): part-of-speech tags (``conllu_tagging``), genre (``conllu_sentence_genre``)."""
from elmo_plugin.tasks.universal_dependencies.conllu import ConlluSentenceGenreReader, ConlluTaggingReader

__all__ = ["ConlluSentenceGenreReader", "ConlluTaggingReader"]
