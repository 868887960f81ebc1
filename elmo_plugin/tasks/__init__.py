"""
The downstream tasks that BENCHMARKS.md measures ELMo on, each with its reader (and model and
metric where AllenNLP has none that fits). Importing it, the plugin's second line, registers them;
it needs allennlp-models (``pip install elmo_plugin[tasks]``); ELMo itself does not need it.
"""
from elmo_plugin.tasks.klue_ner import CharacterSpanCrfTagger, KlueNerF1, KlueNerReader
from elmo_plugin.tasks.sentiment import SentimentTsvReader
from elmo_plugin.tasks.srl import UniversalPropBankSrlReader
from elmo_plugin.tasks.tagging import TokenTagConllReader
from elmo_plugin.tasks.universal_dependencies import ConlluSentenceGenreReader, ConlluTaggingReader

__all__ = [
    "CharacterSpanCrfTagger", "ConlluSentenceGenreReader", "ConlluTaggingReader", "KlueNerF1", "KlueNerReader",
    "SentimentTsvReader", "TokenTagConllReader", "UniversalPropBankSrlReader",
]
