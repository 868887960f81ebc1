"""
AllenNLP's ``gradient_descent`` trainer with a GPU check that works on torch 2.x, without torch's
deprecation notice about AllenNLP's ``torch.cuda.amp.autocast``, and with a training step that
never waits on the device: the loss, the NaN check and the metrics are read every
``metrics_every_num_batches`` batches (docs/pretraining.md, docs/gpu.md).
"""
import collections
import contextlib
import functools
import inspect
import logging
import math
import os
import warnings
from typing import Any, Callable, Dict, Iterator, List, Optional, Tuple, Union

import torch
import torch.distributed as dist
from allennlp.common import Tqdm
from allennlp.common import util as common_util
from allennlp.common.checks import ConfigurationError
from allennlp.nn.util import dist_reduce_sum
from allennlp.training import util as training_util
from allennlp.training.callbacks.backward import MixedPrecisionBackwardCallback
from allennlp.training.gradient_descent_trainer import GradientDescentTrainer
from allennlp.training.trainer import Trainer

from elmo_plugin.common.atomic_output import atomic_output
from elmo_plugin.common.registration import replace_registration
from elmo_plugin.common.termination import raise_if_interrupted
from elmo_plugin.common.threads import follow_the_load
from elmo_plugin.modules.sampled_softmax_loss import row_sums_of, sparse_row_gradient
from elmo_plugin.training.console import EpochSummaryCallback, validating

logger = logging.getLogger(__name__)

# How often the training loop reads the loss and the metrics from the device by default.
DEFAULT_METRICS_EVERY_NUM_BATCHES = 10


def _cuda_index(device: Any) -> int:
    """The GPU index that ``device`` (an int, "cuda:N", "cpu", a torch.device) asks for, or -1."""
    if device is None or (isinstance(device, str) and device == "cpu"):
        return -1
    if isinstance(device, torch.device):
        return -1 if device.type == "cpu" else (device.index or 0)
    if isinstance(device, str) and device.startswith("cuda"):
        return int(device.split(":", 1)[1]) if ":" in device else 0
    return int(device)


def check_training_device(
    cuda_device: Union[int, str, torch.device, List[Any], None], serialization_dir: str = ""
) -> None:
    """Raises a `ConfigurationError` if ``cuda_device`` names a GPU that torch cannot use."""
    devices = cuda_device if isinstance(cuda_device, list) else [cuda_device]
    for device in devices:
        index = _cuda_index(device)
        if index < 0:
            continue
        if not torch.cuda.is_available():
            reason = (
                f"torch {torch.__version__} is a CPU build"
                if torch.version.cuda is None
                else f"torch {torch.__version__} sees no CUDA GPU on this machine"
            )
            raise ConfigurationError(
                f"trainer.cuda_device is {device!r}, but {reason}: train on the CPU with "
                "-o '{\"trainer.cuda_device\": -1}' (the configs' cuda_device argument), or set up "
                "a CUDA build of torch where there is a GPU (make TORCH=cuda)"
            )
        if index >= torch.cuda.device_count():
            raise ConfigurationError(
                f"trainer.cuda_device is {device!r}, but only {torch.cuda.device_count()} CUDA "
                f"GPU(s) are visible (0 to {torch.cuda.device_count() - 1})"
            )


@contextlib.contextmanager
def _without_the_autocast_deprecation() -> Iterator[None]:
    """Ignores torch's FutureWarning about AllenNLP's ``torch.cuda.amp.autocast``, only here."""
    with warnings.catch_warnings():
        warnings.filterwarnings(
            "ignore",
            message=r"`torch\.cuda\.amp\.autocast\(args\.\.\.\)` is deprecated",
            category=FutureWarning,
            module="allennlp.training.gradient_descent_trainer",
        )
        yield


def gradients_to_clip(parameters: List[torch.Tensor]) -> List[torch.Tensor]:
    """
    The gradients of ``parameters`` to measure and clip: a dense one as it is, a sparse row
    gradient as the values of its rows summed by id (`row_sums_of`), whose squares are those of
    its dense form.
    """
    gradients = []
    for parameter in parameters:
        if parameter.grad is None:
            continue
        if parameter.grad.is_sparse:
            parameter.grad = sparse_row_gradient(row_sums_of(parameter.grad), parameter.shape)
            gradients.append(parameter.grad._values())
        else:
            gradients.append(parameter.grad)
    return gradients


def clip_grad_norm(parameters: List[torch.Tensor], max_norm: float) -> torch.Tensor:
    """
    torch's ``clip_grad_norm_`` (exactly it where every gradient is dense), taking sparse row
    gradients as their dense form (the same norm up to the order of the sum). Returns the norm as
    a 0-dim tensor, without reading it.
    """
    parameters = [p for p in parameters if p.grad is not None]
    if not any(p.grad.is_sparse for p in parameters):
        return torch.nn.utils.clip_grad_norm_(parameters, max_norm)
    gradients = gradients_to_clip(parameters)
    total_norm = torch.nn.utils.get_total_norm(gradients)
    # As torch.nn.utils.clip_grads_with_norm_ scales.
    clip_coefficient = torch.clamp(max_norm / (total_norm + 1e-6), max=1.0)
    for gradient in gradients:
        gradient.mul_(clip_coefficient.to(gradient.device))
    return total_norm


class MetricsWhenRead(collections.UserDict):
    """
    A batch's metrics, computed (read from the device) when first read. Read it in ``on_batch``:
    read later, it gives the model's metrics of that later time.
    """

    def __init__(self, compute: Callable[[], Dict[str, float]]) -> None:
        # Not UserDict.__init__: it would set the data to {} before anything is read.
        self._compute = compute

    @functools.cached_property
    def data(self) -> Dict[str, float]:  # type: ignore[override]
        return self._compute()


def _signature_with(function: Callable, name: str, default: Any, annotation: Any) -> inspect.Signature:
    """``function``'s signature with a keyword parameter added before its ``**kwargs``."""
    signature = inspect.signature(function)
    parameters = list(signature.parameters.values())
    added = inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=default, annotation=annotation)
    at = next((i for i, p in enumerate(parameters) if p.kind == p.VAR_KEYWORD), len(parameters))
    return signature.replace(parameters=parameters[:at] + [added] + parameters[at:])


@replace_registration(Trainer, "gradient_descent", constructor="from_partial_objects")
class DeviceCheckingGradientDescentTrainer(GradientDescentTrainer):
    """
    AllenNLP's `GradientDescentTrainer`, registered as ``"gradient_descent"`` (the default
    trainer) in its place, with `check_training_device` run first (module documentation).

    # Parameters

    metrics_every_num_batches : `int`, optional (default = `10`)
        Batches between two reads of the loss and the metrics from the device (the progress bar's
        refresh and the NaN check; no checkpoint is saved with a NaN loss behind it). 1 reads
        after every batch, as AllenNLP does.
    **kwargs
        AllenNLP's `GradientDescentTrainer`'s.
    """

    @classmethod
    @functools.wraps(GradientDescentTrainer.from_partial_objects.__func__)  # its parameters, for from_params
    def from_partial_objects(cls, *args: Any, **kwargs: Any) -> "GradientDescentTrainer":
        check_training_device(kwargs.get("cuda_device"), kwargs.get("serialization_dir", "the serialization directory"))
        return super().from_partial_objects(*args, **kwargs)

    def __init__(self, *args: Any, metrics_every_num_batches: int = DEFAULT_METRICS_EVERY_NUM_BATCHES, **kwargs: Any):
        if isinstance(metrics_every_num_batches, bool) or not (
            isinstance(metrics_every_num_batches, int) and metrics_every_num_batches >= 1
        ):
            raise ConfigurationError(
                "trainer.metrics_every_num_batches must be an integer >= 1, got "
                f"{metrics_every_num_batches!r}"
            )
        super().__init__(*args, **kwargs)
        self._metrics_every_num_batches = metrics_every_num_batches
        # The most intra-op threads a batch runs on; fewer while other work takes cores.
        self._most_threads = torch.get_num_threads()
        # True on the device once a training loss of this epoch was NaN (read at the intervals).
        self._nan_loss: Optional[torch.Tensor] = None
        # The console's line per epoch (elmo_plugin.training.console), beside AllenNLP's table.
        if not any(isinstance(callback, EpochSummaryCallback) for callback in self._callbacks):
            self._callbacks.append(EpochSummaryCallback(self._serialization_dir))
        if self._checkpointer is not None:
            # A checkpoint is a host operation anyway: check the losses behind it first.
            save_checkpoint = self._checkpointer.save_checkpoint

            @functools.wraps(save_checkpoint)
            def save_checkpoint_after_a_nan_check(*args: Any, **kwargs: Any) -> None:
                self._raise_on_nan_loss()
                return save_checkpoint(*args, **kwargs)

            self._checkpointer.save_checkpoint = save_checkpoint_after_a_nan_check  # type: ignore

    def _save_model_state(self, path: str) -> None:
        # best.th whole or absent, as the checkpoints are (training/checkpointer.py).
        with atomic_output(path) as temporary:
            super()._save_model_state(temporary)

    def _maybe_restore_checkpoint(self) -> None:
        super()._maybe_restore_checkpoint()
        self._restore_best_model_file()

    def _restore_best_model_file(self) -> None:
        """
        When the restored checkpoint is that of the best epoch so far: its weights are the best
        ones, whatever its training state says. AllenNLP saves an epoch's checkpoint before it
        names best.th in its state and links best.th to it, removing the old one first; resumed
        from the first best epoch's checkpoint, a run ended with its last epoch's weights, and
        with best.th missing (a signal between the removal and the link) made no archive.
        """
        tracker = self._metric_tracker.state_dict()
        at_a_best_epoch_end = (
            self._start_after_epochs_completed > 0 and self._start_after_batches_in_epoch_completed == 0
            # validated at every epoch so far, the last time the best
            and tracker["epoch_number"] == self._start_after_epochs_completed and tracker["is_best_so_far"]
        )
        sharded = self._ddp_wrapped_model is not None and self._ddp_wrapped_model.is_sharded
        if not at_a_best_epoch_end or sharded or not self._serialization_dir:
            return
        self._best_model_filename = os.path.join(self._serialization_dir, "best.th")
        if self._primary and not os.path.exists(self._best_model_filename):
            if self._moving_average is not None:  # best.th holds the averages, as AllenNLP saves it
                self._moving_average.assign_average_value()
            try:
                self._save_model_state(self._best_model_filename)
            finally:
                if self._moving_average is not None:
                    self._moving_average.restore()

    def _train_epoch(self, epoch: int) -> Dict[str, float]:
        with _without_the_autocast_deprecation():
            return self._train_epoch_reading_at_intervals(epoch)

    def _validation_loss(self, epoch: int) -> Tuple[float, Optional[float], int]:
        with _without_the_autocast_deprecation(), validating():
            return super()._validation_loss(epoch)

    # -- gradients --------------------------------------------------------------------------------

    def rescale_gradients(self) -> Optional[torch.Tensor]:  # type: ignore[override]
        """
        AllenNLP's gradient norm and clipping to ``grad_norm``, the norm returned as a 0-dim
        tensor on the device, sparse row gradients counting as their dense form (`clip_grad_norm`).
        """
        if self._grad_norm is False or self._grad_norm is None:
            return None
        parameters = [p for p in self.model.parameters() if p.grad is not None]
        if isinstance(self._grad_norm, bool):  # True: measure only
            gradients = gradients_to_clip(parameters)
            return torch.norm(torch.stack([torch.norm(g.detach()) for g in gradients]))
        if self._scaler is not None:
            self._scaler.unscale_(self.optimizer)
        if self._ddp_wrapped_model is not None:
            if any(p.grad.is_sparse for p in parameters):
                raise ConfigurationError(
                    "sparse gradients in distributed training: DDP's all-reduce takes dense "
                    "gradients; train with dense gradients there"
                )
            return self._ddp_wrapped_model.clip_grad_norm_(self._grad_norm)
        return clip_grad_norm(parameters, self._grad_norm)

    def clip_gradient(self) -> None:
        """AllenNLP's clipping of every gradient's elements to ``grad_clipping``, sparse ones too."""
        if self._grad_clipping is None:
            return
        sparse = any(p.grad is not None and p.grad.is_sparse for p in self.model.parameters())
        if not sparse or self._scaler is not None:
            super().clip_gradient()  # unscales first; it clips no sparse gradient: done below
        if sparse:
            for gradient in gradients_to_clip(list(self.model.parameters())):
                gradient.clamp_(-self._grad_clipping, self._grad_clipping)

    # -- the training loop ------------------------------------------------------------------------

    def _raise_on_nan_loss(self) -> None:
        """Reads the NaN flag of this epoch's losses (a host read); raises as AllenNLP does."""
        if self._nan_loss is not None and bool(self._nan_loss):
            raise ValueError(
                "nan loss encountered (in the training batches of this epoch up to batch "
                f"{self._batches_in_epoch_completed}; the loss is read every "
                f"{self._metrics_every_num_batches} batches, trainer.metrics_every_num_batches)"
            )

    def _train_epoch_reading_at_intervals(self, epoch: int) -> Dict[str, float]:
        """AllenNLP 2.10's ``GradientDescentTrainer._train_epoch``, except where it read the device."""
        logger.info("Epoch %d/%d", epoch, self._num_epochs - 1)
        cpu_memory_usage = list(common_util.peak_cpu_memory().items())
        for worker, memory in cpu_memory_usage:
            logger.info(f"Worker {worker} memory usage: {common_util.format_size(memory)}")
        gpu_memory_usage = list(common_util.peak_gpu_memory().items())
        for gpu, memory in gpu_memory_usage:
            logger.info(f"GPU {gpu} memory usage: {common_util.format_size(memory)}")

        regularization_penalty = self.model.get_regularization_penalty()
        # Sums on the device, of the detached losses; None until the first batch.
        train_loss: Optional[torch.Tensor] = None
        train_reg_loss: Optional[torch.Tensor] = None
        batch_loss: Optional[torch.Tensor] = None
        batch_reg_loss: Optional[torch.Tensor] = None
        self._nan_loss = None

        self._pytorch_model.train()
        batch_generator = iter(self.data_loader)
        batch_group_generator = common_util.lazy_groups_of(batch_generator, self._num_gradient_accumulation_steps)
        logger.info("Training")
        num_training_batches: Union[int, float]
        try:
            len_data_loader = len(self.data_loader)
            num_training_batches = math.ceil(len_data_loader / self._num_gradient_accumulation_steps)
        except TypeError:
            num_training_batches = float("inf")
        batch_group_generator_tqdm = (
            Tqdm.tqdm(batch_group_generator, total=num_training_batches) if self._primary else batch_group_generator
        )

        def as_float(value: Optional[torch.Tensor]) -> Optional[float]:
            return None if value is None else float(value)

        done_early = False
        # Where a resumed run starts: the batches before it are skipped.
        start_after = (self._start_after_epochs_completed, self._start_after_batches_in_epoch_completed)
        for batch_group in batch_group_generator_tqdm:
            if done_early:
                break
            # A Ctrl-C or SIGTERM swallowed on the way (common/termination.py) stops the run here, not at
            # the next checkpoint, which may be hours away.
            raise_if_interrupted()
            follow_the_load(self._most_threads)
            if (self._epochs_completed, self._batches_in_epoch_completed) < start_after:
                self._batches_in_epoch_completed += 1
                self._total_batches_completed += 1
                continue

            self.optimizer.zero_grad()
            batch_loss, batch_reg_loss = None, None
            batch_group_outputs = []
            for batch in batch_group:
                if self._distributed:
                    # Has another worker run out of data? (AllenNLP's check: it reads the host.)
                    done = torch.tensor(0, device=self.cuda_device)
                    torch.distributed.all_reduce(done, torch.distributed.ReduceOp.SUM)
                    if done.item() > 0:
                        done_early = True
                        logger.warning(
                            f"Worker {torch.distributed.get_rank()} finishing training early! "
                            "This implies that there is an imbalance in your training "
                            "data across the workers and that some amount of it will be "
                            "ignored. A small amount of this is fine, but a major imbalance "
                            "should be avoided. Note: This warning will appear unless your "
                            "data is perfectly balanced."
                        )
                        break

                with torch.autocast("cuda", enabled=self._use_amp):
                    batch_outputs = self.batch_outputs(batch, for_training=True)
                    batch_group_outputs.append(batch_outputs)
                    loss = batch_outputs["loss"]
                    reg_loss = batch_outputs.get("reg_loss")
                    nan = torch.isnan(loss.detach())
                    self._nan_loss = nan if self._nan_loss is None else self._nan_loss | nan
                    loss = loss / len(batch_group)
                    batch_loss = loss.detach() if batch_loss is None else batch_loss + loss.detach()
                    if reg_loss is not None:
                        reg_loss = reg_loss / len(batch_group)
                        batch_reg_loss = reg_loss.detach()
                        train_reg_loss = batch_reg_loss if train_reg_loss is None else train_reg_loss + batch_reg_loss

                backward_called = False
                for callback in self._callbacks:
                    backward_called |= callback.on_backward(self, batch_outputs, backward_called)
                if not backward_called:
                    if self._scaler is not None:
                        MixedPrecisionBackwardCallback(self._serialization_dir).on_backward(
                            self, batch_outputs, backward_called
                        )
                    else:
                        loss.backward()

            if len(batch_group_outputs) <= 0:
                continue

            assert batch_loss is not None
            train_loss = batch_loss if train_loss is None else train_loss + batch_loss

            batch_grad_norm = self.rescale_gradients()
            self.clip_gradient()

            if self._learning_rate_scheduler:
                self._learning_rate_scheduler.step_batch(self._total_batches_completed + 1)
            if self._momentum_scheduler:
                self._momentum_scheduler.step_batch(self._total_batches_completed + 1)

            if self._scaler is not None:
                self._scaler.step(self.optimizer)
                self._scaler.update()
            else:
                self.optimizer.step()

            if self._moving_average is not None:
                self._moving_average.apply(self._total_batches_completed + 1)

            self._batches_in_epoch_completed += 1
            self._total_batches_completed += 1

            # The metrics of this batch, computed (read from the device) only when read.
            metrics = MetricsWhenRead(functools.partial(
                lambda losses, batches: training_util.get_metrics(self.model, *map(as_float, losses), batches),
                (train_loss, train_reg_loss, batch_loss, batch_reg_loss), self._batches_in_epoch_completed,
            ))
            reading = self._batches_in_epoch_completed % self._metrics_every_num_batches == 0
            if reading:
                self._raise_on_nan_loss()

            for callback in self._callbacks:
                callback.on_batch(
                    self, batch_group, batch_group_outputs, metrics, epoch, self._batches_in_epoch_completed,
                    is_training=True, is_primary=self._primary, batch_grad_norm=batch_grad_norm,
                )

            if self._primary and reading:
                description = training_util.description_from_metrics(metrics)
                batch_group_generator_tqdm.set_description(description, refresh=False)

            if self._checkpointer is not None:
                self._checkpointer.maybe_save_checkpoint(self, self._epochs_completed, self._batches_in_epoch_completed)

        if self._distributed and not done_early:
            logger.info(f"Worker {torch.distributed.get_rank()} completed its entire epoch (training).")
            done = torch.tensor(1, device=self.cuda_device)
            torch.distributed.all_reduce(done, torch.distributed.ReduceOp.SUM)
            assert done.item()
        if self._distributed:
            dist.barrier()

        if (self._epochs_completed, self._batches_in_epoch_completed - 1) < start_after:
            metrics = {}
        else:
            self._raise_on_nan_loss()
            total = dist_reduce_sum(as_float(train_loss) or 0.0)
            num_batches = dist_reduce_sum(self._batches_in_epoch_completed)
            total_reg: Optional[float] = None
            if regularization_penalty is not None:
                total_reg = dist_reduce_sum(as_float(train_reg_loss) or 0.0)
            metrics = training_util.get_metrics(
                self.model, total, total_reg, batch_loss=None, batch_reg_loss=None, num_batches=num_batches, reset=True
            )

        for (worker, memory) in cpu_memory_usage:
            metrics["worker_" + str(worker) + "_memory_MB"] = memory / (1024 * 1024)
        for (gpu_num, memory) in gpu_memory_usage:
            metrics["gpu_" + str(gpu_num) + "_memory_MB"] = memory / (1024 * 1024)
        return metrics


DeviceCheckingGradientDescentTrainer.from_partial_objects.__func__.__signature__ = _signature_with(  # type: ignore
    GradientDescentTrainer.from_partial_objects.__func__, "metrics_every_num_batches",
    DEFAULT_METRICS_EVERY_NUM_BATCHES, int,
)
