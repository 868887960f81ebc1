from elmo_plugin.modules.bilm import ElmoBiLm
from elmo_plugin.modules.elmo import Elmo
from elmo_plugin.modules.elmo_at_output import (
    ElmoAtOutputSeq2Seq,
    ElmoAtOutputSeq2Vec,
    ElmoInputOutputEmbedder,
)
from elmo_plugin.modules.scalar_mix import ScalarMix, SingleLayerMix

__all__ = [
    "ElmoBiLm",
    "Elmo",
    "ElmoAtOutputSeq2Seq",
    "ElmoAtOutputSeq2Vec",
    "ElmoInputOutputEmbedder",
    "ScalarMix",
    "SingleLayerMix",
]
