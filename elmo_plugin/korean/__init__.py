"""Korean preprocessing: the morpheme tokenizers (``mecab_ko``/``korean``, ``kiwi``) and the
resumable corpus tokenization behind ``allennlp elmo-tokenize``."""
from elmo_plugin.korean.tokenizers import KiwiTokenizer, MecabKoTokenizer

__all__ = ["KiwiTokenizer", "MecabKoTokenizer"]
