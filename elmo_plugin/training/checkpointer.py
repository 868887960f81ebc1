"""
AllenNLP's ``default`` checkpointer, made right for training on several nodes (each with its own
serialization directory): it prunes old checkpoints on every node, makes ``--recover`` resume all
nodes from the newest checkpoint every node has, and takes ``save_every_num_seconds`` with global
rank 0's clock deciding for all (docs/pretraining.md, "On several nodes"). On one node it behaves
exactly as AllenNLP's, but that a checkpoint is whole or absent: its two files are written under
temporary names, the model state last (its name is how AllenNLP finds a checkpoint), so a SIGTERM
or a full disk while saving leaves the checkpoint before it the newest.
"""
import logging
import os
import time
from typing import List, Optional, Set, Tuple, Union

import torch
import torch.distributed as dist
from allennlp.common import util as common_util
from allennlp.nn import util as nn_util
from allennlp.training.checkpointer import Checkpointer, TrainerCheckpoint
from allennlp.training.trainer import Trainer

from elmo_plugin.common.atomic_output import atomic_output
from elmo_plugin.common.registration import replace_registration

logger = logging.getLogger(__name__)

# (epochs completed, batches completed in the epoch) of a process without any checkpoint.
NO_CHECKPOINT = (-1, -1)


def saves_checkpoints(global_rank: int, procs_per_node: int) -> bool:
    """Whether the process of ``global_rank`` is local rank 0 of its node, which saves its checkpoints."""
    return global_rank % max(procs_per_node, 1) == 0


def common_checkpoint(points: List[Tuple[int, int]]) -> Tuple[int, int]:
    """The point every process can resume from: the earliest of the processes' newest points."""
    return min(points)


class _Gathered:
    """A trainer whose checkpoint state was already gathered (so that saving gathers it once)."""

    def __init__(self, state: Optional[TrainerCheckpoint]) -> None:
        self.state = state

    def get_checkpoint_state(self) -> Optional[TrainerCheckpoint]:
        return self.state


@replace_registration(Checkpointer, "default")
class MultiNodeCheckpointer(Checkpointer):
    """AllenNLP's `Checkpointer` (same parameters and files), right on several nodes (module documentation)."""

    def __init__(
        self,
        serialization_dir: Union[str, os.PathLike],
        save_completed_epochs: bool = True,
        save_every_num_seconds: Optional[float] = None,
        save_every_num_batches: Optional[int] = None,
        keep_most_recent_by_count: Optional[int] = 2,
        keep_most_recent_by_age: Optional[int] = None,
    ) -> None:
        distributed = common_util.is_distributed()
        super().__init__(
            serialization_dir,
            save_completed_epochs=save_completed_epochs,
            # AllenNLP's refuses seconds in distributed training; they are handled here.
            save_every_num_seconds=None if distributed else save_every_num_seconds,
            save_every_num_batches=save_every_num_batches,
            keep_most_recent_by_count=keep_most_recent_by_count,
            keep_most_recent_by_age=keep_most_recent_by_age,
        )
        self._seconds_by_rank_0 = save_every_num_seconds if distributed else None
        self._reported_cut_short: Set[Tuple[int, int]] = set()

    def maybe_save_checkpoint(
        self, trainer: Trainer, num_epochs_completed: int, num_batches_in_epoch_completed: int
    ) -> bool:
        if self._seconds_by_rank_0 is not None:
            due = self._rank == 0 and time.time() - self._last_save_time >= self._seconds_by_rank_0
            # Every process calls this after every batch it trains, and at the end of each epoch.
            nccl = dist.get_backend() == "nccl"
            device = torch.device("cuda", torch.cuda.current_device()) if nccl else torch.device("cpu")
            decision = torch.tensor(int(due), device=device)
            dist.all_reduce(decision, dist.ReduceOp.MAX)
            if decision.item():
                self.save_checkpoint(trainer)
                return True
        return super().maybe_save_checkpoint(trainer, num_epochs_completed, num_batches_in_epoch_completed)

    def save_checkpoint(self, trainer: Trainer) -> None:
        state = trainer.get_checkpoint_state() if self._serialization_dir is not None else None
        if state is not None:
            point = (state.trainer_state["epochs_completed"], state.trainer_state["batches_in_epoch_completed"])
            files = ((self._training_state_path(*point), state.trainer_state),
                     (self._model_state_path(*point), state.model_state))
            if not all(os.path.isfile(path) for path, _ in files):
                for path, value in files:
                    with atomic_output(path) as temporary:
                        torch.save(value, temporary)
        # AllenNLP's finds both files there and only prunes and records the time.
        super().save_checkpoint(_Gathered(state))  # type: ignore[arg-type]

    def _find_all_checkpoints(self) -> Set[Tuple[int, int]]:
        points = super()._find_all_checkpoints()
        cut_short = {point for point in points if not os.path.isfile(self._training_state_path(*point))}
        for point in sorted(cut_short - self._reported_cut_short):
            self._reported_cut_short.add(point)
            # Left by AllenNLP's own checkpointer (it writes the model state first) when stopped while saving.
            logger.warning("checkpoint e%d_b%d in %s has no training state (saving was cut short); "
                           "the checkpoint before it is used", *point, self._serialization_dir)
        return points - cut_short

    @property
    def _is_primary(self) -> bool:
        if not common_util.is_distributed():
            return self._rank == 0
        procs_per_node = int(os.environ.get("ALLENNLP_PROCS_PER_NODE", dist.get_world_size()))
        return saves_checkpoints(self._rank, procs_per_node)

    def load_checkpoint(self) -> Optional[TrainerCheckpoint]:
        if not common_util.is_distributed() or self.state_is_sharded:
            return super().load_checkpoint()
        mine = max(self._find_all_checkpoints(), default=NO_CHECKPOINT)
        everyone: List[Optional[Tuple[int, int]]] = [None] * dist.get_world_size()
        # Every process of the run calls this once, from the trainer's _maybe_restore_checkpoint.
        dist.all_gather_object(everyone, mine)
        points = [tuple(point) for point in everyone if point is not None]
        agreed = common_checkpoint(points)  # type: ignore[arg-type]
        if agreed == mine:
            return super().load_checkpoint()
        if agreed == NO_CHECKPOINT:
            logger.warning(
                "process %d has checkpoint e%d_b%d in %s, but another node has none: every node "
                "starts training from the beginning", self._rank, *mine, self._serialization_dir,
            )
        else:
            logger.warning(
                "process %d has checkpoint e%d_b%d in %s, but another node's newest is e%d_b%d: "
                "every node resumes from e%d_b%d", self._rank, *mine, self._serialization_dir, *agreed, *agreed,
            )
        if self._is_primary:
            for point in sorted(self._find_all_checkpoints()):
                if point > agreed:
                    logger.warning("removing checkpoint e%d_b%d of %s: its batches are trained again",
                                   *point, self._serialization_dir)
                    self._remove_checkpoint(*point)
        if agreed == NO_CHECKPOINT:
            return None
        model_path = self._model_state_path(*agreed)
        training_state_path = self._training_state_path(*agreed)
        if not (os.path.isfile(model_path) and os.path.isfile(training_state_path)):
            raise RuntimeError(
                f"process {self._rank}: every node must resume from checkpoint "
                f"e{agreed[0]}_b{agreed[1]}, but {model_path} or {training_state_path} is missing "
                "(keep_most_recent_by_count of at least 2 keeps it)"
            )
        # As Checkpointer.load_checkpoint loads (on the CPU), from the agreed files.
        model_state, training_state = (
            torch.load(path, map_location=nn_util.device_mapping(-1)) for path in (model_path, training_state_path)
        )
        return TrainerCheckpoint(model_state, training_state)
