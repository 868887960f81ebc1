from elmo_plugin.training.callbacks import CheckTrainingSettingsCallback, KeepFreedMemoryCallback
from elmo_plugin.training.checkpointer import MultiNodeCheckpointer
from elmo_plugin.training.corpus_schedule import CountBatchesPerEpochCallback, LinearDecayOverCorpus
from elmo_plugin.training.learning_rate_schedulers import ReduceOnPlateauLearningRateScheduler
from elmo_plugin.training.optimizers import DenseSparseAdagrad
from elmo_plugin.training.trainer import DeviceCheckingGradientDescentTrainer

__all__ = [
    "CheckTrainingSettingsCallback",
    "CountBatchesPerEpochCallback",
    "DenseSparseAdagrad",
    "LinearDecayOverCorpus",
    "MultiNodeCheckpointer",
    "KeepFreedMemoryCallback",
    "DeviceCheckingGradientDescentTrainer",
    "ReduceOnPlateauLearningRateScheduler",
]
