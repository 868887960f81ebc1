"""
`small_batch_linear.linear`: oneDNN's kernel for a few rows at inference gives ``nn.Linear``'s
values (to float rounding), and everywhere else (gradients, autocast, many rows, a missing or
failing op) it is ``nn.Linear`` itself.
"""
import pytest
import torch

from elmo_plugin.modules.execution import small_batch_linear

pytestmark = pytest.mark.usefixtures("single_thread")

needs_onednn = pytest.mark.skipif(
    not torch.backends.mkldnn.is_available(), reason="this PyTorch has no oneDNN"
)


@pytest.fixture
def calls(monkeypatch):
    """Counts the oneDNN calls (and lets them through)."""
    counted = []
    real = small_batch_linear._onednn_linear

    def spy(*args):
        counted.append(args[0].shape)
        return real(*args)

    monkeypatch.setattr(small_batch_linear, "_onednn_linear", spy)
    monkeypatch.setattr(small_batch_linear, "_onednn_usable", None)
    return counted


def layer_and_inputs(rows: int, requires_grad: bool = False):
    torch.manual_seed(0)
    layer = torch.nn.Linear(256, 512).requires_grad_(requires_grad)
    return layer, torch.randn(rows, 256)


@needs_onednn
@pytest.mark.parametrize("rows", [2, 18, small_batch_linear.MAX_ROWS])
def test_a_few_rows_go_through_onednn_with_linears_values(calls, rows):
    layer, inputs = layer_and_inputs(rows)
    got = small_batch_linear.linear(inputs, layer)
    expected = torch.nn.functional.linear(inputs.double(), layer.weight.double(), layer.bias.double())
    assert calls == [(rows, 256)]
    assert got.dtype == torch.float32
    # float32 rounding of sums of 256 products of magnitude ~1: well below 1e-5.
    torch.testing.assert_close(got.double(), expected, rtol=0, atol=1e-5)


def test_everything_else_is_nn_linear_exactly(calls):
    layer, inputs = layer_and_inputs(small_batch_linear.MAX_ROWS + 1)
    assert torch.equal(small_batch_linear.linear(inputs, layer), layer(inputs))
    layer, inputs = layer_and_inputs(1)
    assert torch.equal(small_batch_linear.linear(inputs, layer), layer(inputs))
    layer, inputs = layer_and_inputs(18)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        got = small_batch_linear.linear(inputs, layer)
    assert got.dtype == torch.bfloat16
    # Training: the oneDNN op has no backward, so a layer that learns gets nn.Linear.
    layer, inputs = layer_and_inputs(18, requires_grad=True)
    output = small_batch_linear.linear(inputs, layer)
    output.sum().backward()
    assert layer.weight.grad is not None
    assert calls == []


@needs_onednn
def test_a_failing_op_falls_back_once_and_for_all(monkeypatch):
    failures = []

    def broken(*args):
        failures.append(1)
        raise RuntimeError("no such op")

    monkeypatch.setattr(small_batch_linear, "_onednn_linear", broken)
    monkeypatch.setattr(small_batch_linear, "_onednn_usable", None)
    layer, inputs = layer_and_inputs(18)
    for _ in range(2):
        assert torch.equal(small_batch_linear.linear(inputs, layer), layer(inputs))
    assert failures == [1]
