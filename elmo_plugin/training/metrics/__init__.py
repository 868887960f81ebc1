from elmo_plugin.training.metrics.klue_ner_f1 import KlueNerF1

__all__ = [
    "KlueNerF1",
]
