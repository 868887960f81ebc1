"""Semantic role labelling on Universal PropBank: reader ``universal_propbank_srl``."""
from elmo_plugin.tasks.srl.universal_propbank_srl import UniversalPropBankSrlReader

__all__ = ["UniversalPropBankSrlReader"]
