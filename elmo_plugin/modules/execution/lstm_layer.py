"""
How one `ProjectedLstmLayer` runs over a batch: rows sorted longest first and packed, the input
half of every gate for all steps in one product, then the recurrence: compiled for a batch
without padding where a ``compile`` setting asks for it (`compiled_step`), else
(`lstm_recurrence`) the training loop with its hand-written backward where a gradient is needed,
and the inference loop where not.
What is computed is the layer's (TensorFlow's ``LSTMCell`` with a projection and clips); this
decides, once per call, how.
"""
from typing import TYPE_CHECKING, List, Optional, Tuple

import torch

from elmo_plugin.modules.execution import compiled_step, lstm_recurrence
from elmo_plugin.modules.execution.lstm_recurrence import ProjectedLstmRecurrence, inference_loop
from elmo_plugin.modules.execution.weight_copies import kept_copy

if TYPE_CHECKING:  # the module this runs; imported for the type only (no cycle)
    from elmo_plugin.modules.projected_lstm import ProjectedLstmLayer

LstmState = Tuple[torch.Tensor, torch.Tensor]  # (h: (batch, projection), c: (batch, cell))


def run_layer(
    layer: "ProjectedLstmLayer",
    inputs: torch.Tensor,
    mask: torch.Tensor,
    initial_state: Optional[LstmState] = None,
) -> Tuple[torch.Tensor, LstmState]:
    """`ProjectedLstmLayer.forward` (see there for the arguments and what it returns)."""
    batch_size, num_steps, _ = inputs.shape
    h, c = initial_state if initial_state is not None else layer.zero_state(batch_size, inputs)
    if batch_size == 0 or num_steps == 0:
        return inputs.new_zeros(batch_size, num_steps, layer.projection_size), (h, c)
    lengths = mask.sum(dim=1)
    if int(lengths.max()) == 0:
        return inputs.new_zeros(batch_size, num_steps, layer.projection_size), (h, c)
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
    packed = time_major.reshape(-1, layer.input_size) if full else time_major[mask.t()]
    weights = (layer.input_weight, layer.recurrent_weight, layer.projection_weight)
    needs_gradient = torch.is_grad_enabled() and any(
        tensor.requires_grad for tensor in (inputs, h, c, layer.bias) + weights
    )
    device_type = inputs.device.type
    # Under autocast (mixed-precision training, bfloat16 inference) the products run in the
    # autocast dtype: the input product below, and the recurrence's per-step products, for
    # which it gets the two weights in that dtype (frozen: copies kept between calls). Its
    # states, gates and cell sums stay in the parameters' dtype, because the cell state
    # accumulates over the steps (bfloat16 keeps 8 bits of mantissa).
    dtype = layer.recurrent_weight.dtype
    matmul_dtype = torch.get_autocast_dtype(device_type) if torch.is_autocast_enabled(
        device_type) else dtype
    if matmul_dtype != dtype:
        if needs_gradient:
            weights = tuple(weight.to(matmul_dtype) for weight in weights)
        else:
            weights = tuple(kept_copy(weight, matmul_dtype) for weight in weights)
    input_weight, recurrent_weight, projection_weight = weights
    input_gates = torch.addmm(layer.effective_bias(), packed, input_weight)
    h, c = h.to(dtype), c.to(dtype)
    # Compiled for a batch without padding, where a `compiled_step.compiling` setting asks for
    # it on this device; else one of the eager loops below.
    compiled = compiled_step.recurrence_for(
        input_gates, h, c, recurrent_weight, projection_weight, step_sizes, layer.cell_clip,
        layer.proj_clip, needs_gradient,
    )
    if compiled is not None:
        packed_output, h, c = compiled(
            input_gates, h, c, recurrent_weight, projection_weight, layer.cell_clip,
            layer.proj_clip,
        )
    elif needs_gradient:
        packed_output, h, c = ProjectedLstmRecurrence.apply(
            input_gates.to(dtype), h, c, recurrent_weight, projection_weight, step_sizes,
            layer.cell_clip, layer.proj_clip,
        )
    else:
        # On a GPU, where a step's time is mostly its kernel launches, the input gates are
        # widened all at once; on a CPU the inference loop widens them step by step
        # (`inference_loop` says why).
        if device_type != "cpu":
            input_gates = input_gates.to(dtype)
        packed_output, h, c = inference_loop(
            input_gates, h, c, recurrent_weight, projection_weight, step_sizes,
            layer.cell_clip, layer.proj_clip,
            few_rows_weights=_few_rows_weights(layer, matmul_dtype, step_sizes, device_type),
        )
    if full:
        output = packed_output.view(num_steps, batch_size, layer.projection_size)
    else:
        output = packed_output.new_zeros(num_steps, batch_size, layer.projection_size)
        output = output.index_put((mask.t(),), packed_output)
    output = output.transpose(0, 1)
    if not in_order:
        restore = torch.empty_like(order)
        restore[order] = torch.arange(batch_size, device=order.device)
        output, h, c = output[restore], h[restore], c[restore]
    return output, (h, c)


def _few_rows_weights(
    layer: "ProjectedLstmLayer", matmul_dtype: torch.dtype, step_sizes: List[int], device_type: str
) -> Optional[Tuple[torch.Tensor, torch.Tensor]]:
    """
    For frozen inference on a CPU whose products run in a narrower dtype than the parameters'
    (bfloat16 under autocast): the recurrent and projection weights transposed, in
    ``matmul_dtype``, kept between calls, if any step runs at most `FEW_ROWS_MAX` rows
    (`inference_loop` multiplies those steps by them: faster there); else None. In float32 both
    layouts run at the same speed, and on a GPU this was not measured.
    """
    if (
        device_type != "cpu"
        or matmul_dtype == layer.recurrent_weight.dtype
        # Read here, not imported: one setting for this check and the loop's.
        or step_sizes[-1] > lstm_recurrence.FEW_ROWS_MAX
    ):
        return None
    return (
        kept_copy(layer.recurrent_weight, matmul_dtype, transposed=True),
        kept_copy(layer.projection_weight, matmul_dtype, transposed=True),
    )


def rows_per_step(sorted_lengths: List[int]) -> List[int]:
    """For lengths sorted longest first: how many rows are still running at each step."""
    rows = len(sorted_lengths)
    sizes = []
    for step in range(sorted_lengths[0] if sorted_lengths else 0):
        while rows > 0 and sorted_lengths[rows - 1] <= step:
            rows -= 1
        sizes.append(rows)
    return sizes
