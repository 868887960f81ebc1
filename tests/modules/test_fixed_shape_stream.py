"""
Stream training's fixed-shape path (the plan's ``fixed_shape``, the model's
``fixed_shape_stream``) against the general one (lengths read, rows sorted and packed, tokens
deduplicated): over consecutive full windows, with the LSTM state carried from one to the next,
the same losses, the same gradients of every parameter and the same carried state.
"""
import copy
from typing import Dict, List

import pytest
import torch

from tests.models.test_elmo_language_model import (
    full_stream_windows,
    make_model,
    vocab,  # noqa: F401  (a fixture)
)

pytestmark = pytest.mark.usefixtures("single_thread")


@pytest.fixture(scope="module")
def full_windows(vocab, tmp_path_factory) -> List[Dict]:  # noqa: F811
    return full_stream_windows(vocab, tmp_path_factory.mktemp("stream"), 3, repeats=3)


def train_steps(model, batches: List[Dict], seed: int = 5):
    """Losses, gradients (per batch) and the final carried state of consecutive windows."""
    model.train()
    generator = torch.Generator().manual_seed(seed)
    losses, gradients = [], []
    for tensors in batches:
        model.zero_grad(set_to_none=True)
        sampled = model.softmax.sample(generator=generator)
        loss = model.forward_with_negatives(sampled, **tensors)["loss"]
        loss.backward()
        losses.append(loss.detach())
        gradients.append({name: parameter.grad.clone()
                          for name, parameter in model.named_parameters()
                          if parameter.grad is not None})
    states = [tensor.clone() for direction in model.bilm.lstm._states for state in direction
              for tensor in state]
    return losses, gradients, states


def test_the_fixed_shape_stream_step_equals_the_general_one(vocab, full_windows):  # noqa: F811
    general = make_model(vocab, num_samples=6)
    fixed = copy.deepcopy(general)
    fixed._fixed_shape_stream = True
    ours, theirs = train_steps(fixed, full_windows), train_steps(general, full_windows)
    plan = fixed._plans[(torch.device("cpu"), True, "fixed_shape")]
    assert plan.fixed_shape and not general._plan(torch.device("cpu"), stream=True).fixed_shape
    for have, want in zip(ours[0], theirs[0]):
        torch.testing.assert_close(have, want, rtol=1e-6, atol=1e-6)
    for have, want in zip(ours[1], theirs[1]):
        assert have.keys() == want.keys() and len(have) == len(list(general.parameters()))
        for name in want:
            torch.testing.assert_close(have[name], want[name], rtol=1e-5, atol=1e-6, msg=name)
    for have, want in zip(ours[2], theirs[2]):
        torch.testing.assert_close(have, want, rtol=1e-6, atol=1e-6)
    # The comparison can fail: another draw of negatives gives other losses.
    other = train_steps(copy.deepcopy(general), full_windows, seed=6)
    assert max(float((a - b).abs()) for a, b in zip(other[0], theirs[0])) > 1e-3
