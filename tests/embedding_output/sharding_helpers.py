"""Helpers of the sharded-run tests: torchrun commands, free ports, a corpus, output equality."""
import os
import random
import socket
import subprocess
import sys
from pathlib import Path
from typing import Dict, List, Sequence

import h5py
import numpy as np

from tests.helpers import FIXTURE_OPTIONS, FIXTURE_WEIGHTS, REPO_ROOT

MODEL_ARGS = ["--options-file", str(FIXTURE_OPTIONS), "--weight-file", str(FIXTURE_WEIGHTS)]
ALLENNLP = str(Path(sys.executable).parent / "allennlp")
WORDS = "the cat sat on mat dog ran far away 밥 을 hello world ELMo vectors , . !".split()


def corpus(count: int, seed: int = 0, repeat_every: int = 0) -> List[str]:
    """Sentences of 1 to 20 tokens; with ``repeat_every``, every such line repeats an earlier one
    (``sentence_to_index`` then maps it to its last line)."""
    generator = random.Random(seed)
    lines: List[str] = []
    for index in range(count):
        if repeat_every and index and index % repeat_every == 0:
            lines.append(lines[generator.randrange(index)])
        else:
            lines.append(" ".join(generator.choice(WORDS) for _ in range(generator.randint(1, 20))))
    return lines


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def environment(**extra: str) -> Dict[str, str]:
    env = dict(os.environ)
    for name in ("WORLD_SIZE", "RANK", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT"):
        env.pop(name, None)
    env.update(
        PYTHONPATH=str(REPO_ROOT),
        OMP_NUM_THREADS="1",
        ELMO_HEARTBEAT_TIMEOUT="5",
        **extra,
    )
    return env


def torchrun_command(
    elmo_args: Sequence[str], nproc: int = 2, nnodes: int = 1, node_rank: int = 0, port: int = 0
) -> List[str]:
    """``python -m torch.distributed.run ... allennlp elmo ELMO_ARGS`` (the fixture model)."""
    launcher = [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", str(nproc)]
    launcher += ["--master-addr", "127.0.0.1", "--master-port", str(port or free_port())]
    if nnodes > 1:
        launcher += ["--nnodes", str(nnodes), "--node-rank", str(node_rank)]
    return launcher + [ALLENNLP, "elmo", *map(str, elmo_args), *MODEL_ARGS]


def torchrun(
    elmo_args: Sequence[str], nproc: int = 2, timeout: float = 300
) -> subprocess.CompletedProcess:
    return subprocess.run(
        torchrun_command(elmo_args, nproc),
        capture_output=True,
        text=True,
        env=environment(),
        timeout=timeout,
        cwd=str(REPO_ROOT),
    )


def assert_same_output(expected: Path, actual: Path) -> None:
    """The same datasets, shapes, types and (bitwise) values, read with plain h5py."""
    with h5py.File(expected, "r") as left, h5py.File(actual, "r") as right:
        assert sorted(left) == sorted(right)
        for key in left:
            a, b = left[key][()], right[key][()]
            assert a.dtype == b.dtype, key
            if a.dtype.kind in "fi":
                np.testing.assert_array_equal(a, b, err_msg=key)
            else:
                assert (a == b).all(), key
