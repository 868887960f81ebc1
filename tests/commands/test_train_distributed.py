"""
``allennlp train`` on several nodes without a silent hang (`elmo_plugin.commands.train_distributed`):

- a ``distributed`` block with ``master_address``/``master_port`` (ignored by AllenNLP 2.10), or
  with more than one node and no ``primary_port``, is one line before anything starts (with
  ``--recover`` too);
- a process that waits for its peers longer than ``ELMO_PLUGIN_RENDEZVOUS_TIMEOUT`` seconds says
  so in one line and exits: the rendezvous alone (a process of a world of two whose peer never
  comes), and a node of a 2-node ``allennlp train`` started alone (slow).
"""
import json
import os
import socket
import subprocess
import sys
import time

import pytest

from tests.commands.test_user_mistakes import run_allennlp
from tests.helpers import CONFIG_DIR, REPO_ROOT, installed_allennlp, installed_environment

BILM = CONFIG_DIR / "bilm.jsonnet"


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@pytest.mark.parametrize("recover", [False, True])
@pytest.mark.parametrize("distributed, message", [
    ({"cuda_devices": [-1], "num_nodes": 2, "master_address": "node0", "master_port": 29500},
     "distributed.master_address, distributed.master_port: not read; AllenNLP 2.10 reads "
     "primary_address/primary_port (each node would wait for the others at 127.0.0.1 on a port of "
     "its own): rename them"),
    ({"cuda_devices": [-1], "num_nodes": 2, "primary_address": "127.0.0.1"},
     "distributed.num_nodes is 2 but distributed.primary_port is missing: AllenNLP 2.10 reads "
     "primary_address/primary_port, and without a port each node picks its own and waits for the "
     "others forever; give both, the same on every node"),
])
def test_a_distributed_block_that_would_hang_is_refused_before_anything_starts(
    distributed, message, recover, tmp_path, capsys, monkeypatch
):
    run = tmp_path / "run"
    if recover:
        run.mkdir()
    started = time.monotonic()
    status, out, err = run_allennlp(
        ["train", BILM, "-s", run, "-o", json.dumps({"distributed": distributed})]
        + (["--recover"] if recover else []),
        capsys, monkeypatch,
    )
    assert status == 1
    assert (out, err) == ("", f"allennlp train: error: {message}\n")
    assert time.monotonic() - started < 30
    assert os.listdir(tmp_path) == (["run"] if recover else [])


def test_one_node_without_a_port_is_accepted():
    from elmo_plugin.commands.train_distributed import check_distributed

    check_distributed({"distributed": {"cuda_devices": [-1, -1]}})
    check_distributed({"distributed": {"cuda_devices": [-1], "num_nodes": 2, "primary_port": 29500}})
    check_distributed({})


@pytest.mark.slow  # subprocesses: in `make test-all` (CI), kept out of `make test`'s time
def test_a_process_whose_peer_never_comes_gives_up_in_one_line(tmp_path):
    port = free_port()
    # What AllenNLP's worker does once it has imported its plugins: rank 1 of 2 joins the primary,
    # which nobody started.
    code = (
        "import elmo_plugin\n"
        "from allennlp.commands import train\n"
        f"train.dist.init_process_group(backend='gloo', init_method='tcp://127.0.0.1:{port}', "
        "world_size=2, rank=1)\n"
        "print('joined')\n"
    )
    environment = {**os.environ, "PYTHONPATH": str(REPO_ROOT), "ELMO_PLUGIN_RENDEZVOUS_TIMEOUT": "3"}
    result = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=environment,
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 1
    assert result.stdout == ""
    assert result.stderr.splitlines()[-1] == (
        f"allennlp train: error: process 1 of 2 waited 3 s at 127.0.0.1:{port} for the other "
        "processes and gave up: start the same command on every node, each with its --node-rank, "
        "and give every node the same distributed.primary_address and primary_port "
        "(ELMO_PLUGIN_RENDEZVOUS_TIMEOUT sets the wait)"
    )


def test_the_rendezvous_timeout_must_be_a_number_of_seconds(monkeypatch):
    from allennlp.common.checks import ConfigurationError

    from elmo_plugin.commands.train_distributed import rendezvous_timeout

    monkeypatch.delenv("ELMO_PLUGIN_RENDEZVOUS_TIMEOUT", raising=False)
    assert rendezvous_timeout() == 600
    monkeypatch.setenv("ELMO_PLUGIN_RENDEZVOUS_TIMEOUT", "2.5")
    assert rendezvous_timeout() == 2.5
    monkeypatch.setenv("ELMO_PLUGIN_RENDEZVOUS_TIMEOUT", "soon")
    with pytest.raises(ConfigurationError, match="must be a positive number of seconds"):
        rendezvous_timeout()


@pytest.mark.slow  # one node of two started: AllenNLP's launcher, then its worker
def test_a_node_started_alone_stops_with_one_line(tmp_path):
    overrides = {"trainer.num_epochs": 1,
                 "distributed": {"cuda_devices": [-1], "num_nodes": 2, "primary_port": free_port()}}
    started = time.monotonic()
    result = subprocess.run(
        installed_allennlp(tmp_path / "env")
        + ["train", str(BILM), "-s", str(tmp_path / "node1"), "-o", json.dumps(overrides),
           "--node-rank", "1"],
        cwd=tmp_path, capture_output=True, text=True, timeout=600,
        env=installed_environment(tmp_path / "home", OMP_NUM_THREADS="1",
                                  ELMO_PLUGIN_RENDEZVOUS_TIMEOUT="5"),
    )
    assert result.returncode == 1
    assert "Traceback" not in result.stderr
    lines = [line for line in result.stderr.splitlines() if line.startswith("allennlp train")]
    assert lines[0].startswith("allennlp train: error: process 1 of 2 waited 5 s at 127.0.0.1:")
    assert lines[-1] == ("allennlp train: error: training process 0 of this node exited with "
                         "status 1")
    assert time.monotonic() - started < 240
