from elmo_plugin.models.elmo_language_model import ElmoLanguageModel

__all__ = [
    "ElmoLanguageModel",
]
