"""
A working ``reduce_on_plateau`` learning rate scheduler for current torch (docs/errors.md).
"""
import logging
from typing import List, Union

import torch
from allennlp.training.learning_rate_schedulers.learning_rate_scheduler import (
    LearningRateScheduler,
    _PyTorchLearningRateSchedulerWithMetricsWrapper,
)
from allennlp.training.optimizers import Optimizer

from elmo_plugin.common.registration import replace_registration

logger = logging.getLogger(__name__)


@replace_registration(LearningRateScheduler, "reduce_on_plateau")
class ReduceOnPlateauLearningRateScheduler(_PyTorchLearningRateSchedulerWithMetricsWrapper):
    """
    Lowers the learning rate when the validation metric stops improving
    (``torch.optim.lr_scheduler.ReduceLROnPlateau``). Registered as ``"reduce_on_plateau"``,
    replacing AllenNLP's version, which breaks on torch 2.x.

    # Parameters

    mode : `str`, optional (default = `"min"`)
        ``"min"`` if a lower metric is better, ``"max"`` if higher is better.
    factor : `float`, optional (default = `0.1`)
        Multiplier applied to the learning rate.
    patience : `int`, optional (default = `10`)
        Epochs without improvement before lowering the rate.
    verbose : `bool`, optional (default = `False`)
        Accepted for compatibility with existing configs; when True the change of rate is
        logged by this wrapper (torch removed its own printing).
    threshold_mode, threshold, cooldown, min_lr, eps :
        As in ``torch.optim.lr_scheduler.ReduceLROnPlateau``.
    """

    def __init__(
        self,
        optimizer: Optimizer,
        mode: str = "min",
        factor: float = 0.1,
        patience: int = 10,
        verbose: bool = False,
        threshold_mode: str = "rel",
        threshold: float = 1e-4,
        cooldown: int = 0,
        min_lr: Union[float, List[float]] = 0,
        eps: float = 1e-8,
    ) -> None:
        self._verbose = verbose
        lr_scheduler = torch.optim.lr_scheduler.ReduceLROnPlateau(
            optimizer=optimizer, mode=mode, factor=factor, patience=patience, threshold_mode=threshold_mode,
            threshold=threshold, cooldown=cooldown, min_lr=min_lr, eps=eps,
        )
        super().__init__(lr_scheduler)

    def step(self, metric: float = None) -> None:
        before = [group["lr"] for group in self.lr_scheduler.optimizer.param_groups]
        super().step(metric)
        after = [group["lr"] for group in self.lr_scheduler.optimizer.param_groups]
        if self._verbose and after != before:
            logger.info("reduce_on_plateau: learning rate %s -> %s", before, after)
