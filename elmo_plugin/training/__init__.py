from elmo_plugin.training.callbacks import KeepFreedMemoryCallback
from elmo_plugin.training.metrics import KlueNerF1
from elmo_plugin.training.learning_rate_schedulers import ReduceOnPlateauLearningRateScheduler

__all__ = [
    "KeepFreedMemoryCallback",
    "KlueNerF1",
    "ReduceOnPlateauLearningRateScheduler",
]
