"""
The training step as one function (`elmo_plugin.training.captured_step`): its Adagrad update is
torch's to the bit; compiled whole, it gives the eager step's losses, parameters and carried
stream state over consecutive windows; and it keeps the rules a CUDA graph needs, as far as a
CPU can check them: no host read, no data-dependent shape, and every tensor it makes has the
same shape at every step.
"""
import copy
from typing import Dict, List, Tuple

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode

from elmo_plugin.modules.sampled_softmax_loss import SampledCandidates
from elmo_plugin.training.captured_step import CapturedStep, adagrad_update, check_capture_setting
from tests.models.test_elmo_language_model import (
    full_stream_windows,
    make_model,
    vocab,  # noqa: F401  (a fixture)
)
from tests.training.test_host_reads import DATA_DEPENDENT_SHAPES, HOST_READS

pytestmark = pytest.mark.usefixtures("single_thread")

NUM_STEPS = 8


@pytest.fixture(scope="module")
def windows(vocab, tmp_path_factory) -> List[Dict]:  # noqa: F811
    """Consecutive full stream windows, 3 rows of 4 tokens."""
    return full_stream_windows(vocab, tmp_path_factory.mktemp("stream"), NUM_STEPS, repeats=12)


def negatives(model, count: int) -> List[SampledCandidates]:
    """The steps' negatives, drawn outside the step, with num_tries as a tensor."""
    generator = torch.Generator().manual_seed(7)
    draws = []
    for _ in range(count):
        sampled = model.softmax.sample(generator=generator)
        draws.append(sampled._replace(num_tries=torch.as_tensor(sampled.num_tries,
                                                                dtype=torch.float64)))
    return draws


def stream_step(model, capture) -> CapturedStep:
    model.train()
    model._fixed_shape_stream = True
    optimizer = torch.optim.Adagrad(model.parameters(), lr=0.2, initial_accumulator_value=1.0)

    def loss_of(tensors: Dict, sampled: SampledCandidates) -> torch.Tensor:
        return model.forward_with_negatives(sampled, **tensors)["loss"]

    return CapturedStep(loss_of, optimizer, max_norm=10.0, capture=capture)


def run(model, step: CapturedStep, windows: List[Dict]) -> Tuple[List[torch.Tensor], List]:
    draws = negatives(model, len(windows))
    losses = [step(tensors, sampled) for tensors, sampled in zip(windows, draws)]
    states = [tensor.clone() for direction in model.bilm.lstm._states for state in direction
              for tensor in state]
    return losses, states


@pytest.mark.parametrize("foreach", [False, True])
def test_the_update_is_torch_s_adagrad_to_the_bit(foreach):
    generator = torch.Generator().manual_seed(0)
    ours = [torch.randn(5, 3, generator=generator), torch.randn(7, generator=generator)]
    theirs = [parameter.clone().requires_grad_() for parameter in ours]
    ours = [parameter.clone().requires_grad_() for parameter in ours]
    optimizer = torch.optim.Adagrad(theirs, lr=0.2, initial_accumulator_value=1.0,
                                    foreach=foreach)
    sums = [torch.full_like(parameter, 1.0) for parameter in ours]
    for _ in range(3):
        for a, b in zip(ours, theirs):
            a.grad = torch.randn(a.shape, generator=generator) * 10
            b.grad = a.grad.clone()
        optimizer.step()
        with torch.no_grad():
            adagrad_update(ours, sums, 0.2, 1e-10, foreach)
    for a, b in zip(ours, theirs):
        assert torch.equal(a, b)
    for a, b in zip(sums, theirs):
        assert torch.equal(a, optimizer.state[b]["sum"])


def test_capture_settings_are_checked():
    assert check_capture_setting("compiled") == "compiled"
    with pytest.raises(ValueError, match="capture must be one of False, 'compiled', 'cuda_graph'"):
        check_capture_setting(True)
    parameter = torch.nn.Parameter(torch.zeros(2))
    with pytest.raises(ValueError, match="'cuda_graph' needs the parameters on a CUDA device"):
        CapturedStep(lambda: parameter.sum(), torch.optim.Adagrad([parameter]),
                     capture="cuda_graph")


@pytest.mark.slow  # Inductor compiles the step on the CPU: minutes
def test_the_compiled_step_gives_the_eager_step_s_losses_and_carried_state(
        vocab, windows):  # noqa: F811
    torch._dynamo.reset()
    eager_model = make_model(vocab, num_samples=6)
    compiled_model = copy.deepcopy(eager_model)
    initial = [parameter.detach().clone() for parameter in eager_model.parameters()]
    eager_losses, eager_states = run(eager_model, stream_step(eager_model, False), windows)
    compiled_losses, compiled_states = run(compiled_model, stream_step(compiled_model, "compiled"),
                                           windows)
    print([float(loss) for loss in eager_losses])
    for have, want in zip(compiled_losses, eager_losses):
        torch.testing.assert_close(have, want, rtol=1e-5, atol=1e-6)
    for have, want in zip(compiled_states, eager_states):
        torch.testing.assert_close(have, want, rtol=1e-5, atol=1e-5)
    for (name, have), want in zip(compiled_model.named_parameters(), eager_model.parameters()):
        torch.testing.assert_close(have, want, rtol=1e-5, atol=1e-5, msg=name)
    # Training moved the weights: the comparison is of a model that learns, not of one standing
    # still (the losses are of different windows, so they need not fall step by step).
    assert max(float((have - before).abs().max())
               for have, before in zip(eager_model.parameters(), initial)) > 0.1


class ShapeRecorder(TorchDispatchMode):
    """Every operation of a step with its output shapes; host reads and data-dependent shapes."""

    def __init__(self) -> None:
        super().__init__()
        self.operations: List[Tuple] = []
        self.forbidden: List[str] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        result = func(*args, **(kwargs or {}))
        if func in HOST_READS or func in DATA_DEPENDENT_SHAPES:
            self.forbidden.append(str(func))
        elif func is torch.ops.aten.index.Tensor and any(
                index is not None and index.dtype == torch.bool for index in args[1]):
            self.forbidden.append(f"{func} with a boolean mask")
        shapes = tuple(tuple(value.shape) for value in torch.utils._pytree.tree_leaves(result)
                       if isinstance(value, torch.Tensor))
        self.operations.append((str(func), shapes))
        return result


def test_the_step_keeps_a_cuda_graph_s_rules(vocab, windows):  # noqa: F811
    model = make_model(vocab, num_samples=6)
    step = stream_step(model, False)
    draws = negatives(model, len(windows))
    step(windows[0], draws[0])  # the first step makes the state and the gradients
    recorded = []
    for tensors, sampled in zip(windows[1:4], draws[1:4]):
        with ShapeRecorder() as recorder:
            step(tensors, sampled)
        recorded.append(recorder)
    for recorder in recorded:
        assert recorder.forbidden == []
        assert recorder.operations == recorded[0].operations
    # What the recorder catches: the general path's step reads lengths on the host.
    model._fixed_shape_stream = False
    with ShapeRecorder() as recorder:
        step(windows[4], draws[4])
    assert recorder.forbidden
