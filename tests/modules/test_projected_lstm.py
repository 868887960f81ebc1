"""
`ProjectedLstmLayer` on batches of mixed lengths, in any order, against each row run alone with
TensorFlow's ``LSTMCell`` equations written out here: outputs, final states and gradients, in
float64 so that a difference beyond rounding is a bug. Under bfloat16 autocast (mixed-precision
training), against the same arithmetic written with autograd.
"""
import torch

from elmo_plugin.modules.projected_lstm import ProjectedLstmLayer


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


def mixed_lengths_case():
    """
    A float64 layer with tight clips and random biases, and a batch of rows of mixed lengths:
    unsorted, with ties, a row of length 0 and none as long as the tensor (time 9). Returns the
    layer, the lengths, inputs, mask, h0 and c0.
    """
    torch.manual_seed(0)
    layer = ProjectedLstmLayer(5, 8, 3, cell_clip=0.5, proj_clip=0.4).double()
    with torch.no_grad():
        layer.bias.normal_()
    lengths = [3, 7, 0, 7, 1, 5, 2]
    batch, time = len(lengths), 9
    inputs = torch.randn(batch, time, 5, dtype=torch.double) * 2
    mask = torch.arange(time).unsqueeze(0) < torch.tensor(lengths).unsqueeze(1)
    inputs = inputs * mask.unsqueeze(-1)
    h0 = torch.randn(batch, 3, dtype=torch.double)
    c0 = torch.randn(batch, 8, dtype=torch.double)
    return layer, lengths, inputs, mask, h0, c0


def test_mixed_lengths_in_any_order_match_each_row_alone():
    layer, lengths, inputs, mask, h0, c0 = mixed_lengths_case()
    batch, time = mask.shape

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


def test_autocast_keeps_float32_states_and_stays_near_float32():
    """Mixed-precision training: outputs, states and gradients stay float32 and near float32's."""
    torch.manual_seed(3)
    layer = ProjectedLstmLayer(8, 16, 4, cell_clip=3.0, proj_clip=3.0)
    inputs = torch.randn(3, 5, 8)
    mask = torch.arange(5).unsqueeze(0) < torch.tensor([5, 3, 4]).unsqueeze(1)
    reference, _ = layer(inputs, mask)
    outputs = []
    for grad_enabled in (True, False):
        with torch.set_grad_enabled(grad_enabled), torch.autocast("cpu", dtype=torch.bfloat16):
            output, (h, c) = layer(inputs, mask)
        assert output.dtype == h.dtype == c.dtype == torch.float32
        assert torch.allclose(output, reference, atol=0.05)
        outputs.append(output.detach())
    # The inference loop and the training loop compute the same numbers.
    assert torch.equal(outputs[0], outputs[1])
    # ... and they are bfloat16's numbers, not float32's.
    assert not torch.equal(outputs[0], reference)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        output, _ = layer(inputs, mask)
    output.sum().backward()
    for parameter in layer.parameters():
        assert parameter.grad is not None and parameter.grad.dtype == torch.float32


def bfloat16_reference(layer, inputs, device_type="cpu"):
    """
    The mixed-precision recurrence written with autograd, for rows that all run every step: the
    multiplies in bfloat16 (rounded operands), the gates, cells and outputs in float32.
    """
    batch, time, size = inputs.shape
    bfloat16 = torch.bfloat16
    with torch.autocast(device_type, dtype=bfloat16):
        packed = inputs.transpose(0, 1).reshape(-1, size)
        input_gates = torch.addmm(layer.effective_bias(), packed, layer.input_weight)
        input_gates = input_gates.float().view(time, batch, -1)
        recurrent_weight = layer.recurrent_weight.to(bfloat16)
        projection_weight = layer.projection_weight.to(bfloat16)
        h = inputs.new_zeros(batch, layer.projection_size)
        c = inputs.new_zeros(batch, layer.cell_size)
        outputs = []
        for step in range(time):
            gates = input_gates[step] + torch.mm(h.to(bfloat16), recurrent_weight)
            i, j, f, o = gates.chunk(4, dim=1)
            c = torch.sigmoid(f) * c + torch.sigmoid(i) * torch.tanh(j)
            c = c.clamp(-layer.cell_clip, layer.cell_clip)
            hidden = (torch.sigmoid(o) * torch.tanh(c)).to(bfloat16)
            h = torch.mm(hidden, projection_weight).float().clamp(-layer.proj_clip, layer.proj_clip)
            outputs.append(h)
    return torch.stack(outputs, dim=1), h, c


def test_bfloat16_recurrence_and_its_backward_match_autograd():
    torch.manual_seed(4)
    layer = ProjectedLstmLayer(8, 16, 4, cell_clip=0.8, proj_clip=0.5)
    with torch.no_grad():
        layer.bias.normal_()
    inputs = torch.randn(5, 6, 8) * 2
    with torch.autocast("cpu", dtype=torch.bfloat16):
        output, (h, c) = layer(inputs, torch.ones(5, 6, dtype=torch.bool))
    expected_output, expected_h, expected_c = bfloat16_reference(layer, inputs)
    # The same multiplies of the same rounded operands: equal up to float32 rounding.
    assert torch.allclose(output, expected_output, atol=1e-6, rtol=0)
    assert torch.allclose(c, expected_c, atol=1e-6, rtol=0)

    weights = torch.randn_like(output)

    def gradients(output, h, c):
        loss = (output * weights).sum() + h.sum() * 0.3 + (c * c).sum()
        return dict(zip([name for name, _ in layer.named_parameters()],
                        torch.autograd.grad(loss, list(layer.parameters()))))

    ours = gradients(output, h, c)
    theirs = gradients(expected_output, expected_h, expected_c)
    float32_output, (float32_h, float32_c) = layer(inputs, torch.ones(5, 6, dtype=torch.bool))
    float32 = gradients(float32_output, float32_h, float32_c)
    for name in ("input_weight", "bias"):
        # The gate gradients flow back through float32 on both sides.
        assert torch.allclose(ours[name], theirs[name], rtol=1e-5, atol=1e-6), name
    for name in ("recurrent_weight", "projection_weight"):
        # Autograd rounds each step's gradient of the bfloat16 weight to bfloat16 before summing
        # them; we sum in one multiply. Both within bfloat16's rounding (2^-8) of each other.
        error = (ours[name] - theirs[name]).norm() / theirs[name].norm()
        assert error < 1e-2, (name, float(error))
    for name, value in ours.items():
        assert ((value - float32[name]).norm() / float32[name].norm()) < 2e-2, name


