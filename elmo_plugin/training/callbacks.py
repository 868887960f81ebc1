"""Trainer callbacks of the plugin."""
import json
import logging
import os
from typing import Any, Dict, Optional

import torch
from allennlp.common.checks import ConfigurationError
from allennlp.data import DatasetReader
from allennlp.data.data_loaders import MultiProcessDataLoader
from allennlp.nn import util as nn_util
from allennlp.training import util as training_util
from allennlp.training.callbacks.callback import TrainerCallback
from allennlp.training.optimizers import DenseSparseAdam

from elmo_plugin.common.atomic_output import atomic_output
from elmo_plugin.common.memory import keep_freed_memory_for_reuse
from elmo_plugin.modules.sampled_softmax_loss import SampledSoftmaxLoss
from elmo_plugin.training.console import REPORT_LOGGER, validating

logger = logging.getLogger(__name__)
report = logging.getLogger(REPORT_LOGGER)

# `ContinuePretrainingCallback`: the validation metrics of the model it started from.
START_METRICS_FILE = "metrics_start.json"
# ... and the validation metrics measured within epochs (validate_every_num_batches), a JSON line each.
WITHIN_EPOCHS_FILE = "validation_within_epochs.jsonl"


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

    With ``source_validation_data_path``, held-out text of the source's domain is measured too, at
    the start and after every epoch (``source_validation_ppl`` in the epoch's metrics): what
    adapting costs there shows. With ``validate_every_num_batches``, the validation data is measured
    within epochs as well, on the console and in ``validation_within_epochs.jsonl`` (the best model
    is still chosen by epoch).

    # Parameters

    softmax_first_epochs : `int`, optional (default = `0`)
        Epochs that train the softmax alone.
    validate_at_start : `bool`, optional (default = `True`)
        Measure the starting model on the validation data (skipped when its softmax is new).
    source_validation_data_path : `str`, optional (default = `None`)
        Held-out text of the source's domain.
    source_validation_reader : `DatasetReader`, optional (default = `None`)
        How to read it (the config's ``validation_dataset_reader``); required with the path.
    validate_every_num_batches : `int`, optional (default = `None`)
        Measure the validation data every this many training batches too.
    """

    def __init__(
        self,
        serialization_dir: str,
        softmax_first_epochs: int = 0,
        validate_at_start: bool = True,
        source_validation_data_path: Optional[str] = None,
        source_validation_reader: Optional[DatasetReader] = None,
        validate_every_num_batches: Optional[int] = None,
    ) -> None:
        super().__init__(serialization_dir)
        if isinstance(softmax_first_epochs, bool) or not isinstance(softmax_first_epochs, int) \
                or softmax_first_epochs < 0:
            raise ConfigurationError(f"softmax_first_epochs must be an integer >= 0, got {softmax_first_epochs!r}")
        if validate_every_num_batches is not None and (
            isinstance(validate_every_num_batches, bool) or not isinstance(validate_every_num_batches, int)
            or validate_every_num_batches < 1
        ):
            raise ConfigurationError(
                f"validate_every_num_batches must be an integer >= 1 or null, got {validate_every_num_batches!r}"
            )
        if source_validation_data_path is not None and source_validation_reader is None:
            raise ConfigurationError("source_validation_data_path needs source_validation_reader (how to read it)")
        self.softmax_first_epochs = softmax_first_epochs
        self.validate_at_start = validate_at_start
        self.source_validation_data_path = source_validation_data_path
        self.source_validation_reader = source_validation_reader
        self.validate_every_num_batches = validate_every_num_batches
        self._source_loader: Optional[MultiProcessDataLoader] = None

    def on_start(self, trainer: Any, is_primary: bool = True, **kwargs: Any) -> None:
        model = trainer.model
        epochs_done = getattr(trainer, "_start_after_epochs_completed", 0)
        fresh = epochs_done == 0 and getattr(trainer, "_start_after_batches_in_epoch_completed", 0) == 0
        sums = getattr(model, "source_adagrad", None)
        if fresh and sums:
            self._restore_adagrad(trainer, sums)
        if self.source_validation_data_path is not None:
            self._source_loader = MultiProcessDataLoader(
                self.source_validation_reader, self.source_validation_data_path, batch_size=64, shuffle=False
            )
            self._source_loader.index_with(model.vocab)
        if fresh and self.validate_at_start and getattr(model, "started_with_softmax", False):
            start: Dict[str, float] = {}
            metrics = self._validate(trainer)
            if metrics is not None:
                report.info("before training: validation ppl %.1f, loss %.4g", metrics["ppl"], metrics["loss"])
                start.update({f"validation_{name}": value for name, value in metrics.items()})
            source_ppl = self._source_perplexity(trainer)
            if source_ppl is not None:
                report.info("before training: the source domain's held-out ppl %.1f", source_ppl)
                start["source_validation_ppl"] = source_ppl
            if start and is_primary:
                self._write_json(START_METRICS_FILE, start)
        if epochs_done < self.softmax_first_epochs:
            model.bilm.requires_grad_(False)
            logger.warning(
                "the softmax trains alone for %d epoch(s), the biLM frozen; then everything trains",
                self.softmax_first_epochs - epochs_done,
            )

    def on_batch(self, trainer: Any, batch_inputs: Any, batch_outputs: Any, batch_metrics: Any, epoch: int,
                 batch_number: int, is_training: bool, is_primary: bool = True, **kwargs: Any) -> None:
        every = self.validate_every_num_batches
        if not is_training or every is None or batch_number % every != 0:
            return
        model = trainer.model
        # The training metrics of the epoch so far, kept aside while the validation data is measured.
        saved = (getattr(model, "_loss_sums", None), getattr(model, "_token_counts", None))
        metrics = self._validate(trainer)
        model._loss_sums, model._token_counts = saved
        if metrics is None or not is_primary:
            return
        report.info("epoch %d, batch %d: validation ppl %.1f", epoch + 1, batch_number, metrics["ppl"])
        line = json.dumps({"epoch": epoch, "batch": batch_number, **{f"validation_{k}": v for k, v in metrics.items()}})
        with open(os.path.join(self.serialization_dir, WITHIN_EPOCHS_FILE), "a", encoding="utf-8") as handle:
            handle.write(line + "\n")

    def on_epoch(self, trainer: Any, metrics: Any, epoch: int, is_primary: bool = True, **kwargs: Any) -> None:
        if epoch + 1 == self.softmax_first_epochs:
            trainer.model.bilm.requires_grad_(True)
            logger.warning("the softmax has trained alone for %d epoch(s): now the biLM trains too", epoch + 1)
        source_ppl = self._source_perplexity(trainer)
        if source_ppl is not None and isinstance(metrics, dict):
            # In the epoch's metrics (written again with it) and so in the run's metrics.json.
            metrics["source_validation_ppl"] = source_ppl
            report.info("epoch %d: the source domain's held-out ppl %.1f", epoch + 1, source_ppl)
            if is_primary:
                self._write_json(f"metrics_epoch_{epoch}.json", metrics)

    def _write_json(self, name: str, values: Dict[str, Any]) -> None:
        with atomic_output(os.path.join(self.serialization_dir, name)) as temporary:
            with open(temporary, "w", encoding="utf-8") as handle:
                json.dump(values, handle, indent=2)

    def _source_perplexity(self, trainer: Any) -> Optional[float]:
        """The model's perplexity on the source domain's held-out text."""
        if self._source_loader is None:
            return None
        model = trainer.model
        was_training = model.training
        model.eval()
        model.get_metrics(reset=True)
        with torch.no_grad(), validating():
            for batch in self._source_loader:
                model(**nn_util.move_to_device(batch, trainer.cuda_device))
        ppl = model.get_metrics(reset=True).get("ppl")
        model.train(was_training)
        return None if ppl is None else float(ppl)

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
