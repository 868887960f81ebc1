"""
``allennlp elmo`` under torchrun with several processes (gloo on the CPU, the fixture model):
``--nproc-per-node 2`` and ``--nnodes 2`` (two torchrun agents on this machine) write an output
equal to a single process's in both layouts; a rank killed with ``kill -9`` mid-run, then the
same command again, completes with an equal output and reports what it reused; a rank lost on
another node stops the others within seconds, naming it. Each starts AllenNLP in 2-4 processes
(about 20 s of imports each on a busy 2-core machine), hence slow.
"""
import json
import os
import re
import signal
import subprocess
import time
from pathlib import Path

import pytest

from tests.embedding_output.sharding_helpers import (
    assert_same_output,
    corpus,
    environment,
    free_port,
    torchrun,
    torchrun_command,
)
from tests.helpers import REPO_ROOT, run_elmo, write_lines

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("single_thread")]


def plain_run(input_file: Path, output: Path, *args) -> Path:
    assert run_elmo(input_file, output, *args) == 0
    return output


@pytest.mark.parametrize("layout", ["per-sentence", "flat"])
def test_two_processes_equal_one(tmp_path, layout):
    input_file = write_lines(tmp_path / "in.txt", corpus(300, repeat_every=23))
    args = ["--all", "--batch-size", "2", "--layout", layout, "--shard-tokens", "300"]
    expected = plain_run(input_file, tmp_path / "plain.hdf5", *args)
    output = tmp_path / "out.hdf5"
    # --file-friendly-logging: with stderr redirected the console shows no bar otherwise.
    result = torchrun([input_file, output, *args, "--file-friendly-logging"])
    assert result.returncode == 0, result.stderr[-3000:]
    assert "300 sentences by 2 processes" in result.stdout
    assert_same_output(expected, output)
    # One progress bar: rank 0's, for all 300 sentences.
    assert result.stderr.count("300/300") >= 1


def test_an_ordinary_input_is_split_between_two_processes(tmp_path):
    # 2,050 sentences at the default batch size and --shard-tokens: far fewer tokens than a
    # shard, and a first chunk of 2,048 lines. Each process still embeds its half of the tokens,
    # into its own shard.
    input_file = write_lines(tmp_path / "in.txt", corpus(2050, seed=4))
    args = ["--top", "--layout", "flat"]
    expected = plain_run(input_file, tmp_path / "plain.hdf5", *args)
    output = tmp_path / "out.hdf5"
    result = torchrun([input_file, output, *args])
    assert result.returncode == 0, result.stderr[-3000:]
    assert "2050 sentences by 2 processes" in result.stdout
    assert len(list(Path(f"{output}.shards").glob("lines-*.hdf5"))) == 2
    for rank in (0, 1):
        [count] = re.findall(rf"rank {rank}: (\d+) sentences in 1 shards", result.stderr)
        assert 0 < int(count) < 2050
    assert_same_output(expected, output)


def test_two_nodes_equal_one_process(tmp_path):
    input_file = write_lines(tmp_path / "in.txt", corpus(300))
    args = ["--top", "--batch-size", "2", "--layout", "flat", "--float16", "--shard-tokens", "300"]
    expected = plain_run(input_file, tmp_path / "plain.hdf5", *args)
    output = tmp_path / "out.hdf5"
    port = free_port()
    nodes = [
        subprocess.Popen(
            torchrun_command(
                [input_file, output, *args], nproc=1, nnodes=2, node_rank=rank, port=port
            ),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=environment(),
            cwd=str(REPO_ROOT),
        )
        for rank in (0, 1)
    ]
    outputs = [node.communicate(timeout=300) for node in nodes]
    errors = outputs[0][1][-3000:] + outputs[1][1][-3000:]
    assert [node.returncode for node in nodes] == [0, 0], errors
    assert "300 sentences by 2 processes" in outputs[0][0]
    assert_same_output(expected, output)


def _wait_for(condition, timeout: float, what: str):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


def _rank_pid_once_working(shards: Path, rank: int) -> int:
    """The pid of ``rank`` once it has embedded some sentences (from its heartbeat file)."""

    def working():
        try:
            beat = json.loads((shards / f".rank-{rank:05d}.heartbeat").read_text())
        except (OSError, ValueError):
            return None
        return beat["pid"] if beat["sentences"] > 0 and beat["state"] == "running" else None

    return _wait_for(working, 240, f"rank {rank} to start embedding")


def test_kill_one_rank_then_rerun_resumes(tmp_path):
    lines = corpus(2400)
    input_file = write_lines(tmp_path / "in.txt", lines)
    args = ["--top", "--batch-size", "2", "--layout", "flat", "--shard-tokens", "500"]
    output = tmp_path / "out.hdf5"
    shards = Path(f"{output}.shards")
    first = subprocess.Popen(
        torchrun_command([input_file, output, *args]),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=environment(),
        cwd=str(REPO_ROOT),
    )
    try:
        pid = _rank_pid_once_working(shards, 1)
        _wait_for(lambda: len(list(shards.glob("lines-*.hdf5"))) >= 2, 120, "two finished shards")
        os.kill(pid, signal.SIGKILL)
        _, stderr = first.communicate(timeout=120)
    finally:
        first.kill()
    assert first.returncode != 0
    assert not output.exists()  # nothing under the output's name
    finished = len(list(shards.glob("lines-*.hdf5")))
    assert 0 < finished

    result = torchrun([input_file, output, *args])
    assert result.returncode == 0, result.stderr[-3000:]
    assert "reused from an earlier run" in result.stdout
    expected = plain_run(input_file, tmp_path / "plain.hdf5", *args)
    assert_same_output(expected, output)
    assert not list(shards.glob(".*"))  # no temporary or heartbeat files left


def test_rank_lost_on_another_node_stops_the_others(tmp_path):
    # Two torchrun agents: killing node 1's worker leaves node 0's agent unaware; rank 0 must
    # notice by itself (heartbeats, ELMO_HEARTBEAT_TIMEOUT=5) and stop, naming rank 1.
    input_file = write_lines(tmp_path / "in.txt", corpus(4000))
    output = tmp_path / "out.hdf5"
    args = ["--top", "--batch-size", "2", "--layout", "flat", "--shard-tokens", "500"]
    port = free_port()
    nodes = [
        subprocess.Popen(
            torchrun_command(
                [input_file, output, *args], nproc=1, nnodes=2, node_rank=rank, port=port
            ),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=environment(),
            cwd=str(REPO_ROOT),
        )
        for rank in (0, 1)
    ]
    try:
        pid = _rank_pid_once_working(Path(f"{output}.shards"), 1)
        os.kill(pid, signal.SIGKILL)
        killed = time.monotonic()
        _, stderr = nodes[0].communicate(timeout=60)
        stopped_after = time.monotonic() - killed
    finally:
        for node in nodes:
            node.kill()
    assert nodes[0].returncode != 0
    assert "rank 1" in stderr and "no heartbeat" in stderr
    assert stopped_after < 30
    assert not output.exists()
