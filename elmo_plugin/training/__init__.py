from elmo_plugin.training.callbacks import CheckTrainingSettingsCallback, KeepFreedMemoryCallback
from elmo_plugin.training.learning_rate_schedulers import ReduceOnPlateauLearningRateScheduler

__all__ = [
    "CheckTrainingSettingsCallback",
    "KeepFreedMemoryCallback",
    "ReduceOnPlateauLearningRateScheduler",
]
