"""
A linear learning-rate decay whose length follows the corpus it trains on: the pretraining loader
reads lazily and cannot count its batches, so the ``count_batches_per_epoch`` callback counts
them when training starts and gives the count to ``linear_decay_over_corpus`` (unless
``num_steps_per_epoch`` was given). Either way the rate reaches ``end_learning_rate`` at the run's
last update.
"""
import logging
import math
from typing import Any, Iterator, List, Optional

import torch
import torch.distributed as dist
from allennlp.common import util as common_util
from allennlp.common.checks import ConfigurationError
from allennlp.common.util import lazy_groups_of
from allennlp.data.data_loaders import MultiProcessDataLoader
from allennlp.training.callbacks.callback import TrainerCallback
from allennlp.training.learning_rate_schedulers import LearningRateScheduler
from allennlp.training.learning_rate_schedulers.polynomial_decay import PolynomialDecay

from elmo_plugin.data.dataset_readers.bilm_corpus import BilmCorpusReader

logger = logging.getLogger(__name__)


@LearningRateScheduler.register("linear_decay_over_corpus")
class LinearDecayOverCorpus(PolynomialDecay):
    """
    AllenNLP's ``polynomial_decay`` with ``power`` 1 and no warm-up, except that
    ``num_steps_per_epoch`` may be unknown when it is built: the ``count_batches_per_epoch``
    callback then sets it (`set_num_steps_per_epoch`) before the first update.

    # Parameters

    optimizer, num_epochs : given by the trainer.
    num_steps_per_epoch : `int`, optional (default = `None`)
        Updates per epoch. ``None``: counted from the corpus when training starts (the trainer
        passes ``None`` for a lazy loader).
    end_learning_rate : `float`, optional (default = `0.0`)
        The rate at the last update.
    """

    def __init__(
        self,
        optimizer: torch.optim.Optimizer,
        num_epochs: int,
        num_steps_per_epoch: Optional[int] = None,
        end_learning_rate: float = 0.0,
        last_epoch: int = -1,
    ) -> None:
        self.num_epochs = num_epochs
        self.num_steps_per_epoch = num_steps_per_epoch
        # PolynomialDecay needs a number to start with; until the count is known only the
        # initial rate (step 0) is ever asked for, and that does not depend on it.
        super().__init__(
            optimizer, num_epochs, num_steps_per_epoch or 1, power=1.0, warmup_steps=0,
            end_learning_rate=end_learning_rate, last_epoch=last_epoch,
        )

    def set_num_steps_per_epoch(self, num_steps_per_epoch: int) -> None:
        """The number of updates per epoch, counted (see `count_batches_per_epoch`)."""
        if num_steps_per_epoch < 1:
            raise ConfigurationError(
                f"linear_decay_over_corpus: the training data gives {num_steps_per_epoch} batches per epoch"
            )
        self.num_steps_per_epoch = num_steps_per_epoch
        self.total_steps = self.num_epochs * num_steps_per_epoch

    def step_batch(self, batch_num_total: int = None) -> None:
        if self.num_steps_per_epoch is None and (batch_num_total or 0) > 0:
            raise ConfigurationError(
                "linear_decay_over_corpus does not know the number of batches per epoch: give "
                "num_steps_per_epoch, or add the trainer callback {\"type\": "
                "\"count_batches_per_epoch\"}, which counts them when training starts"
            )
        super().step_batch(batch_num_total)


def count_batches_per_epoch(data_loader: Any) -> int:
    """
    The number of batches ``data_loader`` yields in one epoch: its ``len``, or ``bilm_stream``'s
    count of its reader's windows, or a lazy `MultiProcessDataLoader`'s corpus read once and
    batched as the loader would (with ``num_workers`` > 0 each worker chunks its own share, so the
    count can be off by fewer than ``num_workers`` batches per chunk).
    """
    try:
        return len(data_loader)
    except TypeError:
        pass
    if hasattr(data_loader, "count_batches"):  # e.g. bilm_stream: counts from its reader
        return data_loader.count_batches()
    if not isinstance(data_loader, MultiProcessDataLoader):
        raise ConfigurationError(
            f"cannot count the batches of a {type(data_loader).__name__}: give the learning rate "
            "scheduler's num_steps_per_epoch"
        )
    loader = data_loader
    instances = _read_without_using_a_pass(loader.reader, loader.data_path)
    size = loader.max_instances_in_memory
    chunks = lazy_groups_of(instances, size) if size else [list(instances)]
    return sum(_batches_in(chunk, loader) for chunk in chunks)


def _read_without_using_a_pass(reader: Any, data_path: Any) -> Iterator[Any]:
    """
    ``reader.read(data_path)``, a ``bilm_corpus`` reader's pass number pinned: it shuffles each pass
    by its number, and the count must not use one up (a resumed run does not count again).
    """
    if not isinstance(reader, BilmCorpusReader):
        yield from reader.read(data_path)
        return
    pinned = reader._epoch
    reader.set_epoch(0)
    try:
        yield from reader.read(data_path)
    finally:
        reader.set_epoch(pinned)


def _batches_in(instances: List[Any], loader: MultiProcessDataLoader) -> int:
    if loader.batch_sampler is not None:
        return loader.batch_sampler.get_num_batches(instances)
    rows = len(instances) / loader.batch_size
    return math.floor(rows) if loader.drop_last else math.ceil(rows)


def agree_on_batches_per_epoch(batches: int) -> int:
    """
    In distributed training, the fewest batches of any process (``batches`` is this process's
    count of its own shard), the same in every process; ``batches`` otherwise. AllenNLP's trainer
    ends every process's epoch when the first runs out, and all must decay the rate alike.
    """
    if not common_util.is_distributed():
        return batches
    counts: List[Optional[int]] = [None] * dist.get_world_size()
    dist.all_gather_object(counts, batches)
    fewest = min(count for count in counts if count is not None)
    if fewest != max(count for count in counts if count is not None):
        logger.info(
            "Batches per epoch in the %d processes: %s; all decay the learning rate over %d (the "
            "trainer stops every epoch when the first process runs out)", len(counts), counts, fewest,
        )
    return fewest


@TrainerCallback.register("count_batches_per_epoch")
class CountBatchesPerEpochCallback(TrainerCallback):
    """
    When training starts, gives a ``linear_decay_over_corpus`` scheduler without
    ``num_steps_per_epoch`` the training data's updates per epoch (`count_batches_per_epoch`,
    divided by the gradient accumulation steps).
    """

    def on_start(self, trainer: Any, is_primary: bool = True, **kwargs: Any) -> None:
        scheduler = getattr(trainer, "_learning_rate_scheduler", None)
        if not isinstance(scheduler, LinearDecayOverCorpus) or scheduler.num_steps_per_epoch:
            return
        logger.info("Counting the training data's batches for the learning rate schedule")
        batches = agree_on_batches_per_epoch(count_batches_per_epoch(trainer.data_loader))
        accumulation = getattr(trainer, "_num_gradient_accumulation_steps", 1) or 1
        updates = math.ceil(batches / accumulation)
        scheduler.set_num_steps_per_epoch(updates)
        logger.info(
            "Learning rate: linear decay to %g over %d epochs x %d updates (counted from %s)",
            scheduler.end_learning_rate, scheduler.num_epochs, updates,
            getattr(trainer.data_loader, "data_path", "the training data"),
        )
