"""
The malloc settings for training: freed blocks are reused instead of being faulted in afresh.
Measured by page faults in a child process, so that the test run's own allocator is untouched.
"""
import subprocess
import sys

import pytest

from elmo_plugin.common import memory as memory_allocator
from elmo_plugin.training import callbacks
from tests.helpers import REPO_ROOT

CHILD = """
import resource, sys, torch
from elmo_plugin.common.memory import keep_freed_memory_for_reuse
if sys.argv[1] == "keep":
    assert keep_freed_memory_for_reuse()
def faults_of_one_step():
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    activations = torch.ones(64 * 1024 * 1024 // 4)  # 64 MB, over glibc's largest mmap threshold
    del activations
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before
faults_of_one_step()
print(min(faults_of_one_step() for _ in range(3)))
"""


def faults_per_step(mode: str) -> int:
    output = subprocess.run(
        [sys.executable, "-c", CHILD, mode], capture_output=True, text=True, check=True
    ).stdout
    return int(output.split()[-1])


@pytest.mark.skipif(memory_allocator._LIBC is None, reason="glibc only")
@pytest.mark.slow  # subprocesses: in `make test-all` (CI), kept out of `make test`'s time
def test_training_allocator_reuses_freed_blocks():
    # 64 MB is 16,384 pages: by default every step faults them all in again.
    assert faults_per_step("default") > 10_000
    assert faults_per_step("keep") < 1_000


def test_training_configs_use_the_callback():
    from allennlp.training.callbacks.callback import TrainerCallback

    assert TrainerCallback.by_name("keep_freed_memory") is callbacks.KeepFreedMemoryCallback
    configs = REPO_ROOT / "training_configs"
    assert '{ type: "keep_freed_memory" }' in (configs / "bilm_common.libsonnet").read_text()
