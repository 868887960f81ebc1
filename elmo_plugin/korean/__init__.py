"""Korean preprocessing: the morpheme tokenizers and the corpus tokenization of ``allennlp elmo-tokenize``."""
from elmo_plugin.korean.tokenizers import KiwiTokenizer, MecabKoTokenizer

__all__ = ["KiwiTokenizer", "MecabKoTokenizer"]
