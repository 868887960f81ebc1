"""
How one `ProjectedLstmLayer` runs over a batch: rows sorted longest first and packed, the input
half of every gate for all steps in one product, then the recurrence: compiled for a batch
without padding where the plan asks for it (`compiled_step`), else (`lstm_recurrence`) the
training recurrence with its hand-written backward where a gradient is needed, and the
inference loop where not. What is computed is the layer's (TensorFlow's ``LSTMCell`` with a
projection and clips); this decides, once per call, how, from the plan and the tensors it is
given (weights, not the module, as ``nn.LSTM``'s kernels take them).
"""
from typing import List, Optional, Tuple

import torch

from elmo_plugin.modules.execution import compiled_step, lstm_recurrence
from elmo_plugin.modules.execution.lstm_recurrence import (
    LstmWeights,
    recurrence_loop,
    training_recurrence,
)
from elmo_plugin.modules.execution.plan import (
    ExecutionPlan,
    fixed_shape,
    products_dtype,
    products_in,
)
from elmo_plugin.modules.execution.weight_copies import kept_copy

LstmState = Tuple[torch.Tensor, torch.Tensor]  # (h: (batch, projection), c: (batch, cell))


def run_layer(
    inputs: torch.Tensor, mask: torch.Tensor, state: LstmState, input_weight: torch.Tensor,
    input_bias: torch.Tensor, weights: LstmWeights, plan: Optional[ExecutionPlan] = None,
) -> Tuple[torch.Tensor, LstmState]:
    """
    `ProjectedLstmLayer.forward` (see there for the arguments and what it returns), run as
    ``plan`` says: ``input_weight`` ``(input, 4 * cell)`` and ``input_bias`` (the forget bias
    added) give the input half of the gates, ``weights`` the recurrence's parameters and clips.
    """
    batch_size, num_steps, input_size = inputs.shape
    h, c = state
    projection_size = weights.projection.size(1)
    if batch_size == 0 or num_steps == 0:
        return inputs.new_zeros(batch_size, num_steps, projection_size), (h, c)
    if fixed_shape(plan):
        # Every row runs every step (the plan says so; the mask is not read): no lengths on
        # the host, no sorting, no packing.
        in_order, step_sizes = True, [batch_size] * num_steps
    else:
        lengths = mask.sum(dim=1)
        if int(lengths.max()) == 0:
            return inputs.new_zeros(batch_size, num_steps, projection_size), (h, c)
        # Rows longest first, so that the rows still running at any step are a prefix of the
        # batch: each step then multiplies only those rows, and padding costs nothing (as in
        # PyTorch's PackedSequence). Batches of 64 consecutive held-out sentences were 70-81%
        # padding.
        sorted_lengths, order = lengths.sort(descending=True, stable=True)
        in_order = bool((order == torch.arange(batch_size, device=order.device)).all())
        if not in_order:
            inputs, h, c = inputs[order], h[order], c[order]
        # Rebuilt from the lengths, so that it agrees with the step sizes however it was given.
        positions = torch.arange(num_steps, device=lengths.device).unsqueeze(0)
        mask = positions < sorted_lengths.unsqueeze(1)
        step_sizes = rows_per_step(sorted_lengths.tolist())
    time_major = inputs.transpose(0, 1)
    full = len(step_sizes) == num_steps and step_sizes[-1] == batch_size
    # The real positions, step by step, each step's rows a prefix: (real positions, input).
    packed = time_major.reshape(-1, input_size) if full else time_major[mask.t()]
    parameters = (input_weight, weights.recurrent, weights.projection)
    needs_gradient = torch.is_grad_enabled() and any(
        tensor.requires_grad for tensor in (inputs, h, c, input_bias) + parameters
    )
    device_type = inputs.device.type
    dtype = weights.recurrent.dtype
    products = products_dtype(plan, device_type, dtype)
    if products != dtype:
        # Narrower products (bfloat16): the input product below and the recurrence's per-step
        # ones take their operands in that dtype (frozen weights: copies kept between calls).
        # The states, gates and cell sums stay in the parameters' dtype, because the cell state
        # accumulates over the steps (bfloat16 keeps 8 bits of mantissa).
        converted = [weight.to(products) if needs_gradient else kept_copy(weight, products)
                     for weight in parameters]
        input_weight = converted[0]
        weights = weights._replace(recurrent=converted[1], projection=converted[2])
    with products_in(products, device_type, dtype):
        input_gates = torch.addmm(input_bias, packed, input_weight)
    h, c = h.to(dtype), c.to(dtype)
    # Training's recurrence takes the input gates in the state's dtype; so does inference on a
    # GPU, where a step's time is mostly its kernel launches; on a CPU the inference loop widens
    # them step by step (`recurrence_loop` says why).
    if needs_gradient or device_type != "cpu":
        input_gates = input_gates.to(dtype)
    compiled = compiled_step.recurrence_for(
        plan, input_gates, h, c, weights, step_sizes, needs_gradient
    )
    if compiled is not None:
        packed_output, h, c = compiled(input_gates, h, c, weights, step_sizes)
    elif needs_gradient:
        packed_output, h, c = training_recurrence(input_gates, h, c, weights, step_sizes)
    else:
        few_rows = _few_rows_weights(parameters[1:], products, step_sizes, device_type)
        packed_output, h, c = recurrence_loop(
            input_gates, h, c, weights, step_sizes, few_rows=few_rows
        )
    if full:
        output = packed_output.view(num_steps, batch_size, projection_size)
    else:
        output = packed_output.new_zeros(num_steps, batch_size, projection_size)
        output = output.index_put((mask.t(),), packed_output)
    output = output.transpose(0, 1)
    if not in_order:
        restore = torch.empty_like(order)
        restore[order] = torch.arange(batch_size, device=order.device)
        output, h, c = output[restore], h[restore], c[restore]
    return output, (h, c)


def _few_rows_weights(
    parameters: Tuple[torch.Tensor, torch.Tensor], products: torch.dtype, step_sizes: List[int],
    device_type: str,
) -> Optional[Tuple[torch.Tensor, torch.Tensor]]:
    """
    For frozen inference on a CPU whose products run in a narrower dtype than the parameters'
    (bfloat16): the recurrent and projection weights transposed, in ``products``, kept between
    calls, if any step runs at most `FEW_ROWS_MAX` rows (`recurrence_loop` multiplies those steps
    by them: faster there); else None. In float32 both layouts run at the same speed, and on a
    GPU this was not measured.
    """
    if (
        device_type != "cpu"
        or products == parameters[0].dtype
        # Read here, not imported: one setting for this check and the loop's.
        or step_sizes[-1] > lstm_recurrence.FEW_ROWS_MAX
    ):
        return None
    return tuple(kept_copy(weight, products, transposed=True) for weight in parameters)


def rows_per_step(sorted_lengths: List[int]) -> List[int]:
    """For lengths sorted longest first: how many rows are still running at each step."""
    rows = len(sorted_lengths)
    sizes = []
    for step in range(sorted_lengths[0] if sorted_lengths else 0):
        while rows > 0 and sorted_lengths[rows - 1] <= step:
            rows -= 1
        sizes.append(rows)
    return sizes
