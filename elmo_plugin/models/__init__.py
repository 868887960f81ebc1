from elmo_plugin.models.elmo_language_model import ElmoLanguageModel
from elmo_plugin.models.language_model_scorer import LanguageModelScorer

__all__ = [
    "ElmoLanguageModel",
    "LanguageModelScorer",
]
