from elmo_plugin.modules.bilm import ElmoBiLm
from elmo_plugin.modules.elmo import Elmo
from elmo_plugin.modules.scalar_mix import ScalarMix, SingleLayerMix

__all__ = [
    "ElmoBiLm",
    "Elmo",
    "ScalarMix",
    "SingleLayerMix",
]
