"""
A linear learning-rate decay whose length follows the corpus it trains on.

The CPU-sized biLM configs decay the rate linearly to zero over the run. AllenNLP gives a
scheduler the number of batches per epoch only when the data loader can count them, and the
pretraining loader reads lazily (``max_instances_in_memory``: a corpus larger than memory
trains), so it cannot. The configs used to carry a fixed ``steps_per_epoch`` for the shared
corpus (3,165 batches), and training on another corpus kept it: on a corpus of 63 batches the
rate barely decayed, and nothing said so (bilm-tf users met the same trap with
``n_train_tokens``).

Now ``linear_decay_over_corpus`` leaves the number of batches open, and the trainer callback
``count_batches_per_epoch`` (in every config that uses it) counts the training corpus's batches
when training starts, reading it once through the trainer's own dataset reader and batching it as
the loader does, and gives the count to the scheduler. Given explicitly
(``num_steps_per_epoch``), a count is used as it is. Either way the rate reaches
``end_learning_rate`` at the run's last update.
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
    AllenNLP's ``polynomial_decay`` with ``power`` 1 and no warm-up (the rate falls linearly from
    the optimizer's to ``end_learning_rate`` over ``num_epochs x num_steps_per_epoch`` updates),
    except that ``num_steps_per_epoch`` may be unknown when it is built: the
    ``count_batches_per_epoch`` callback then sets it (`set_num_steps_per_epoch`) before the
    first update.

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
            optimizer,
            num_epochs,
            num_steps_per_epoch or 1,
            power=1.0,
            warmup_steps=0,
            end_learning_rate=end_learning_rate,
            last_epoch=last_epoch,
        )

    def set_num_steps_per_epoch(self, num_steps_per_epoch: int) -> None:
        """The number of updates per epoch, counted (see `count_batches_per_epoch`)."""
        if num_steps_per_epoch < 1:
            raise ConfigurationError(
                f"linear_decay_over_corpus: the training data gives {num_steps_per_epoch} "
                "batches per epoch"
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
    The number of batches ``data_loader`` yields in one epoch. A loader that knows it (``len``)
    says so; ``bilm_stream`` counts its reader's windows; a lazy `MultiProcessDataLoader` reads
    its corpus once through its dataset reader
    (in this process, without indexing) and batches it as it would: in chunks of
    ``max_instances_in_memory`` instances, each cut by its batch sampler or into ``batch_size``
    rows. With ``num_workers`` > 0 each worker chunks its own share, so the count can be off by
    fewer than ``num_workers`` batches per chunk; the rate then ends a few updates early or just
    above ``end_learning_rate``.
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
    chunks = (
        lazy_groups_of(instances, loader.max_instances_in_memory)
        if loader.max_instances_in_memory
        else [list(instances)]
    )
    batches = 0
    for chunk in chunks:
        batches += _batches_in(chunk, loader)
    return batches


def _read_without_using_a_pass(reader: Any, data_path: Any) -> Iterator[Any]:
    """
    ``reader.read(data_path)``. The ``bilm_corpus`` reader numbers its passes over a corpus and
    shuffles each by its number; the count must not use one up (training would start at the
    second shuffle order, and a resumed run, which does not count again, at another one), so
    its pass number is pinned while counting (the order does not change the count).
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
    count of its own shard), the same in every process; ``batches`` otherwise.

    Each process reads its own part of the corpus, and the parts can differ by a batch or more.
    AllenNLP's trainer ends every process's epoch when the first one runs out of batches (the
    others' last batches are skipped), so the processes all make that many updates; and they
    must decay the learning rate alike, or DDP's equal gradients would give different weights.
    """
    if not common_util.is_distributed():
        return batches
    counts: List[Optional[int]] = [None] * dist.get_world_size()
    dist.all_gather_object(counts, batches)
    fewest = min(count for count in counts if count is not None)
    if fewest != max(count for count in counts if count is not None):
        logger.info(
            "Batches per epoch in the %d processes: %s; all decay the learning rate over %d (the "
            "trainer stops every epoch when the first process runs out)",
            len(counts),
            counts,
            fewest,
        )
    return fewest


@TrainerCallback.register("count_batches_per_epoch")
class CountBatchesPerEpochCallback(TrainerCallback):
    """
    When training starts, gives a ``linear_decay_over_corpus`` scheduler that has no
    ``num_steps_per_epoch`` the number of updates per epoch of the training data
    (`count_batches_per_epoch`, divided by the gradient accumulation steps). Does nothing for
    other schedulers, or when the number was given.
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
            scheduler.end_learning_rate,
            scheduler.num_epochs,
            updates,
            getattr(trainer.data_loader, "data_path", "the training data"),
        )
