"""
The LSTM's in-place loop (`recurrence_loop`) computes exactly the same in inference as in
training's forward (``record``): the same arithmetic in the same order, so the outputs and final
states are equal to the bit, with rows ending at different steps, in float32 and with bfloat16
products; and both equal the plain step-by-step definition (`reference_recurrence`) to float
rounding. Its steps of few rows multiply by the transposed weights where the layer hands it them
(CPU inference in bfloat16): the same products, summed in another order. The layer hands the loop
what the plan says.
"""
import pytest
import torch

from elmo_plugin.modules.execution import lstm_layer, lstm_recurrence
from elmo_plugin.modules.execution.lstm_recurrence import (
    LstmWeights,
    recurrence_loop,
    reference_recurrence,
)
from elmo_plugin.modules.execution.plan import ExecutionPlan
from elmo_plugin.modules.execution.weight_copies import kept_copy, number_of_kept_copies

BFLOAT16 = ExecutionPlan(torch.device("cpu"), products=torch.bfloat16)

pytestmark = pytest.mark.usefixtures("single_thread")


@pytest.mark.parametrize("matmul_dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("step_sizes", [[4, 4, 4], [5, 5, 4, 2, 2, 1], [3, 1, 1, 1], [2]])
@pytest.mark.parametrize("clips", [(1.0, 0.5), (None, None)])
def test_the_inference_loop_equals_the_training_loop_and_the_definition(
    matmul_dtype, step_sizes, clips
):
    generator = torch.Generator().manual_seed(len(step_sizes))
    batch, cell, projection = 6, 8, 5  # rows beyond step_sizes[0] have length 0
    input_gates = 2 * torch.randn(sum(step_sizes), 4 * cell, generator=generator)
    h0 = torch.randn(batch, projection, generator=generator)
    c0 = 3 * torch.randn(batch, cell, generator=generator)  # some beyond the cell clip
    recurrent = torch.randn(projection, 4 * cell, generator=generator).to(matmul_dtype)
    project = torch.randn(cell, projection, generator=generator).to(matmul_dtype)
    arguments = (input_gates, h0, c0, LstmWeights(recurrent, project, *clips), step_sizes)
    expected = recurrence_loop(*arguments, record=True)
    got = recurrence_loop(*arguments)
    plain = reference_recurrence(*arguments)
    # The definition's operations round alike but not always to the same bits (its cell update
    # is not fused); with bfloat16 products a last-bit difference can round a state to another
    # bfloat16 value at the next step.
    tolerance = 1e-5 if matmul_dtype == torch.float32 else 3e-2
    for want, have, definition in zip(expected[:3], got, plain):
        assert have.dtype == torch.float32
        assert torch.equal(have, want)
        assert torch.allclose(have, definition, rtol=tolerance, atol=tolerance)
    # The rows of length 0 keep their initial state; the clips bind somewhere (c0 has values
    # beyond the cell clip).
    assert torch.equal(got[1][step_sizes[0]:], h0[step_sizes[0]:])
    if clips[0] is not None:
        assert float(got[0].abs().max()) == clips[1]
        assert float(got[2][: step_sizes[0]].abs().max()) <= clips[0]


@pytest.mark.parametrize("step_sizes", [[4, 4, 4], [5, 5, 4, 2, 2, 1], [2]])
def test_bfloat16_input_gates_are_widened_step_by_step_to_the_same_bits(step_sizes):
    # On a CPU, inference under bfloat16 hands the loop the input gates as the bfloat16 input
    # product made them; widening each step's rows must give what widening all of them first
    # gave (an addition in float32, not a bfloat16 sum).
    generator = torch.Generator().manual_seed(7)
    batch, cell, projection = 6, 8, 5
    input_gates = (2 * torch.randn(sum(step_sizes), 4 * cell, generator=generator)).bfloat16()
    h0 = torch.randn(batch, projection, generator=generator)
    c0 = torch.randn(batch, cell, generator=generator)
    recurrent = torch.randn(projection, 4 * cell, generator=generator).bfloat16()
    project = torch.randn(cell, projection, generator=generator).bfloat16()
    rest = (h0, c0, LstmWeights(recurrent, project, 1.0, 0.5), step_sizes)
    expected = recurrence_loop(input_gates.float(), *rest)
    got = recurrence_loop(input_gates, *rest)
    for want, have in zip(expected, got):
        assert have.dtype == torch.float32 and torch.equal(have, want)
    # What a bfloat16 sum would give differs, so the check above can fail.
    bfloat16_sum = input_gates[: step_sizes[0]] + (h0[: step_sizes[0]].bfloat16() @ recurrent)
    float32_sum = input_gates[: step_sizes[0]].float() + (h0[: step_sizes[0]].bfloat16() @ recurrent).float()
    assert not torch.equal(bfloat16_sum.float(), float32_sum)


@pytest.mark.parametrize("plan", [BFLOAT16, "autocast"])
def test_the_layer_hands_cpu_inference_bfloat16_input_gates_and_training_float32(
    monkeypatch, plan
):
    # With bfloat16 products on a CPU (the plan's, or, without a plan, those of an autocast the
    # caller entered): inference gets the input product's bfloat16 gates (its loop widens them
    # step by step); training's recurrence gets them in float32; both the weights in bfloat16.
    from elmo_plugin.modules.projected_lstm import ProjectedLstmLayer

    seen = []
    inference, training = lstm_layer.recurrence_loop, lstm_layer.training_recurrence

    def recording_training(gates, h0, c0, weights, *rest):
        seen.append(("training", gates.dtype, weights.recurrent.dtype))
        return training(gates, h0, c0, weights, *rest)

    def recording_inference(gates, h0, c0, weights, *rest, **kwargs):
        seen.append(("inference", gates.dtype, weights.recurrent.dtype))
        return inference(gates, h0, c0, weights, *rest, **kwargs)

    monkeypatch.setattr(lstm_layer, "recurrence_loop", recording_inference)
    monkeypatch.setattr(lstm_layer, "training_recurrence", recording_training)
    layer = ProjectedLstmLayer(4, 8, 3)
    inputs, mask = torch.randn(2, 5, 4), torch.ones(2, 5, dtype=torch.bool)
    execution = None if plan == "autocast" else plan
    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=plan == "autocast"):
        with torch.no_grad():
            layer(inputs, mask, execution=execution)
        layer(inputs, mask, execution=execution)[0].sum().backward()
        layer(inputs, mask)  # no plan (and no autocast where the plan was given): float32
    bfloat16, float32 = torch.bfloat16, torch.float32
    assert seen == [("inference", bfloat16, bfloat16), ("training", float32, bfloat16),
                    ("training", float32, bfloat16 if plan == "autocast" else float32)]
    assert layer.input_weight.grad is not None


def test_frozen_bfloat16_weights_are_converted_once_and_again_after_a_change():
    from elmo_plugin.modules.projected_lstm import ProjectedLstmLayer

    torch.manual_seed(3)
    layer = ProjectedLstmLayer(4, 8, 3, cell_clip=1.0, proj_clip=0.5).requires_grad_(False)
    inputs, mask = torch.randn(2, 5, 4), torch.ones(2, 5, dtype=torch.bool)

    def run():
        return layer(inputs, mask, execution=BFLOAT16)[0]

    weights = (layer.input_weight, layer.recurrent_weight, layer.projection_weight)

    def kept():
        return [kept_copy(weight, torch.bfloat16) for weight in weights]

    first = run()
    # The recurrent and projection weights also transposed: 2 rows a step is few rows.
    assert [number_of_kept_copies(w) for w in weights] == [1, 2, 2]
    copies = kept()
    assert [w.dtype for w in copies] == [torch.bfloat16] * 3
    assert torch.equal(run(), first) and all(a is b for a, b in zip(kept(), copies))  # kept
    # New weights (load_state_dict writes in place): converted again, and the output follows.
    state = {name: value * 2 for name, value in layer.state_dict().items()}
    fresh = ProjectedLstmLayer(4, 8, 3, cell_clip=1.0, proj_clip=0.5).requires_grad_(False)
    fresh.load_state_dict(state)
    layer.load_state_dict(state)
    expected = fresh(inputs, mask, execution=BFLOAT16)[0]
    assert torch.equal(run(), expected) and not torch.equal(expected, first)
    again = kept()
    assert again[1] is not copies[1]
    assert torch.equal(again[1], (2 * copies[1].float()).bfloat16())
    assert set(layer.state_dict()) == {name for name, _ in layer.named_parameters()}


def bfloat16_recurrence_arguments(step_sizes, seed=11):
    generator = torch.Generator().manual_seed(seed)
    batch, cell, projection = 6, 32, 16
    input_gates = (2 * torch.randn(sum(step_sizes), 4 * cell, generator=generator)).bfloat16()
    h0 = torch.randn(batch, projection, generator=generator)
    c0 = torch.randn(batch, cell, generator=generator)
    recurrent = torch.randn(projection, 4 * cell, generator=generator).bfloat16()
    project = (torch.randn(cell, projection, generator=generator) / 4).bfloat16()
    return input_gates, h0, c0, LstmWeights(recurrent, project, 3.0, 3.0), step_sizes


def test_steps_of_few_rows_multiply_by_the_transposed_weights(monkeypatch):
    monkeypatch.setattr(lstm_recurrence, "FEW_ROWS_MAX", 2)
    step_sizes = [5, 5, 4, 2, 2, 1]  # the last three steps have at most 2 rows
    arguments = bfloat16_recurrence_arguments(step_sizes)
    recurrent, project = arguments[3].recurrent, arguments[3].projection
    expected = recurrence_loop(*arguments)
    transposed = (recurrent.t().contiguous(), project.t().contiguous())
    got = recurrence_loop(*arguments, few_rows=transposed)
    # The same products summed in another order: bfloat16 products may round differently.
    for want, have in zip(expected, got):
        assert have.dtype == torch.float32
        assert torch.allclose(have, want, rtol=2e-2, atol=2e-2)
    # They are the weights those steps use, and only those: other weights change the outputs of
    # the steps with 2 rows or fewer (the last 5 positions), and nothing before.
    other = (2 * transposed[0], 2 * transposed[1])
    changed = recurrence_loop(*arguments, few_rows=other)[0]
    assert torch.equal(changed[:14], got[0][:14])
    assert not torch.equal(changed[14:], got[0][14:])


def test_frozen_cpu_inference_in_bfloat16_keeps_transposed_copies_for_few_rows(monkeypatch):
    from elmo_plugin.modules.projected_lstm import ProjectedLstmLayer

    given = []
    inference = lstm_layer.recurrence_loop

    def recording_inference(*arguments, **kwargs):
        given.append(kwargs.get("few_rows"))
        return inference(*arguments, **kwargs)

    monkeypatch.setattr(lstm_layer, "recurrence_loop", recording_inference)
    torch.manual_seed(5)
    layer = ProjectedLstmLayer(4, 8, 3, cell_clip=1.0, proj_clip=0.5).requires_grad_(False)
    one_row = torch.randn(1, 5, 4), torch.ones(1, 5, dtype=torch.bool)
    many_rows = torch.randn(20, 5, 4), torch.ones(20, 5, dtype=torch.bool)
    one = layer(*one_row, execution=BFLOAT16)[0]
    layer(*one_row, execution=BFLOAT16)
    layer(*many_rows, execution=BFLOAT16)  # 20 rows at every step: more than FEW_ROWS_MAX
    layer(*one_row)  # float32
    first, second, many, float32 = given
    assert torch.equal(first[0], layer.recurrent_weight.t().bfloat16())
    assert torch.equal(first[1], layer.projection_weight.t().bfloat16())
    assert first[0].is_contiguous() and first[1].is_contiguous()
    assert second[0] is first[0] and second[1] is first[1]  # kept between calls
    assert many is None and float32 is None
    # The batch-1 output is the (in, out) layout's within the rounding of bfloat16 products.
    monkeypatch.setattr(lstm_recurrence, "FEW_ROWS_MAX", 0)
    assert torch.allclose(layer(*one_row, execution=BFLOAT16)[0], one, rtol=2e-2, atol=2e-2)
    assert given[-1] is None
