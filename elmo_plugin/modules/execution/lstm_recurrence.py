"""
The recurrent loop of `ProjectedLstmLayer` over packed steps (each step's running rows a prefix
of the batch, longest first): the step defined once (`projected_lstm_step`), its plain loop with
autograd (`reference_recurrence`, also what `compiled_step` compiles), the in-place loop of
training's forward and inference (`recurrence_loop`), and the hand-written backpropagation
through time (`recurrence_backward`: one weight-gradient product over all steps, not one a step).

Precision: the gates and cell state stay in the state's dtype; the two products a step run in the
weights' (bfloat16 copies, from `lstm_layer`). The fast paths keep in the products' dtype what
only feeds a product, so that conversions run once per call, not per step (docs/implementation.md).
"""
import itertools
from typing import Callable, List, NamedTuple, Optional, Tuple

import torch

from elmo_plugin.modules.execution.fast_paths import fast_path

# The most running rows for which inference multiplies by the transposed weights (measured, bfloat16).
FEW_ROWS_MAX = 16


class LstmWeights(NamedTuple):
    """``recurrent`` ``(projection, 4 * cell)``, ``projection`` ``(cell, projection)``; clips None for none."""

    recurrent: torch.Tensor
    projection: torch.Tensor
    cell_clip: Optional[float] = None
    proj_clip: Optional[float] = None


class RecurrenceRecord(NamedTuple):
    """What a training forward keeps of every position for `recurrence_backward` (passes: None without
    that clip)."""

    activations: torch.Tensor
    cells: torch.Tensor
    tanh_cells: torch.Tensor
    cell_passes: Optional[torch.Tensor]
    output_passes: Optional[torch.Tensor]


Recurrence = Tuple[torch.Tensor, torch.Tensor, torch.Tensor]  # packed outputs, final h and c


def projected_lstm_step(input_gates: torch.Tensor, h: torch.Tensor, c: torch.Tensor,
                        weights: LstmWeights, record: bool = False) -> Tuple:
    """
    One step of TensorFlow's ``LSTMCell`` with a projection: ``input_gates`` ``(rows, 4 * cell)``
    (input half plus bias), ``h`` ``(rows, projection)``, ``c`` ``(rows, cell)``; returns the new
    ``(h, c)``, with ``record`` followed by the step's part of `RecurrenceRecord`.
    """
    matmul_dtype, state_dtype = weights.recurrent.dtype, c.dtype
    gates = input_gates + (h.to(matmul_dtype) @ weights.recurrent).to(state_dtype)
    i, j, f, o = gates.split(c.size(1), dim=1)
    i, j, f, o = torch.sigmoid(i), torch.tanh(j), torch.sigmoid(f), torch.sigmoid(o)
    c, cell_passes = _clamped(f * c + i * j, weights.cell_clip, record)
    tanh_c = torch.tanh(c)
    h = ((tanh_c * o).to(matmul_dtype) @ weights.projection).to(state_dtype)
    h, output_passes = _clamped(h, weights.proj_clip, record)
    if not record:
        return h, c
    return h, c, torch.cat([i, j, f, o], dim=1), tanh_c, cell_passes, output_passes


def _clamped(tensor: torch.Tensor, clip: Optional[float], record: bool) -> Tuple:
    """``tensor`` clamped to ``[-clip, clip]`` and, with ``record``, where it was inside (else None)."""
    if clip is None:
        return tensor, None
    return tensor.clamp(-clip, clip), ((tensor >= -clip) & (tensor <= clip) if record else None)


def reference_recurrence(input_gates: torch.Tensor, h0: torch.Tensor, c0: torch.Tensor,
                         weights: LstmWeights, step_sizes: List[int], record: bool = False) -> Tuple:
    """
    `projected_lstm_step` over the packed steps with autograd (``input_gates`` ``(positions, 4 *
    cell)``, ``step_sizes`` the running rows of each step): the packed outputs, each row's final
    ``h`` and ``c``, with ``record`` the `RecurrenceRecord`. No branch on data (TorchDynamo).
    """
    h, c = h0, c0
    outputs: List[torch.Tensor] = []
    kept: List[Tuple] = []  # with record: each step's cell and the rest it records
    # The final states of rows that have ended, shortest (bottom of the batch) first.
    ended_h: List[torch.Tensor] = []
    ended_c: List[torch.Tensor] = []
    offset = 0
    for rows in step_sizes:
        if rows < h.size(0):
            ended_h.append(h[rows:])
            ended_c.append(c[rows:])
            h, c = h[:rows], c[:rows]
        h, c, *recorded = projected_lstm_step(
            input_gates[offset : offset + rows].to(c0.dtype), h, c, weights, record
        )
        outputs.append(h)
        if record:
            kept.append((c, *recorded))
        offset += rows
    packed = torch.cat(outputs) if outputs else h0.new_zeros(0, h0.size(1))
    result = (packed, torch.cat([h] + ended_h[::-1]), torch.cat([c] + ended_c[::-1]))
    if not record:
        return result
    cells, activations, tanh_cells, cell_passes, output_passes = zip(*kept)
    return result + (RecurrenceRecord(
        torch.cat(activations), torch.cat(cells), torch.cat(tanh_cells),
        None if weights.cell_clip is None else torch.cat(cell_passes),
        None if weights.proj_clip is None else torch.cat(output_passes),
    ),)


@fast_path(reference_recurrence)
def recurrence_loop(
    input_gates: torch.Tensor, h0: torch.Tensor, c0: torch.Tensor, weights: LstmWeights,
    step_sizes: List[int], record: bool = False,
    few_rows: Optional[Tuple[torch.Tensor, torch.Tensor]] = None,
) -> Tuple:
    """
    `reference_recurrence` without autograd, in place, into buffers (with ``record``: of every
    position; without: one step's rows, reused); ``input_gates`` may come in the products' dtype.
    ``few_rows``: the weights transposed, contiguous, in the products' dtype, for steps of at most
    `FEW_ROWS_MAX` rows (the last bit may differ). docs/implementation.md ("The fast paths,
    measured") says why each; f and o get a sigmoid each, so that outputs with and without
    ``record`` agree to the bit.
    """
    batch_size, cell_size = c0.shape
    num_positions = input_gates.size(0)
    matmul_dtype = weights.recurrent.dtype
    mixed = matmul_dtype != c0.dtype
    kept = num_positions if record else batch_size
    activations = c0.new_empty(kept, 4 * cell_size)
    cells = c0.new_empty(kept, cell_size)
    tanh_cells = c0.new_empty(kept, cell_size)
    # h and tanh(c) o are kept in the products' dtype (h is a product's result already), widened
    # once after the loop.
    hidden = c0.new_empty(batch_size, cell_size, dtype=matmul_dtype)
    outputs = h0.new_empty(num_positions, h0.size(1), dtype=matmul_dtype)
    cell_passes = output_passes = None
    if record:
        if weights.cell_clip is not None:
            cell_passes = torch.empty(num_positions, cell_size, dtype=torch.bool, device=c0.device)
        if weights.proj_clip is not None:
            output_passes = torch.empty_like(outputs, dtype=torch.bool)
        gate_steps, cell_steps, tanh_steps, cell_pass_steps, output_pass_steps = (
            None if buffer is None else buffer.split(step_sizes)
            for buffer in (activations, cells, tanh_cells, cell_passes, output_passes)
        )
    # Rows of length 0 keep their initial state as given: only the running rows' h is converted.
    running = step_sizes[0] if step_sizes else batch_size
    h, c = h0[:running].to(matmul_dtype), c0
    ended_h: List[torch.Tensor] = []  # as in reference_recurrence
    ended_c: List[torch.Tensor] = []
    if running < batch_size:
        ended_h.append(h0[running:])
        ended_c.append(c[running:])
        c = c[:running]
    view_rows = -1
    steps = zip(step_sizes, input_gates.split(step_sizes), outputs.split(step_sizes))
    for step, (rows, step_input, step_output) in enumerate(steps):
        if rows < running:
            ended_h.append(h[rows:running])
            ended_c.append(c[rows:running])
            h, c, running = h[:rows], c[:rows], rows
        if record or rows != view_rows:
            if record:
                gates, cell, tanh_cell = gate_steps[step], cell_steps[step], tanh_steps[step]
            else:
                gates, cell, tanh_cell = activations[:rows], cells[:rows], tanh_cells[:rows]
            i, j, f, o = gates.chunk(4, dim=1)
            hidden_rows = hidden[:rows]
            view_rows = rows
            if few_rows is not None and rows <= FEW_ROWS_MAX:
                (step_recurrent, step_projection), times = few_rows, _times_transposed
            else:
                step_recurrent, step_projection = weights.recurrent, weights.projection
                times = torch.mm
        if step_input.dtype != gates.dtype:
            # Added in the state's dtype (two bfloat16 tensors would round the sum to bfloat16).
            gates.copy_(step_input).add_(times(h, step_recurrent))
        elif mixed:
            torch.add(step_input, times(h, step_recurrent), out=gates)
        else:
            torch.addmm(step_input, h, weights.recurrent, out=gates)
        i.sigmoid_()
        j.tanh_()
        f.sigmoid_()
        o.sigmoid_()
        # Later steps update the buffer in place (elementwise: safe).
        c = torch.mul(f, c, out=cell).addcmul_(i, j)
        if weights.cell_clip is not None:
            _clamp_recording_(c, weights.cell_clip, cell_pass_steps[step] if record else None)
        torch.tanh(c, out=tanh_cell)
        torch.mul(tanh_cell, o, out=hidden_rows)
        if mixed:
            h = step_output.copy_(times(hidden_rows, step_projection))
        else:
            h = torch.mm(hidden_rows, weights.projection, out=step_output)
        if weights.proj_clip is not None:
            _clamp_recording_(h, weights.proj_clip, output_pass_steps[step] if record else None)
    final_h = torch.cat([h.to(h0.dtype)] + ended_h[::-1])
    result = (outputs.to(h0.dtype), final_h, torch.cat([c] + ended_c[::-1]))
    if not record:
        return result
    return result + (RecurrenceRecord(activations, cells, tanh_cells, cell_passes, output_passes),)


def _clamp_recording_(tensor: torch.Tensor, clip: float, passes: Optional[torch.Tensor]) -> None:
    """Clamps ``tensor`` to ``[-clip, clip]`` in place, first writing into ``passes`` where it was inside."""
    if passes is not None:
        torch.logical_and(tensor >= -clip, tensor <= clip, out=passes)
    tensor.clamp_(-clip, clip)


def _into(function: Callable, out: torch.Tensor, *args: torch.Tensor) -> None:
    """``function(*args, out=out)``; a copy while TorchDynamo compiles (it takes no out= into a block)."""
    if torch.compiler.is_compiling():
        out.copy_(function(*args))
    else:
        function(*args, out=out)


def _times_transposed(rows: torch.Tensor, transposed_weight: torch.Tensor) -> torch.Tensor:
    """``rows @ transposed_weight.t()``: a matrix-vector product for one row."""
    if rows.size(0) == 1:
        return torch.mv(transposed_weight, rows[0]).unsqueeze(0)
    return torch.nn.functional.linear(rows, transposed_weight)


def recurrence_backward(
    grad_outputs: torch.Tensor, grad_final_h: torch.Tensor, grad_final_c: torch.Tensor,
    h0: torch.Tensor, c0: torch.Tensor, weights: LstmWeights, outputs: torch.Tensor,
    record: RecurrenceRecord, step_sizes: List[int],
) -> Tuple[torch.Tensor, ...]:
    """
    Backpropagation through time of a recorded forward: the gradients of ``input_gates``, ``h0``,
    ``c0`` and the two weights (each in one product over all steps); the clips as ``torch.clamp``'s.
    """
    activations, cells, tanh_cells, cell_passes, output_passes = record
    matmul_dtype, state_dtype = weights.recurrent.dtype, c0.dtype
    offsets = [0, *itertools.accumulate(step_sizes)]
    # What only feeds a product is written in the products' dtype by the operation computing it,
    # so that no step converts (the input gates' gradient is rounded to it by their product anyway).
    grad_gates = torch.empty_like(activations, dtype=matmul_dtype)
    grad_projected = torch.empty_like(outputs, dtype=matmul_dtype)  # of each unclipped output
    # h's gradient through the next step's recurrent product, for the rows that ran it.
    grad_h = grad_final_h.new_empty(grad_final_h.shape, dtype=matmul_dtype)
    grad_c = grad_final_c.clone()
    for step in range(len(step_sizes) - 1, -1, -1):
        rows = step_sizes[step]
        span = slice(offsets[step], offsets[step + 1])
        continuing = step_sizes[step + 1] if step + 1 < len(step_sizes) else 0
        if continuing < rows:
            ended = slice(continuing, rows)
            grad_c[ended] = grad_final_c[ended]
        i, j, f, o = activations[span].chunk(4, dim=1)
        tanh_c = tanh_cells[span]
        d_projected = grad_projected[span]
        step_grad_outputs = grad_outputs[span]
        for gradient, part in ((grad_h, slice(0, continuing)),
                               (grad_final_h, slice(continuing, rows))):
            if part.start == part.stop:
                continue
            _into(torch.add, d_projected[part], gradient[part], step_grad_outputs[part])
        if output_passes is not None:
            # Multiplying by 0 or 1 after the rounding gives what it gives before.
            d_projected.mul_(output_passes[span])
        # The product's result stays in its dtype: the products below widen it (exactly).
        d_hidden = torch.mm(d_projected, weights.projection.t())
        d_o = d_hidden * tanh_c
        d_c = grad_c[:rows] + d_hidden * o * (1 - tanh_c * tanh_c)
        if cell_passes is not None:
            d_c = d_c * cell_passes[span]
        previous_c = c0[:rows] if step == 0 else cells[offsets[step - 1] : offsets[step - 1] + rows]
        step_gates = grad_gates[span]
        blocks = ((d_c * j, i * (1 - i)), (d_c * i, 1 - j * j), (d_c * previous_c, f * (1 - f)),
                  (d_o, o * (1 - o)))
        for (left, right), block in zip(blocks, step_gates.chunk(4, dim=1)):
            _into(torch.mul, block, left, right)
        _into(torch.mm, grad_h[:rows], step_gates, weights.recurrent.t())
        grad_c[:rows] = d_c * f
    # Rows of length 0 never ran: their final state's gradient is their initial state's.
    grad_h0 = grad_final_h.clone()
    grad_h0[: step_sizes[0]] = grad_h[: step_sizes[0]]
    grad_c[step_sizes[0] :] = grad_final_c[step_sizes[0] :]
    # The state each step read: h0 for the first step, then the previous step's outputs.
    previous_h = torch.cat(
        [h0[: step_sizes[0]]]
        + [outputs[offsets[k - 1] : offsets[k - 1] + rows] for k, rows in enumerate(step_sizes)
           if k > 0]
    )
    grad_recurrent = previous_h.to(matmul_dtype).t() @ grad_gates
    hidden = tanh_cells * activations[:, 3 * tanh_cells.size(1) :]  # tanh(c) * o
    grad_projection = hidden.to(matmul_dtype).t() @ grad_projected
    return grad_gates.to(state_dtype), grad_h0, grad_c, grad_recurrent, grad_projection


class ProjectedLstmRecurrence(torch.autograd.Function):
    """A training recurrence of ``forward`` (recording, as `reference_recurrence`) and ``backward``
    (as `recurrence_backward`), then `reference_recurrence`'s arguments, the weights unpacked."""

    @staticmethod
    def forward(  # type: ignore[override]
        ctx, forward, backward, input_gates, h0, c0, recurrent, projection, cell_clip, proj_clip,
        step_sizes,
    ):
        weights = LstmWeights(recurrent, projection, cell_clip, proj_clip)
        outputs, final_h, final_c, record = forward(input_gates, h0, c0, weights, step_sizes, True)
        ctx.save_for_backward(h0, c0, recurrent, projection, outputs, *record)
        ctx.backward, ctx.clips, ctx.step_sizes = backward, (cell_clip, proj_clip), step_sizes
        return outputs, final_h, final_c

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, grad_outputs, grad_final_h, grad_final_c):  # type: ignore[override]
        h0, c0, recurrent, projection, outputs, *record = ctx.saved_tensors
        gradients = [
            torch.zeros_like(like) if gradient is None else gradient.contiguous()
            for gradient, like in ((grad_outputs, outputs), (grad_final_h, h0), (grad_final_c, c0))
        ]
        gradients = ctx.backward(*gradients, h0, c0, LstmWeights(recurrent, projection, *ctx.clips),
                                 outputs, RecurrenceRecord(*record), ctx.step_sizes)
        return (None, None) + tuple(gradients) + (None, None, None)


@fast_path(reference_recurrence, gradients=True)
def training_recurrence(
    input_gates: torch.Tensor, h0: torch.Tensor, c0: torch.Tensor, weights: LstmWeights,
    step_sizes: List[int], forward: Callable = recurrence_loop,
    backward: Callable = recurrence_backward,
) -> Recurrence:
    """`ProjectedLstmRecurrence` of ``forward`` and ``backward`` (`compiled_step` passes compiled ones)."""
    return ProjectedLstmRecurrence.apply(forward, backward, input_gates, h0, c0, *weights,
                                         step_sizes)
