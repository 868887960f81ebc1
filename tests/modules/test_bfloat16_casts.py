"""
With narrower products (the bfloat16 plan), no conversion runs per time step: a conversion is a
kernel of its own, which a launch-bound GPU step pays in full at every step. Counted as the
dispatcher sees the operators (`torch.utils._python_dispatch.TorchDispatchMode`), in one forward
and backward of a small biLM at two sequence lengths: the count must be the same at both.
(Before, each LSTM layer and direction converted 3 tensors a step in forward and 4 in backward:
h and tanh(c) o to bfloat16, the projection back to float32; the gradients likewise.)
"""
from collections import Counter
from typing import Tuple

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode

from elmo_plugin.modules.execution.plan import ExecutionPlan
from tests.helpers import make_random_bilm

BFLOAT16 = ExecutionPlan(torch.device("cpu"), products=torch.bfloat16)

pytestmark = pytest.mark.usefixtures("single_thread")


class FloatConversions(TorchDispatchMode):
    """Counts the operators that convert a tensor from one floating dtype to another: ``to``
    (as ``_to_copy``) and ``copy_`` between dtypes, by (operator, from, to)."""

    def __init__(self) -> None:
        super().__init__()
        self.counts: Counter = Counter()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        result = func(*args, **(kwargs or {}))
        name = func.overloadpacket.__name__
        if name in ("_to_copy", "copy_"):
            source, target = (args[0], result) if name == "_to_copy" else (args[1], args[0])
            if (isinstance(source, torch.Tensor) and source.is_floating_point()
                    and target.is_floating_point() and source.dtype != target.dtype):
                self.counts[(name, source.dtype, target.dtype)] += 1
        return result


def conversions(num_steps: int, training: bool) -> Tuple[int, Counter]:
    """The floating conversions of one biLM call (and its backward, in training) over a batch of
    ``num_steps`` tokens, one row shorter (so that rows end at different steps)."""
    bilm = make_random_bilm().train(training)
    generator = torch.Generator().manual_seed(num_steps)
    ids = torch.randint(1, 200, (3, num_steps, 50), generator=generator)
    ids[2, num_steps // 2 :] = 0
    with FloatConversions() as counter, torch.set_grad_enabled(training):
        activations = bilm(ids, BFLOAT16)["activations"]
        if training:
            sum((layer * layer).sum() for layer in activations).backward()
    return sum(counter.counts.values()), counter.counts


@pytest.mark.parametrize("training", [True, False])
def test_bfloat16_converts_no_tensor_per_time_step(training):
    short, short_counts = conversions(5, training)
    long, long_counts = conversions(20, training)
    assert short > 0  # it counts: the weights and the layers' inputs and outputs are converted
    per_step = long_counts - short_counts
    if not training:
        # One kept on purpose, on a CPU only: inference there widens each step's bfloat16 input
        # gates into the step's float32 work buffer (`recurrence_loop` says why), one per layer
        # and direction (2 x 2) a step; on a GPU `lstm_layer.run_layer` widens them once.
        assert per_step == Counter({("copy_", torch.bfloat16, torch.float32): 4 * 15})
        return
    assert long == short, f"{(long - short) / 15:.1f} conversions per time step: {per_step}"
