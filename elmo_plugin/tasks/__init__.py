"""
The downstream tasks that BENCHMARKS.md measures ELMo on, each with its reader (and, where
AllenNLP has none that fits, its model and metric) together, as allennlp-models groups a task.
Nothing here is needed to use ELMo itself. The package is the plugin's second line
(``.allennlp_plugins``, the start-up hook): importing it registers the readers, models and
metrics by name, and it needs allennlp-models (``pip install elmo_plugin[tasks]``).
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
