"""
The threads the plugin's work runs on (`elmo_plugin.common.threads`): one for a call of a few
rows; else the cores that other work leaves idle, read from ``/proc/stat`` less this process's own
CPU time (against hand computations, fakes and a real busy process), at least one, re-read between
calls and training batches; ``OMP_NUM_THREADS`` and `fix_threads` (``--threads``, ``threads=``)
decide where they are set.
"""
import os
import subprocess
import sys
import time

import pytest
import torch

from elmo_plugin.common import threads
from elmo_plugin.elmo_embedder import ElmoEmbedder
from tests.helpers import FIXTURE_OPTIONS, FIXTURE_WEIGHTS


@pytest.mark.parametrize("cores, busy, expected", [
    (2, 0.0, 2),     # quiet
    (2, 0.2, 2),     # a shell, a terminal: noise
    (2, 0.3, 1),     # another job on part of a core
    (2, 1.0, 1),     # another job on a core: the one left
    (2, 2.0, 1),     # every core taken: still one
    (16, 3.1, 13),   # three jobs and some noise on sixteen cores
    (1, 0.0, 1),
])
def test_the_idle_cores_at_least_one(cores, busy, expected):
    assert threads.threads_for_load(cores, busy) == expected


def test_the_busy_share_is_read_from_proc_stat(tmp_path):
    # Two readings of /proc/stat, by hand: cpu0 went from 100 idle of 200 ticks to 190 idle of
    # 300 (90 of 100 idle: 0.1 busy), cpu1 from 50 of 200 to 50 of 300 (all 100 busy: 1.0).
    def stat(*cores):
        lines = ["cpu  1 2 3 4 5 6 7 8 9 10"]
        for number, (user, idle) in enumerate(cores):
            lines.append(f"cpu{number} {user} 0 0 {idle} 0 0 0 0 0 0")
        lines.append("intr 12345")
        path = tmp_path / f"stat{len(list(tmp_path.iterdir()))}"
        path.write_text("\n".join(lines) + "\n", encoding="ascii")
        return threads.cpu_times(str(path))

    before = stat((100, 100), (150, 50))
    after = stat((110, 190), (250, 50))
    assert before == {0: (100, 200), 1: (50, 200)}
    assert threads.busy_share(before, after, [0, 1]) == pytest.approx(1.1)
    assert threads.busy_share(before, after, [1]) == pytest.approx(1.0)


@pytest.mark.parametrize("value, expected", [("4", 4), (" 2 ", 2), ("0", None), ("many", None),
                                             ("", None)])
def test_the_environment_variable_is_read_as_a_positive_number(value, expected, monkeypatch):
    monkeypatch.setenv("OMP_NUM_THREADS", value)
    assert threads.threads_from_environment() == expected


class FakeMachine:
    """Two cores' ``/proc/stat``, this process's CPU seconds and a clock, all set by hand."""

    def __init__(self) -> None:
        self.now, self.own, self.ticks = 0.0, 0.0, {0: [0, 0], 1: [0, 0]}

    def advance(self, seconds: float, busy: float, own: float) -> None:
        """``seconds`` pass with ``busy`` cores' worth of work, ``own`` of it this process's."""
        self.now += seconds
        self.own += own * seconds
        for core, share in enumerate((min(busy, 1.0), max(busy - 1.0, 0.0))):
            self.ticks[core][0] += round(100 * seconds * (1 - share))  # idle ticks
            self.ticks[core][1] += round(100 * seconds)

    def watch(self) -> threads.LoadWatch:
        return threads.LoadWatch(interval=1.0, cores=[0, 1], clock=lambda: self.now, own_seconds=lambda: self.own,
                                 read_times=lambda: {core: tuple(ticks) for core, ticks in self.ticks.items()})


def test_the_watch_counts_others_work_not_this_process_s_own():
    machine = FakeMachine()
    watch = machine.watch()
    assert watch.idle_cores() == 2  # nothing read yet: every core
    machine.advance(2.0, busy=2.0, own=2.0)  # this process alone, on both cores
    assert watch.idle_cores() == 2
    machine.advance(2.0, busy=2.0, own=1.0)  # another job arrived on one core
    assert watch.idle_cores() == 1
    machine.advance(0.5, busy=1.0, own=1.0)  # the other job ended, but within the interval
    assert watch.idle_cores() == 1  # the last reading stands
    machine.advance(1.5, busy=1.0, own=1.0)
    assert watch.idle_cores() == 2


@pytest.mark.skipif(not os.path.exists("/proc/stat") or threads.usable_cores() < 2,
                    reason="reads /proc/stat (Linux), two cores or more")
def test_a_busy_process_beside_counts_as_a_busy_core_and_this_process_s_spinning_does_not():
    watch = threads.LoadWatch(interval=0.0)
    busy_loop = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        watch.idle_cores()
        started = time.monotonic()
        while time.monotonic() - started < 1.0:
            pass  # this process busy too: its own time is not another job's
        assert watch.idle_cores() <= threads.usable_cores() - 1
    finally:
        busy_loop.kill()
        busy_loop.wait()


class FixedWatch:
    def __init__(self, idle: int) -> None:
        self.idle = idle

    def idle_cores(self) -> int:
        return self.idle


@pytest.fixture
def two_threads_chosen_by_the_plugin(monkeypatch):
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    monkeypatch.setattr(threads, "_FIXED", None)
    monkeypatch.setattr(threads, "_WATCH", FixedWatch(2))
    saved = torch.get_num_threads()
    torch.set_num_threads(2)
    yield
    torch.set_num_threads(saved)


@pytest.mark.usefixtures("two_threads_chosen_by_the_plugin")
@pytest.mark.parametrize("rows, idle, expected", [(1, 2, 1), (7, 2, 1), (8, 2, 2), (64, 2, 2), (64, 1, 1),
                                                  (64, 16, 2)])  # never more than PyTorch's setting
def test_a_call_of_few_rows_runs_on_one_thread_else_on_the_idle_cores(rows, idle, expected):
    with threads.threads_for_call(rows, FixedWatch(idle)) as used:
        assert used == expected == torch.get_num_threads()
    assert torch.get_num_threads() == 2


@pytest.mark.usefixtures("two_threads_chosen_by_the_plugin")
def test_omp_num_threads_and_fix_threads_win(monkeypatch):
    monkeypatch.setenv("OMP_NUM_THREADS", "2")
    with threads.threads_for_call(1) as used:
        assert used == 2 == torch.get_num_threads()
    assert threads.follow_the_load(2, FixedWatch(1)) == 2
    monkeypatch.delenv("OMP_NUM_THREADS")
    threads.fix_threads(2)
    with threads.threads_for_call(1) as used:
        assert used == 2
    with pytest.raises(ValueError, match="threads must be at least 1, not 0"):
        threads.fix_threads(0)


@pytest.mark.usefixtures("two_threads_chosen_by_the_plugin")
def test_training_follows_the_load_between_batches():
    assert threads.follow_the_load(2, FixedWatch(1)) == 1 == torch.get_num_threads()
    assert threads.follow_the_load(2, FixedWatch(2)) == 2 == torch.get_num_threads()
    assert threads.follow_the_load(1, FixedWatch(2)) == 1  # at most the trainer's setting


@pytest.mark.usefixtures("two_threads_chosen_by_the_plugin")
def test_the_embedder_runs_one_sentence_on_one_thread_and_a_batch_on_the_idle_cores(monkeypatch):
    embedder = ElmoEmbedder(FIXTURE_OPTIONS, FIXTURE_WEIGHTS)
    seen = []
    embedder.elmo_bilm.register_forward_pre_hook(lambda module, inputs: seen.append(torch.get_num_threads()))
    embedder.embed_batch([["One", "sentence", "."]])
    embedder.embed_batch([["A", "batch", "."]] * 8)
    monkeypatch.setattr(threads, "_WATCH", FixedWatch(1))  # another job took a core
    embedder.embed_batch([["A", "batch", "."]] * 8)
    assert seen == [1, 2, 1]
    assert torch.get_num_threads() == 2
    fixed = ElmoEmbedder(FIXTURE_OPTIONS, FIXTURE_WEIGHTS, threads=2)
    fixed.elmo_bilm.register_forward_pre_hook(lambda module, inputs: seen.append(torch.get_num_threads()))
    fixed.embed_batch([["One", "."]])
    assert seen[-1] == 2  # threads=2 fixed the number


def test_the_trainer_follows_the_load_before_every_batch(tmp_path, monkeypatch):
    from allennlp.commands.train import train_model_from_file

    from elmo_plugin.training import trainer
    from tests.training.test_trainer import _config

    calls = []
    monkeypatch.setattr(trainer, "follow_the_load", lambda most: calls.append(most) or most)
    train_model_from_file(str(_config(tmp_path)), str(tmp_path / "run"), overrides='{"trainer.callbacks": []}')
    assert len(calls) >= 3 and set(calls) == {torch.get_num_threads()}
