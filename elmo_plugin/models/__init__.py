from elmo_plugin.models.character_span_crf_tagger import CharacterSpanCrfTagger
from elmo_plugin.models.elmo_bilm import ElmoLanguageModel

__all__ = [
    "CharacterSpanCrfTagger",
    "ElmoLanguageModel",
]
