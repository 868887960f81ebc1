"""
The threads ``allennlp train`` uses (`elmo_plugin.common.threads`): the cores that other work
leaves idle, measured on ``/proc/stat`` (here against a hand computation and a real busy
process), at least one; ``OMP_NUM_THREADS`` decides where it is set.
"""
import os
import subprocess
import sys

import pytest
import torch

from elmo_plugin.common import threads


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


@pytest.mark.skipif(not os.path.exists("/proc/stat"), reason="reads /proc/stat (Linux)")
def test_a_busy_process_beside_counts_as_a_busy_core():
    busy_loop = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        assert threads.busy_cores(sample_seconds=1.0) >= 0.7
    finally:
        busy_loop.kill()
        busy_loop.wait()


def test_omp_num_threads_decides_where_it_is_set(monkeypatch):
    saved = torch.get_num_threads()
    try:
        torch.set_num_threads(1)
        monkeypatch.setenv("OMP_NUM_THREADS", "1")
        monkeypatch.setattr(threads, "busy_cores", lambda: pytest.fail("measured the load"))
        assert threads.use_idle_cores() == 1
        monkeypatch.delenv("OMP_NUM_THREADS")
        monkeypatch.setattr(threads, "busy_cores", lambda: 0.0)
        monkeypatch.setattr(threads, "usable_cores", lambda: 64)
        assert threads.use_idle_cores() == min(64, threads._DEFAULT_THREADS)
        monkeypatch.setattr(threads, "busy_cores", lambda: 63.0)
        assert threads.use_idle_cores() == 1 == torch.get_num_threads()
    finally:
        torch.set_num_threads(saved)


@pytest.mark.parametrize("value, expected", [("4", 4), (" 2 ", 2), ("0", None), ("many", None),
                                             ("", None)])
def test_the_environment_variable_is_read_as_a_positive_number(value, expected, monkeypatch):
    monkeypatch.setenv("OMP_NUM_THREADS", value)
    assert threads.threads_from_environment() == expected
