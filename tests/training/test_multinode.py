"""
Pretraining on several nodes (AllenNLP's distributed training with ``num_nodes`` > 1 and
``allennlp train --node-rank R``): which part of the corpus each process reads, against a hand
computation, and what the processes must agree on (the batches per epoch of the learning-rate
schedule, the checkpoint that ``--recover`` resumes from), in a real gloo process group of two
processes on this machine. The 2-node ``allennlp train`` run itself is the slow test
tests/training_configs/test_bilm_multinode.py.
"""
import json
import os
from pathlib import Path
from typing import Dict, List, Tuple

import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from allennlp.common import util as common_util
from allennlp.common.util import SigTermReceived
from allennlp.data.dataset_readers.dataset_reader import WorkerInfo
from allennlp.training.checkpointer import Checkpointer, TrainerCheckpoint

import elmo_plugin.data.dataset_readers.sharded_reader as sharded_reader
from elmo_plugin.data.dataset_readers.bilm_corpus import BilmCorpusReader
from elmo_plugin.training.checkpointer import (
    MultiNodeCheckpointer,
    common_checkpoint,
    saves_checkpoints,
)
from elmo_plugin.training.corpus_schedule import agree_on_batches_per_epoch
from tests.helpers import REPO_ROOT

SAMPLE_TRAIN = REPO_ROOT / "elmo_plugin" / "sample_corpus" / "train.txt"

# (num_nodes, processes per node, loader workers) -> {(node, local rank, worker): line indices}
# of a 10-line file, worked out by hand: the shard of a process's worker is
# (node * processes + local rank) * workers + worker, and shard s of S gets lines s, s + S, ...
HAND_SHARDS: Dict[Tuple[int, int, int], Dict[Tuple[int, int, int], List[int]]] = {
    (2, 1, 1): {(0, 0, 0): [0, 2, 4, 6, 8], (1, 0, 0): [1, 3, 5, 7, 9]},
    (3, 1, 1): {(0, 0, 0): [0, 3, 6, 9], (1, 0, 0): [1, 4, 7], (2, 0, 0): [2, 5, 8]},
    (2, 2, 1): {
        (0, 0, 0): [0, 4, 8],
        (0, 1, 0): [1, 5, 9],
        (1, 0, 0): [2, 6],
        (1, 1, 0): [3, 7],
    },
    (2, 1, 2): {
        (0, 0, 0): [0, 4, 8],
        (0, 0, 1): [1, 5, 9],
        (1, 0, 0): [2, 6],
        (1, 0, 1): [3, 7],
    },
    (2, 2, 2): {
        (0, 0, 0): [0, 8],
        (0, 0, 1): [1, 9],
        (0, 1, 0): [2],
        (0, 1, 1): [3],
        (1, 0, 0): [4],
        (1, 0, 1): [5],
        (1, 1, 0): [6],
        (1, 1, 1): [7],
    },
}


def _fake_process(monkeypatch, num_nodes: int, processes: int, node: int, local_rank: int):
    """torch.distributed as seen in the process (node, local rank) of AllenNLP's training."""
    monkeypatch.setattr(sharded_reader.common_util, "is_distributed", lambda: True)
    world_size = num_nodes * processes
    monkeypatch.setattr(sharded_reader.dist, "get_world_size", lambda *a, **k: world_size)
    # allennlp/commands/train.py, _train_worker: global_rank = node_rank * procs + process_rank.
    global_rank = node * processes + local_rank
    monkeypatch.setattr(sharded_reader.dist, "get_rank", lambda *a, **k: global_rank)


def _line_numbers(instances) -> List[int]:
    return [int(i["tokens"].tokens[0].text[1:]) for i in instances]


@pytest.mark.parametrize("layout", sorted(HAND_SHARDS))
def test_each_process_of_each_node_reads_its_hand_computed_lines(
    tmp_path: Path, monkeypatch, layout
):
    num_nodes, processes, workers = layout
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("".join(f"s{i} x\n" for i in range(10)), encoding="utf-8")
    got = {}
    for node in range(num_nodes):
        for local_rank in range(processes):
            _fake_process(monkeypatch, num_nodes, processes, node, local_rank)
            for worker in range(workers):
                reader = BilmCorpusReader(shuffle=False)
                if workers > 1:
                    reader._set_worker_info(WorkerInfo(workers, worker))
                got[node, local_rank, worker] = _line_numbers(reader.read(str(corpus)))
    assert got == HAND_SHARDS[layout]


def test_files_go_to_nodes_when_there_are_enough(tmp_path: Path, monkeypatch):
    for f in range(4):
        (tmp_path / f"part{f}.txt").write_text(f"s{f} x\n", encoding="utf-8")
    got = []
    for node in range(2):
        _fake_process(monkeypatch, 2, 1, node, 0)
        got.append(_line_numbers(BilmCorpusReader(shuffle=False).read(str(tmp_path / "*.txt"))))
    # Sorted files, file i to shard i % 2 (the line's "s" number here is its file's).
    assert got == [[0, 2], [1, 3]]


def test_two_nodes_get_the_same_number_of_batches_of_the_sample_corpus(monkeypatch):
    """
    bilm.jsonnet's loader: bucket batches of 32 in chunks of 3,200 instances. The sample corpus
    has 4,000 sentences: one process makes ceil(3200 / 32) + ceil(800 / 32) = 125 batches; on
    two nodes each reads 2,000 sentences, one chunk, ceil(2000 / 32) = 63 batches each.
    """
    sizes = []
    for node in range(2):
        _fake_process(monkeypatch, 2, 1, node, 0)
        sizes.append(sum(1 for _ in BilmCorpusReader(shuffle=False).read(str(SAMPLE_TRAIN))))
    assert sizes == [2000, 2000]
    assert [-(-size // 32) for size in sizes] == [63, 63]


def test_which_process_saves_and_prunes_checkpoints():
    # AllenNLP's trainer saves in local rank 0 of every node; so the plugin prunes there too.
    assert [saves_checkpoints(rank, 1) for rank in range(3)] == [True, True, True]
    assert [saves_checkpoints(rank, 2) for rank in range(4)] == [True, False, True, False]
    assert common_checkpoint([(2, 0), (1, 0)]) == (1, 0)
    assert common_checkpoint([(1, 5), (1, 0), (2, 0)]) == (1, 0)
    assert common_checkpoint([(3, 0), (-1, -1)]) == (-1, -1)
    assert Checkpointer.by_name("default") is MultiNodeCheckpointer


# -- in a real gloo process group of two processes (two nodes of one process each) ---------------


def _save(directory: Path, epochs: int, batches: int = 0) -> None:
    weights = {"weight": torch.tensor(float(epochs))}
    torch.save(weights, directory / f"model_state_e{epochs}_b{batches}.th")
    torch.save(
        {"epochs_completed": epochs, "batches_in_epoch_completed": batches},
        directory / f"training_state_e{epochs}_b{batches}.th",
    )


class _Trainer:
    """What `Checkpointer.save_checkpoint` asks of a trainer."""

    def __init__(self, epochs: int) -> None:
        self.epochs = epochs

    def get_checkpoint_state(self) -> TrainerCheckpoint:
        state = {"epochs_completed": self.epochs, "batches_in_epoch_completed": 0}
        return TrainerCheckpoint({"weight": torch.tensor(float(self.epochs))}, state)


def _node(rank: int, port: int, tmp: str) -> None:
    os.environ["ALLENNLP_PROCS_PER_NODE"] = "1"  # as AllenNLP's train worker sets it
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", world_size=2, rank=rank)
    try:
        assert common_util.is_distributed()
        corpus = Path(tmp) / "corpus.txt"
        lines = _line_numbers(BilmCorpusReader(shuffle=False).read(str(corpus)))
        batches = agree_on_batches_per_epoch(63 + rank)  # node 1 has one batch more

        # Node 0 saved checkpoints after epochs 1 and 2; node 1 was killed before saving epoch 2.
        directory = Path(tmp) / f"node{rank}"
        agreed_epochs = MultiNodeCheckpointer(directory).load_checkpoint().trainer_state
        left = sorted(p.name for p in directory.glob("model_state_*.th"))

        # Then both save epochs 2 and 3 again: every node keeps its 2 newest (AllenNLP's
        # Checkpointer pruned only in global rank 0, so node 1 kept all).
        checkpointer = MultiNodeCheckpointer(directory, keep_most_recent_by_count=2)
        for epochs in (2, 3):
            checkpointer.save_checkpoint(_Trainer(epochs))
        kept = sorted(p.name for p in directory.glob("model_state_*.th"))

        # save_every_num_seconds (AllenNLP's Checkpointer refuses it here): rank 0's clock
        # decides, so both save at the same batch although only rank 0's hour has passed.
        timed = MultiNodeCheckpointer(directory, save_every_num_seconds=3600)
        if rank == 0:
            timed._last_save_time -= 7200
        saved_by_time = [timed.maybe_save_checkpoint(_Trainer(5), 4, 7) for _ in range(2)]

        # Node 1 has no checkpoint at all: nobody resumes.
        empty = Path(tmp) / f"empty{rank}"
        if rank == 0:
            _save(empty, 4)
        nothing = MultiNodeCheckpointer(empty).load_checkpoint()
        result = {
            "lines": lines,
            "batches": batches,
            "resumed_at": agreed_epochs["epochs_completed"],
            "left": left,
            "kept": kept,
            "fresh_start": nothing is None,
            "saved_by_time": saved_by_time,
        }
        (Path(tmp) / f"result{rank}.json").write_text(json.dumps(result), encoding="utf-8")
    finally:
        dist.destroy_process_group()


@pytest.mark.slow  # subprocesses: in `make test-all` (CI), kept out of `make test`'s time
def test_two_gloo_processes_agree(tmp_path: Path):
    (tmp_path / "corpus.txt").write_text("".join(f"s{i} x\n" for i in range(10)), encoding="utf-8")
    for rank in range(2):
        (tmp_path / f"node{rank}").mkdir()
        (tmp_path / f"empty{rank}").mkdir()
        _save(tmp_path / f"node{rank}", 1)
    _save(tmp_path / "node0", 2)
    mp.spawn(_node, args=(common_util.find_open_port(), str(tmp_path)), nprocs=2)
    results = [json.loads((tmp_path / f"result{r}.json").read_text()) for r in range(2)]

    # torch.distributed's global rank and world size shard the corpus: disjoint, complete.
    assert [r["lines"] for r in results] == [[0, 2, 4, 6, 8], [1, 3, 5, 7, 9]]
    # The learning-rate schedule: the fewest batches of any process, in both.
    assert [r["batches"] for r in results] == [63, 63]
    # --recover: both resume after epoch 1, the only checkpoint both nodes have; node 0's
    # epoch-2 checkpoint, whose batches are trained again, is gone.
    assert [r["resumed_at"] for r in results] == [1, 1]
    assert [r["left"] for r in results] == [["model_state_e1_b0.th"]] * 2
    assert [r["kept"] for r in results] == [["model_state_e2_b0.th", "model_state_e3_b0.th"]] * 2
    assert [r["fresh_start"] for r in results] == [True, True]
    assert [r["saved_by_time"] for r in results] == [[True, False], [True, False]]
    assert list((tmp_path / "empty0").glob("*.th")) == []


# -- a checkpoint is whole or absent --------------------------------------------------------------


def _stopped_at_the_second_file(monkeypatch) -> None:
    """torch.save as if a SIGTERM arrived while the second file of a checkpoint was written."""
    saved = torch.save
    calls = []

    def save(value, path, *args, **kwargs):
        calls.append(path)
        saved(value, path, *args, **kwargs)
        if len(calls) == 2:
            raise SigTermReceived()

    monkeypatch.setattr(torch, "save", save)


def test_a_checkpoint_stopped_while_saving_leaves_the_one_before_the_newest(tmp_path, monkeypatch):
    checkpointer = MultiNodeCheckpointer(tmp_path)
    checkpointer.save_checkpoint(_Trainer(1))
    with monkeypatch.context() as patch:
        _stopped_at_the_second_file(patch)
        with pytest.raises(SigTermReceived):
            checkpointer.save_checkpoint(_Trainer(2))
    # AllenNLP's wrote model_state_e2_b0.th first, then stopped: --recover failed on the missing file.
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "model_state_e1_b0.th", "training_state_e1_b0.th", "training_state_e2_b0.th",
    ]
    resumed = MultiNodeCheckpointer(tmp_path).load_checkpoint()
    assert resumed.trainer_state["epochs_completed"] == 1
    assert resumed.model_state["weight"].item() == 1.0
    # Saved again after the resumed training, the checkpoint is whole.
    checkpointer.save_checkpoint(_Trainer(2))
    assert MultiNodeCheckpointer(tmp_path).load_checkpoint().model_state["weight"].item() == 2.0


def test_a_model_state_without_its_training_state_is_passed_over_with_a_warning(tmp_path, caplog):
    _save(tmp_path, 1)
    torch.save({"weight": torch.tensor(2.0)}, tmp_path / "model_state_e2_b0.th")  # cut short by AllenNLP's
    checkpointer = MultiNodeCheckpointer(tmp_path)
    with caplog.at_level("WARNING", logger="elmo_plugin.training.checkpointer"):
        assert checkpointer.load_checkpoint().trainer_state["epochs_completed"] == 1
        assert checkpointer.find_latest_checkpoint()[0].endswith("model_state_e1_b0.th")
    warnings = [record.getMessage() for record in caplog.records]
    assert warnings == [f"checkpoint e2_b0 in {tmp_path} has no training state (saving was cut short); "
                        "the checkpoint before it is used"]
    # Saving that point again replaces the lone model state (AllenNLP's keeps a file it finds).
    checkpointer.save_checkpoint(_Trainer(2))
    assert checkpointer.load_checkpoint().model_state["weight"].item() == 2.0
    assert checkpointer.load_checkpoint().trainer_state["epochs_completed"] == 2
