"""
How one `ProjectedLstmLayer` runs over a batch: rows sorted longest first and packed, the input
half of the gates in one product, then the recurrence: compiled (`compiled_step`) or, eagerly,
training's or inference's (`lstm_recurrence`).
"""
from typing import List, Optional, Tuple

import torch

from elmo_plugin.modules.execution import compiled_step, lstm_recurrence
from elmo_plugin.modules.execution.carried_state import LstmState
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


def run_layer(
    inputs: torch.Tensor, mask: torch.Tensor, state: LstmState, input_weight: torch.Tensor,
    input_bias: torch.Tensor, weights: LstmWeights, plan: Optional[ExecutionPlan] = None,
) -> Tuple[torch.Tensor, LstmState]:
    """`ProjectedLstmLayer.forward`, run as ``plan`` says: ``input_weight`` ``(input, 4 * cell)`` and
    ``input_bias`` (forget bias added) give the input half of the gates."""
    batch_size, num_steps, input_size = inputs.shape
    h, c = state
    projection_size = weights.projection.size(1)
    if batch_size == 0 or num_steps == 0:
        return inputs.new_zeros(batch_size, num_steps, projection_size), (h, c)
    if fixed_shape(plan):
        # Every row runs every step (the mask is not read): no lengths on the host, no packing.
        in_order, step_sizes = True, [batch_size] * num_steps
    else:
        lengths = mask.sum(dim=1)
        if int(lengths.max()) == 0:
            return inputs.new_zeros(batch_size, num_steps, projection_size), (h, c)
        # Rows longest first, so that each step multiplies only its running rows, a prefix: padding
        # costs nothing (as in PyTorch's PackedSequence).
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
        # The products take their operands in the narrower dtype (frozen weights: kept copies);
        # the states, gates and cell sums stay in the parameters' (the cell state accumulates).
        converted = [weight.to(products) if needs_gradient else kept_copy(weight, products)
                     for weight in parameters]
        input_weight = converted[0]
        weights = weights._replace(recurrent=converted[1], projection=converted[2])
    with products_in(products, device_type, dtype):
        input_gates = torch.addmm(input_bias, packed, input_weight)
    h, c = h.to(dtype), c.to(dtype)
    # Widened here but for CPU inference, whose loop widens them step by step (faster there).
    if needs_gradient or device_type != "cpu":
        input_gates = input_gates.to(dtype)
    compiled = compiled_step.recurrence_for(plan, input_gates, h, c, weights, step_sizes, needs_gradient)
    if compiled is not None:
        packed_output, h, c = compiled(input_gates, h, c, weights, step_sizes)
    elif needs_gradient:
        packed_output, h, c = training_recurrence(input_gates, h, c, weights, step_sizes)
    else:
        few_rows = None
        # `lstm_recurrence.FEW_ROWS_MAX` read there: one setting for this check and the loop's.
        if device_type == "cpu" and products != dtype and step_sizes[-1] <= lstm_recurrence.FEW_ROWS_MAX:
            # Transposed copies: faster for steps of few rows in bfloat16 on a CPU (`recurrence_loop`).
            few_rows = tuple(kept_copy(weight, products, transposed=True) for weight in parameters[1:])
        packed_output, h, c = recurrence_loop(input_gates, h, c, weights, step_sizes, few_rows=few_rows)
    if full:
        output = packed_output.view(num_steps, batch_size, projection_size)
    else:
        output = packed_output.new_zeros(num_steps, batch_size, projection_size)
        output = output.index_put((mask.t(),), packed_output)
    output = output.transpose(0, 1)
    if not in_order:
        restore = order.argsort()
        output, h, c = output[restore], h[restore], c[restore]
    return output, (h, c)


def rows_per_step(sorted_lengths: List[int]) -> List[int]:
    """For lengths sorted longest first: how many rows are still running at each step."""
    rows = len(sorted_lengths)
    sizes = []
    for step in range(sorted_lengths[0] if sorted_lengths else 0):
        while rows > 0 and sorted_lengths[rows - 1] <= step:
            rows -= 1
        sizes.append(rows)
    return sizes
