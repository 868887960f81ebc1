from elmo_plugin.data.tokenizers.korean import KiwiTokenizer, MecabKoTokenizer

__all__ = [
    "KiwiTokenizer",
    "MecabKoTokenizer",
]
