"""
`ProjectedLstmLayer` on batches of mixed lengths, in any order, against each row run alone with
TensorFlow's ``LSTMCell`` equations written out here: outputs, final states and gradients, in
float64 so that a difference beyond rounding is a bug.
"""
import torch

from elmo_plugin.projected_lstm import ProjectedLstmLayer


def one_row(layer, inputs, length, h, c):
    """The TensorFlow cell, one step at a time, over one row's real positions."""
    outputs = []
    for step in range(length):
        gates = inputs[step] @ layer.input_weight + h @ layer.recurrent_weight + layer.bias
        i, j, f, o = gates.chunk(4)
        c = torch.sigmoid(i) * torch.tanh(j) + torch.sigmoid(f + layer.forget_bias) * c
        c = c.clamp(-layer.cell_clip, layer.cell_clip)
        h = (torch.sigmoid(o) * torch.tanh(c)) @ layer.projection_weight
        h = h.clamp(-layer.proj_clip, layer.proj_clip)
        outputs.append(h)
    return outputs, h, c


def test_mixed_lengths_in_any_order_match_each_row_alone():
    torch.manual_seed(0)
    layer = ProjectedLstmLayer(5, 8, 3, cell_clip=0.5, proj_clip=0.4).double()
    with torch.no_grad():
        layer.bias.normal_()
    # Unsorted, with ties, a row of length 0 and none as long as the tensor (time 9).
    lengths = [3, 7, 0, 7, 1, 5, 2]
    batch, time = len(lengths), 9
    inputs = torch.randn(batch, time, 5, dtype=torch.double) * 2
    mask = torch.arange(time).unsqueeze(0) < torch.tensor(lengths).unsqueeze(1)
    inputs = inputs * mask.unsqueeze(-1)
    h0 = torch.randn(batch, 3, dtype=torch.double)
    c0 = torch.randn(batch, 8, dtype=torch.double)

    initial = (h0.clone(), c0.clone())
    output, (h, c) = layer(inputs, mask, (h0, c0))
    assert output.shape == (batch, time, 3)
    # Inference runs its own in-place loop over reused buffers: the same numbers, and the
    # caller's initial state untouched.
    with torch.no_grad():
        inference_output, (inference_h, inference_c) = layer(inputs, mask, (h0, c0))
    assert torch.allclose(inference_output, output, atol=1e-12, rtol=0)
    assert torch.allclose(inference_h, h, atol=1e-12, rtol=0)
    assert torch.allclose(inference_c, c, atol=1e-12, rtol=0)
    assert torch.equal(h0, initial[0]) and torch.equal(c0, initial[1])
    weights = torch.randn_like(output)
    loss = (output * weights).sum() + h.sum() * 0.3 + (c * c).sum()
    ours = torch.autograd.grad(loss, list(layer.parameters()))

    expected_loss = 0.0
    for row, length in enumerate(lengths):
        steps, row_h, row_c = one_row(layer, inputs[row], length, h0[row], c0[row])
        expected = torch.zeros(time, 3, dtype=torch.double)
        if steps:
            expected[:length] = torch.stack(steps)
        assert torch.allclose(output[row], expected, atol=1e-12), row
        assert torch.allclose(h[row], row_h, atol=1e-12), row
        assert torch.allclose(c[row], row_c, atol=1e-12), row
        expected_loss = expected_loss + (expected * weights[row]).sum() + row_h.sum() * 0.3
        expected_loss = expected_loss + (row_c * row_c).sum()
    theirs = torch.autograd.grad(expected_loss, list(layer.parameters()))
    for (name, _), a, b in zip(layer.named_parameters(), ours, theirs):
        assert torch.allclose(a, b, atol=1e-10), name


def test_all_rows_full_and_all_rows_empty():
    torch.manual_seed(1)
    layer = ProjectedLstmLayer(4, 6, 2, cell_clip=3.0, proj_clip=3.0).double()
    inputs = torch.randn(3, 4, 4, dtype=torch.double)
    output, (h, c) = layer(inputs, torch.ones(3, 4, dtype=torch.bool))
    for row in range(3):
        steps, row_h, row_c = one_row(layer, inputs[row], 4, torch.zeros(2).double(),
                                      torch.zeros(6).double())
        assert torch.allclose(output[row], torch.stack(steps), atol=1e-12)
        assert torch.allclose(h[row], row_h, atol=1e-12)
    output, (h, c) = layer(inputs, torch.zeros(3, 4, dtype=torch.bool))
    assert not output.any() and not h.any() and not c.any()


def test_state_dicts_in_the_old_out_in_layout_still_load():
    """Archives trained before the (in, out) layout hold PyTorch-style (out, in) matrices."""
    torch.manual_seed(2)
    layer = ProjectedLstmLayer(5, 8, 3, cell_clip=3.0, proj_clip=3.0)
    old_layout = {
        name: value.t() if value.dim() == 2 else value for name, value in layer.state_dict().items()
    }
    assert old_layout["input_weight"].shape == (32, 5)
    loaded = ProjectedLstmLayer(5, 8, 3, cell_clip=3.0, proj_clip=3.0)
    loaded.load_state_dict(old_layout)
    for name, value in layer.state_dict().items():
        assert torch.equal(loaded.state_dict()[name], value), name


def test_autocast_runs_the_recurrence_in_the_weights_precision():
    """Mixed-precision training (``--amp``): the input multiply may be bfloat16, the loop is not."""
    torch.manual_seed(3)
    layer = ProjectedLstmLayer(8, 16, 4, cell_clip=3.0, proj_clip=3.0)
    inputs = torch.randn(3, 5, 8)
    mask = torch.arange(5).unsqueeze(0) < torch.tensor([5, 3, 4]).unsqueeze(1)
    reference, _ = layer(inputs, mask)
    for grad_enabled in (True, False):
        with torch.set_grad_enabled(grad_enabled), torch.autocast("cpu", dtype=torch.bfloat16):
            output, (h, c) = layer(inputs, mask)
        assert output.dtype == h.dtype == c.dtype == torch.float32
        assert torch.allclose(output, reference, atol=0.05)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        output, _ = layer(inputs, mask)
    output.sum().backward()
    assert layer.recurrent_weight.grad is not None and layer.input_weight.grad is not None
