"""KLUE-NER, Korean named entities: reader ``klue_ner``, model ``character_span_crf_tagger``, metric ``klue_ner_f1``."""
from elmo_plugin.tasks.klue_ner.dataset_reader import KlueNerReader
from elmo_plugin.tasks.klue_ner.metric import KlueNerF1
from elmo_plugin.tasks.klue_ner.model import CharacterSpanCrfTagger

__all__ = ["CharacterSpanCrfTagger", "KlueNerF1", "KlueNerReader"]
