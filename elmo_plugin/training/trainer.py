"""
AllenNLP's ``gradient_descent`` trainer with a GPU check that works on current torch, and
without torch's deprecation notice about AllenNLP's ``torch.cuda.amp.autocast``.

With ``"trainer.cuda_device": 0`` on a machine without a CUDA GPU, AllenNLP 2.10's own check
(``check_for_gpu``) calls ``torch.device(0)``, which torch 2.x refuses with "RuntimeError: Cannot
access accelerator device when none is available." instead of AllenNLP's explanation. The plugin
registers this subclass under the same name (the default trainer); it checks the device first
and says in one error what was asked, why it cannot be had, and what to do, then builds the
trainer exactly as AllenNLP does.

AllenNLP 2.10's training and validation loops enter ``torch.cuda.amp.autocast(use_amp)``
for every batch, which torch 2.x deprecates: every training run printed a FutureWarning twice
(from environment, not from the user's config). The two loops run here inside
``warnings.catch_warnings()`` with an ignore filter for exactly that message from exactly
AllenNLP's trainer module; every other warning is shown as before.

``allennlp train`` with the plugin checks the device before it creates the serialization
directory (`elmo_plugin.commands.train_command`); here it is checked again for Python callers.
"""
import contextlib
import functools
import warnings
from typing import Any, Dict, Iterator, List, Optional, Tuple, Union

import torch
from allennlp.common.checks import ConfigurationError
from allennlp.training.gradient_descent_trainer import GradientDescentTrainer
from allennlp.training.trainer import Trainer

from elmo_plugin.common.registration import replace_registration
from elmo_plugin.training.console import EpochSummaryCallback, validating


def _cuda_index(device: Any) -> int:
    """The GPU index that ``device`` (an int, "cuda:N", "cpu", a torch.device) asks for, or -1."""
    if device is None:
        return -1
    if isinstance(device, torch.device):
        return -1 if device.type == "cpu" else (device.index or 0)
    if isinstance(device, str):
        if device == "cpu":
            return -1
        if device.startswith("cuda"):
            return int(device.split(":", 1)[1]) if ":" in device else 0
        return int(device)
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


@replace_registration(Trainer, "gradient_descent", constructor="from_partial_objects")
class DeviceCheckingGradientDescentTrainer(GradientDescentTrainer):
    """
    AllenNLP's `GradientDescentTrainer`, registered as ``"gradient_descent"`` (the default
    trainer) in its place: the same parameters and behaviour, with `check_training_device` run
    before anything is built, and its loops without torch's autocast deprecation notice.
    """

    @classmethod
    @functools.wraps(GradientDescentTrainer.from_partial_objects.__func__)  # its parameters, for from_params
    def from_partial_objects(cls, *args: Any, **kwargs: Any) -> "GradientDescentTrainer":
        check_training_device(kwargs.get("cuda_device"), kwargs.get("serialization_dir", "the serialization directory"))
        return super().from_partial_objects(*args, **kwargs)

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # The console's line per epoch (elmo_plugin.training.console), beside AllenNLP's table.
        if not any(isinstance(callback, EpochSummaryCallback) for callback in self._callbacks):
            self._callbacks.append(EpochSummaryCallback(self._serialization_dir))

    def _train_epoch(self, epoch: int) -> Dict[str, float]:
        with _without_the_autocast_deprecation():
            return super()._train_epoch(epoch)

    def _validation_loss(self, epoch: int) -> Tuple[float, Optional[float], int]:
        with _without_the_autocast_deprecation(), validating():
            return super()._validation_loss(epoch)
