"""
AllenNLP's ``default`` checkpointer, made right for training on several nodes.

In AllenNLP 2.10's distributed training (``"distributed": {"num_nodes": M, ...}`` and
``allennlp train --node-rank R``) every node has its own serialization directory, and the first
process of each node (local rank 0) saves the checkpoints there: the same model and trainer
state on every node, since DDP keeps the weights equal. Two things of AllenNLP's
`Checkpointer` assume one node:

- it prunes old checkpoints (``keep_most_recent_by_count``, default 2) only in the process of
  global rank 0, so every other node kept every checkpoint of the run (one per epoch, or one
  per ``save_every_num_batches``: disks of the other nodes fill up);
- ``allennlp train --recover`` makes each node load the newest checkpoint of its own directory.
  A node killed between the moment node 0 saved a checkpoint and the moment it saved the same
  one itself has an older newest checkpoint; the nodes would then resume at different points,
  which skips different batches on each and ends in a hang or in diverged weights.

`MultiNodeCheckpointer`, registered as ``default`` in AllenNLP's place (same parameters, same
files), prunes in the first process of every node, and on ``--recover`` the processes agree on
the newest checkpoint that every node has and all resume from it; a node's later checkpoints,
of batches that will now be trained again, are removed, with a warning that says so.

It also accepts ``save_every_num_seconds`` in distributed training, which AllenNLP's refuses
("not supported in distributed training"): the biLM configs' ``checkpoint_seconds`` (in
``bilm_small`` and ``bilm_original``) would otherwise stop every multi-node run before its first
batch. The processes must save at the same batch, and their clocks do not agree, so the clock of
global rank 0 decides for all: after every batch one all-reduce of a single number tells the
others (AllenNLP's trainer already does one per batch to stop an epoch together).

On one node, or without ``torch.distributed``, it behaves exactly as AllenNLP's.
"""
import logging
import os
import time
from typing import List, Optional, Tuple, Union

import torch
import torch.distributed as dist
from allennlp.common import util as common_util
from allennlp.nn import util as nn_util
from allennlp.training.checkpointer import Checkpointer, TrainerCheckpoint
from allennlp.training.trainer import Trainer

from elmo_plugin.common.registration import replace_registration

logger = logging.getLogger(__name__)

# (epochs completed, batches completed in the epoch) of a process without any checkpoint.
NO_CHECKPOINT = (-1, -1)


def saves_checkpoints(global_rank: int, procs_per_node: int) -> bool:
    """
    Whether the process of ``global_rank`` writes the checkpoints of its node: AllenNLP's trainer
    saves in local rank 0 of each node, and numbers processes ``node_rank * procs_per_node +
    local_rank``.
    """
    return global_rank % max(procs_per_node, 1) == 0


def common_checkpoint(points: List[Tuple[int, int]]) -> Tuple[int, int]:
    """The point every process can resume from: the earliest of the processes' newest points."""
    return min(points)


@replace_registration(Checkpointer, "default")
class MultiNodeCheckpointer(Checkpointer):
    """
    AllenNLP's `Checkpointer` (same parameters and files) that prunes old checkpoints on every
    node and, in distributed training, resumes all processes from the newest checkpoint that
    every node has (module documentation).
    """

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

    def maybe_save_checkpoint(
        self, trainer: Trainer, num_epochs_completed: int, num_batches_in_epoch_completed: int
    ) -> bool:
        if self._seconds_by_rank_0 is not None:
            due = self._rank == 0 and time.time() - self._last_save_time >= self._seconds_by_rank_0
            # Every process calls this after every batch it trains, and at the end of each epoch.
            if dist.get_backend() == "nccl":
                device = torch.device("cuda", torch.cuda.current_device())
            else:
                device = torch.device("cpu")
            decision = torch.tensor(int(due), device=device)
            dist.all_reduce(decision, dist.ReduceOp.MAX)
            if decision.item():
                self.save_checkpoint(trainer)
                return True
        return super().maybe_save_checkpoint(
            trainer, num_epochs_completed, num_batches_in_epoch_completed
        )

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
                "starts training from the beginning",
                self._rank,
                *mine,
                self._serialization_dir,
            )
        else:
            logger.warning(
                "process %d has checkpoint e%d_b%d in %s, but another node's newest is e%d_b%d: "
                "every node resumes from e%d_b%d",
                self._rank,
                *mine,
                self._serialization_dir,
                *agreed,
                *agreed,
            )
        if self._is_primary:
            for point in sorted(self._find_all_checkpoints()):
                if point > agreed:
                    logger.warning(
                        "removing checkpoint e%d_b%d of %s: its batches are trained again",
                        *point,
                        self._serialization_dir,
                    )
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
        return self._load_files(model_path, training_state_path)

    @staticmethod
    def _load_files(model_path: str, training_state_path: str) -> TrainerCheckpoint:
        """Loads as `Checkpointer.load_checkpoint` does (on the CPU), from the given files."""
        model_state = torch.load(model_path, map_location=nn_util.device_mapping(-1))
        training_state = torch.load(training_state_path, map_location=nn_util.device_mapping(-1))
        return TrainerCheckpoint(model_state, training_state)
