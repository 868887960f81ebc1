"""Trainer callbacks of the plugin."""
import logging
from typing import Any

import torch
from allennlp.common.checks import ConfigurationError
from allennlp.training.callbacks.callback import TrainerCallback
from allennlp.training.optimizers import DenseSparseAdam

from elmo_plugin.common.memory import keep_freed_memory_for_reuse
from elmo_plugin.modules.sampled_softmax_loss import SampledSoftmaxLoss

logger = logging.getLogger(__name__)


@TrainerCallback.register("keep_freed_memory")
class KeepFreedMemoryCallback(TrainerCallback):
    """Applies `keep_freed_memory_for_reuse` when training starts (docs/pretraining.md)."""

    def on_start(self, trainer: Any, is_primary: bool = True, **kwargs: Any) -> None:
        if keep_freed_memory_for_reuse():
            logger.info("glibc keeps freed memory for reuse during training")


@TrainerCallback.register("check_training_settings")
class CheckTrainingSettingsCallback(TrainerCallback):
    """
    Checks the trainer's settings before the first batch, which AllenNLP's ``-o`` overrides
    bypass in the configs' own checks: ``trainer.num_epochs`` (0 would end in AllenNLP's
    "best.th does not exist"), and sparse softmax gradients with an optimizer that cannot take
    them. Raises `ConfigurationError` naming the setting.
    """

    def on_start(self, trainer: Any, is_primary: bool = True, **kwargs: Any) -> None:
        num_epochs = getattr(trainer, "_num_epochs", None)
        if num_epochs is None:  # another kind of trainer: nothing known to check
            return
        if isinstance(num_epochs, bool) or not isinstance(num_epochs, int) or num_epochs < 1:
            raise ConfigurationError(
                f"trainer.num_epochs must be an integer >= 1, got {num_epochs!r}: with no "
                "epoch nothing is trained and no model is saved"
            )
        model = getattr(trainer, "model", None)
        optimizer = getattr(trainer, "optimizer", None)
        sparse = model is not None and any(
            isinstance(module, SampledSoftmaxLoss) and module.sparse_gradients
            for module in model.modules()
        )
        if sparse and not isinstance(optimizer, _TAKE_SPARSE_GRADIENTS):
            raise ConfigurationError(
                f"model.sparse_softmax_gradients is true, but trainer.optimizer "
                f"({type(optimizer).__name__}) cannot take sparse gradients: use "
                "\"dense_sparse_adagrad\" (bilm-tf's Adagrad, row by row), or set "
                "model.sparse_softmax_gradients to false"
            )


# Optimizers that update from sparse gradients: torch's Adagrad (and dense_sparse_adagrad, a
# subclass), SGD and SparseAdam, and AllenNLP's dense_sparse_adam.
_TAKE_SPARSE_GRADIENTS = (torch.optim.Adagrad, torch.optim.SGD, torch.optim.SparseAdam, DenseSparseAdam)
