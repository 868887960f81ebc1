from elmo_plugin.data.dataset_readers.bilm_corpus import BilmCorpusReader
from elmo_plugin.data.dataset_readers.klue_ner import KlueNerReader
from elmo_plugin.data.dataset_readers.conllu import ConlluSentenceGenreReader, ConlluTaggingReader
from elmo_plugin.data.dataset_readers.sentiment_tsv import SentimentTsvReader
from elmo_plugin.data.dataset_readers.token_tag_conll import TokenTagConllReader
from elmo_plugin.data.dataset_readers.universal_propbank_srl import UniversalPropBankSrlReader

__all__ = [
    "BilmCorpusReader",
    "ConlluSentenceGenreReader",
    "ConlluTaggingReader",
    "KlueNerReader",
    "SentimentTsvReader",
    "TokenTagConllReader",
    "UniversalPropBankSrlReader",
]
