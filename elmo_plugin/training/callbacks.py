"""Trainer callbacks of the plugin."""
import json
import logging
import os
from typing import Any, Dict, Optional

import torch
from allennlp.common.checks import ConfigurationError
from allennlp.training import util as training_util
from allennlp.training.callbacks.callback import TrainerCallback
from allennlp.training.optimizers import DenseSparseAdam

from elmo_plugin.common.atomic_output import atomic_output
from elmo_plugin.common.memory import keep_freed_memory_for_reuse
from elmo_plugin.modules.sampled_softmax_loss import SampledSoftmaxLoss
from elmo_plugin.training.console import REPORT_LOGGER

logger = logging.getLogger(__name__)
report = logging.getLogger(REPORT_LOGGER)

# `ContinuePretrainingCallback`: the validation metrics of the model it started from.
START_METRICS_FILE = "metrics_start.json"


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


@TrainerCallback.register("continue_pretraining")
class ContinuePretrainingCallback(TrainerCallback):
    """
    What going on from a trained language model (the ``elmo_bilm`` model's ``start_from``) needs of
    the trainer. At a fresh start: a bilm-tf checkpoint's Adagrad accumulators in a torch Adagrad
    (as bilm-tf's ``restart.py`` goes on), and the validation perplexity of the model as it starts,
    on the console and in ``metrics_start.json`` (the number the adapted model's is compared with).
    For a source without a softmax, the first ``softmax_first_epochs`` epochs train with the biLM
    frozen, so that a new softmax never trains the biLM from random targets' gradients. A resumed
    run (``--recover``) keeps its own optimizer state.

    # Parameters

    softmax_first_epochs : `int`, optional (default = `0`)
        Epochs that train the softmax alone.
    validate_at_start : `bool`, optional (default = `True`)
        Measure the starting model on the validation data (skipped when its softmax is new).
    """

    def __init__(self, serialization_dir: str, softmax_first_epochs: int = 0, validate_at_start: bool = True) -> None:
        super().__init__(serialization_dir)
        if isinstance(softmax_first_epochs, bool) or not isinstance(softmax_first_epochs, int) \
                or softmax_first_epochs < 0:
            raise ConfigurationError(f"softmax_first_epochs must be an integer >= 0, got {softmax_first_epochs!r}")
        self.softmax_first_epochs = softmax_first_epochs
        self.validate_at_start = validate_at_start

    def on_start(self, trainer: Any, is_primary: bool = True, **kwargs: Any) -> None:
        model = trainer.model
        epochs_done = getattr(trainer, "_start_after_epochs_completed", 0)
        fresh = epochs_done == 0 and getattr(trainer, "_start_after_batches_in_epoch_completed", 0) == 0
        sums = getattr(model, "source_adagrad", None)
        if fresh and sums:
            self._restore_adagrad(trainer, sums)
        if fresh and self.validate_at_start and getattr(model, "started_with_softmax", False):
            metrics = self._validate(trainer)
            if metrics is not None and is_primary:
                report.info("before training: validation ppl %.1f, loss %.4g", metrics["ppl"], metrics["loss"])
                with atomic_output(os.path.join(self.serialization_dir, START_METRICS_FILE)) as temporary:
                    with open(temporary, "w", encoding="utf-8") as handle:
                        json.dump({f"validation_{name}": value for name, value in metrics.items()}, handle, indent=2)
        if epochs_done < self.softmax_first_epochs:
            model.bilm.requires_grad_(False)
            logger.warning(
                "the softmax trains alone for %d epoch(s), the biLM frozen; then everything trains",
                self.softmax_first_epochs - epochs_done,
            )

    def on_epoch(self, trainer: Any, metrics: Any, epoch: int, is_primary: bool = True, **kwargs: Any) -> None:
        if epoch + 1 == self.softmax_first_epochs:
            trainer.model.bilm.requires_grad_(True)
            logger.warning("the softmax has trained alone for %d epoch(s): now the biLM trains too", epoch + 1)

    @staticmethod
    def _restore_adagrad(trainer: Any, sums: Dict[str, torch.Tensor]) -> None:
        if not isinstance(trainer.optimizer, torch.optim.Adagrad):
            logger.warning("the source's Adagrad accumulators are not used: trainer.optimizer is %s",
                           type(trainer.optimizer).__name__)
            return
        restored = 0
        for name, parameter in trainer.model.named_parameters():
            state = trainer.optimizer.state.get(parameter)
            if name in sums and state is not None and "sum" in state:
                state["sum"].copy_(sums[name].to(state["sum"]))
                restored += 1
        logger.info("Adagrad goes on with the source's accumulators of %d parameters", restored)

    @staticmethod
    def _validate(trainer: Any) -> Optional[Dict[str, float]]:
        """The model's validation metrics, by the trainer's own validation loop."""
        if getattr(trainer, "_validation_data_loader", None) is None or not hasattr(trainer, "_validation_loss"):
            return None
        trainer.model.get_metrics(reset=True)
        with torch.no_grad():
            loss, regularization_loss, batches = trainer._validation_loss(-1)
        # As the trainer reports validation metrics (the model's, with the mean loss).
        metrics = training_util.get_metrics(trainer.model, loss, regularization_loss, None, None, batches, reset=True)
        trainer.model.train()
        if "ppl" not in metrics or "loss" not in metrics:
            return None
        return {"ppl": float(metrics["ppl"]), "loss": float(metrics["loss"])}
