"""`Heartbeats` in one process: two ranks' watchers on a temporary directory, short timeouts."""
import time

import pytest
from allennlp.common.checks import ConfigurationError

from elmo_plugin.embedding_output.heartbeats import Heartbeats


def watchers(tmp_path, token="run-1"):
    return [
        Heartbeats(str(tmp_path), rank, 2, token, timeout_s=0.5, interval_s=0.05, grace_s=60)
        for rank in (0, 1)
    ]


def wait_for_problem(heartbeats, seconds=5.0):
    deadline = time.monotonic() + seconds
    while heartbeats.problem is None and time.monotonic() < deadline:
        time.sleep(0.02)
    return heartbeats.problem


def test_a_silent_rank_is_named(tmp_path):
    first, second = watchers(tmp_path)
    first.start(), second.start()
    time.sleep(0.3)
    assert first.problem is None and second.problem is None
    second._stop.set()  # rank 1's thread ends: its file stops changing, as if it were killed
    problem = wait_for_problem(first)
    assert problem is not None and problem.startswith("rank 1 (pid ")
    assert "no heartbeat for 0.5 s" in problem
    with pytest.raises(ConfigurationError, match="rank 1"):
        first.raise_if_problem()
    first.stop()


def test_a_failed_rank_is_named_with_its_message(tmp_path):
    first, second = watchers(tmp_path)
    first.start(), second.start()
    second.mark_failed("cannot write the shard X: No space left on device")
    problem = wait_for_problem(first)
    assert "rank 1" in problem and "failed: cannot write the shard X" in problem
    first.stop(), second.stop()


def test_done_ranks_are_not_waited_for_and_old_runs_are_ignored(tmp_path):
    # A file from an earlier run (another token) that says "done" does not count.
    old = Heartbeats(str(tmp_path), 1, 2, "run-0")
    old.mark_done()
    first, second = watchers(tmp_path)
    first.start()
    time.sleep(0.2)
    assert not first.all_done()
    second.start()
    second.set_counts(7, 3)
    second.mark_done()
    second.stop()
    time.sleep(1.0)  # twice the timeout: a done rank stops beating without being a problem
    assert first.all_done() and first.problem is None
    assert first.others()[1]["sentences"] == 7 and first.others()[1]["reused"] == 3
    first.stop()
