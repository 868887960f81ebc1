from elmo_plugin.data.dataset_readers.bilm_corpus import BilmCorpusReader

__all__ = ["BilmCorpusReader"]
