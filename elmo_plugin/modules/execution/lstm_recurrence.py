"""
The recurrent loop of `ProjectedLstmLayer` over packed steps (each step's running rows a prefix
of the batch), three ways that compute the same thing:

- `reference_recurrence`: the plain definition, TensorFlow's ``LSTMCell`` step by step with
  autograd (for tests: the two below must equal it);
- `ProjectedLstmRecurrence` (training): `training_loop` into buffers for every position, as one
  autograd function with a hand-written backward (backpropagation through time), so that the
  weight gradients are two large matrix multiplies over all steps instead of two small ones per
  step;
- `inference_loop`: no gradient, as few operator calls per step as it allows, into work buffers
  of one step's rows, equal to the training loop's outputs to the bit.

Why the hand-written backward: with autograd's per-step graph, each step's backward multiplies
(projection x batch) by (batch x 4 cell) for the recurrent weight and writes a whole weight-sized
gradient that is then added to the running sum; collecting the step gradients of the gates and
multiplying once does the same arithmetic in one large, fast multiply (docs/implementation.md).
"""
from typing import List, Optional, Tuple

import torch

# The most running rows for which a step multiplies by the transposed weights, where inference
# is given them (`inference_loop`): the measured crossover of the two layouts in bfloat16.
FEW_ROWS_MAX = 16


def training_loop(
    input_gates: torch.Tensor,
    h0: torch.Tensor,
    c0: torch.Tensor,
    recurrent_weight: torch.Tensor,
    projection_weight: torch.Tensor,
    step_sizes: List[int],
    cell_clip: Optional[float],
    proj_clip: Optional[float],
) -> Tuple[torch.Tensor, torch.Tensor, torch.Tensor, Tuple[torch.Tensor, ...]]:
    """
    The forward recurrence of training, without autograd (see `ProjectedLstmRecurrence` for the
    arguments), into buffers for every position: returns the packed outputs, the final ``h`` and
    ``c`` (sorted row order), and what backward needs: the gate activations, cells, tanh of the
    cells and the clips' pass masks of every position. Each step adds its input gates in the
    state's dtype (the input product's may be narrower, under autocast).
    """
    input_gates = input_gates.to(c0.dtype)
    batch_size, cell_size = c0.shape
    matmul_dtype = recurrent_weight.dtype
    mixed = matmul_dtype != c0.dtype
    num_positions = input_gates.size(0)
    activations = input_gates.new_empty(num_positions, 4 * cell_size)
    cells = c0.new_empty(num_positions, cell_size)
    tanh_cells = c0.new_empty(num_positions, cell_size)
    hidden = c0.new_empty(batch_size, cell_size)
    outputs = h0.new_empty(num_positions, h0.size(1))
    cell_passes = torch.ones(num_positions, cell_size, dtype=torch.bool, device=c0.device)
    output_passes = torch.ones(num_positions, h0.size(1), dtype=torch.bool, device=h0.device)
    h, c = h0, c0
    # The final states of rows that have ended, in the order they ended: the shortest rows, at
    # the bottom of the batch, first. Later steps write only the rows still running, a prefix,
    # so these slices of the buffers keep them.
    ended_h: List[torch.Tensor] = []
    ended_c: List[torch.Tensor] = []
    running, offset = batch_size, 0
    for rows in step_sizes:
        if rows < running:
            ended_h.append(h[rows:running])
            ended_c.append(c[rows:running])
            h, c, running = h[:rows], c[:rows], rows
        span = slice(offset, offset + rows)
        if mixed:
            gates = torch.add(input_gates[span], torch.mm(h.to(matmul_dtype), recurrent_weight),
                              out=activations[span])
        else:
            gates = torch.addmm(input_gates[span], h, recurrent_weight, out=activations[span])
        i, j, f, o = gates.chunk(4, dim=1)
        i.sigmoid_()
        j.tanh_()
        f.sigmoid_()
        o.sigmoid_()
        # Elementwise, so it may overwrite c in place (the first step reads the caller's initial
        # state and writes the buffer).
        c = torch.mul(f, c, out=cells[span]).addcmul_(i, j)
        if cell_clip is not None:
            torch.logical_and(c >= -cell_clip, c <= cell_clip, out=cell_passes[span])
            c.clamp_(-cell_clip, cell_clip)
        tanh_c = torch.tanh(c, out=tanh_cells[span])
        hidden_rows = torch.mul(tanh_c, o, out=hidden[:rows])
        if mixed:
            h = outputs[span]
            h.copy_(torch.mm(hidden_rows.to(matmul_dtype), projection_weight))
        else:
            h = torch.mm(hidden_rows, projection_weight, out=outputs[span])
        if proj_clip is not None:
            torch.logical_and(h >= -proj_clip, h <= proj_clip, out=output_passes[span])
            h.clamp_(-proj_clip, proj_clip)
        offset += rows
    final_h = torch.cat([h] + ended_h[::-1])
    final_c = torch.cat([c] + ended_c[::-1])
    return outputs, final_h, final_c, (activations, cells, tanh_cells, cell_passes, output_passes)


def inference_loop(
    input_gates: torch.Tensor,
    h0: torch.Tensor,
    c0: torch.Tensor,
    recurrent_weight: torch.Tensor,
    projection_weight: torch.Tensor,
    step_sizes: List[int],
    cell_clip: Optional[float],
    proj_clip: Optional[float],
    few_rows_weights: Optional[Tuple[torch.Tensor, torch.Tensor]] = None,
) -> Tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """
    The recurrence without gradients: `training_loop`'s arithmetic, in the same order, with as
    few operator calls per step as it allows, into work buffers of one step's rows, written over
    by every step. Returns the packed outputs and the final ``h`` and ``c``.

    Why work buffers: fresh tensors would come from newly mapped pages on every step, whose
    faults cost more than the step's arithmetic. Why a loop of its own: at batch 1 a step's work
    is tiny, so each operator call (Python, the dispatcher, making a view) weighs: every step's
    input gates and outputs are views made by one ``split`` each, and the work buffers and their
    gate views are made again only when the number of running rows changes, leaving 12 calls per
    step. (f and o are adjacent, but one sigmoid over both rounds some values differently from
    two, by one unit in the last place; kept apart, the outputs equal `training_loop`'s to the
    bit, so validation in training computes what inference computes.)

    ``input_gates`` may come in the products' narrower dtype (bfloat16, as the input product made
    them under autocast) rather than the state's: each step then widens its rows into the work
    buffer and adds the recurrent product there, in the state's dtype: the same arithmetic as
    widening all of them first, to the bit, without a newly allocated tensor of every position.

    ``few_rows_weights``: the recurrent and projection weights transposed, ``(4 * cell,
    projection)`` and ``(projection, cell)``, contiguous, in the products' dtype. Steps with at
    most `FEW_ROWS_MAX` running rows then multiply by these instead (one row: a matrix-vector
    product): the same products summed in another order (the results may differ in the last bit
    of the products' dtype), faster in bfloat16 on a CPU. docs/implementation.md ("The fast
    paths, measured") has the measurements behind each of these choices.
    """
    batch_size, cell_size = c0.shape
    matmul_dtype = recurrent_weight.dtype
    mixed = matmul_dtype != c0.dtype
    activations = c0.new_empty(batch_size, 4 * cell_size)
    cells = c0.new_empty(batch_size, cell_size)
    tanh_cells = c0.new_empty(batch_size, cell_size)
    hidden = c0.new_empty(batch_size, cell_size)
    outputs = h0.new_empty(input_gates.size(0), h0.size(1))
    input_steps = input_gates.split(step_sizes)
    output_steps = outputs.split(step_sizes)
    h, c = h0, c0
    # As in training_loop: the final states of rows that have ended, in the order they ended.
    ended_h: List[torch.Tensor] = []
    ended_c: List[torch.Tensor] = []
    running, view_rows = batch_size, -1
    for rows, step_input, step_output in zip(step_sizes, input_steps, output_steps):
        if rows != view_rows:
            if rows < running:
                ended_h.append(h[rows:running])
                ended_c.append(c[rows:running])
                h, c, running = h[:rows], c[:rows], rows
            gates = activations[:rows]
            i = gates[:, :cell_size]
            j = gates[:, cell_size : 2 * cell_size]
            f = gates[:, 2 * cell_size : 3 * cell_size]
            o = gates[:, 3 * cell_size :]
            cell, tanh_cell, hidden_rows = cells[:rows], tanh_cells[:rows], hidden[:rows]
            view_rows = rows
            if few_rows_weights is not None and rows <= FEW_ROWS_MAX:
                step_recurrent, step_projection = few_rows_weights
                times = _times_transposed
            else:
                step_recurrent, step_projection = recurrent_weight, projection_weight
                times = torch.mm
        if step_input.dtype != gates.dtype:
            # gates = float(step_input) + float(h W): an addition in the state's dtype, as
            # below (adding the two bfloat16 tensors would round the sum to bfloat16).
            gates.copy_(step_input).add_(times(h.to(matmul_dtype), step_recurrent))
        elif mixed:
            torch.add(step_input, times(h.to(matmul_dtype), step_recurrent), out=gates)
        else:
            torch.addmm(step_input, h, recurrent_weight, out=gates)
        i.sigmoid_()
        j.tanh_()
        f.sigmoid_()
        o.sigmoid_()
        # The first step reads the caller's c0 and writes the buffer; later ones update it in
        # place (elementwise, so reading and writing the same memory is safe).
        c = torch.mul(f, c, out=cell).addcmul_(i, j)
        if cell_clip is not None:
            c.clamp_(-cell_clip, cell_clip)
        torch.tanh(c, out=tanh_cell)
        torch.mul(tanh_cell, o, out=hidden_rows)
        if mixed:
            h = step_output.copy_(times(hidden_rows.to(matmul_dtype), step_projection))
        else:
            h = torch.mm(hidden_rows, projection_weight, out=step_output)
        if proj_clip is not None:
            h.clamp_(-proj_clip, proj_clip)
    final_h = torch.cat([h] + ended_h[::-1])
    final_c = torch.cat([c] + ended_c[::-1])
    return outputs, final_h, final_c


def _times_transposed(rows: torch.Tensor, transposed_weight: torch.Tensor) -> torch.Tensor:
    """``rows @ transposed_weight.t()``: a matrix-vector product for one row."""
    if rows.size(0) == 1:
        return torch.mv(transposed_weight, rows[0]).unsqueeze(0)
    return torch.nn.functional.linear(rows, transposed_weight)


class ProjectedLstmRecurrence(torch.autograd.Function):
    """
    Inputs: ``input_gates`` ``(real positions, 4 * cell)``, the input half of every gate plus
    bias, packed step by step (each step's running rows are a prefix of the batch, rows sorted
    longest first); ``h0`` ``(batch, projection)``, ``c0`` ``(batch, cell)``;
    ``recurrent_weight`` ``(projection, 4 * cell)``; ``projection_weight`` ``(cell, projection)``;
    ``step_sizes`` (running rows per step); the clips (None for none).

    Outputs: the packed outputs ``(real positions, projection)`` and each row's final ``h``, ``c``
    (its state after its own last step; the initial state for rows of length 0).

    The arithmetic is TensorFlow's ``LSTMCell`` with gates (i, j, f, o), as in
    `ProjectedLstmLayer`; gradients through the clips follow ``torch.clamp`` (passed where the
    value was within the bounds, ends included).

    Precision: ``input_gates``, ``h0`` and ``c0`` share the state's dtype, in which the gates,
    cells and outputs are computed and kept. The two weights may have a narrower one (mixed
    precision: `ProjectedLstmLayer` passes them in bfloat16 under autocast); each step's two
    multiplies then run in it, their operands rounded to it, and their results join the state's
    dtype. The cell state, which accumulates over the steps, never leaves the state's dtype.
    """

    @staticmethod
    def forward(  # type: ignore[override]
        ctx,
        input_gates: torch.Tensor,
        h0: torch.Tensor,
        c0: torch.Tensor,
        recurrent_weight: torch.Tensor,
        projection_weight: torch.Tensor,
        step_sizes: List[int],
        cell_clip: Optional[float],
        proj_clip: Optional[float],
    ) -> Tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        outputs, final_h, final_c, saved = training_loop(
            input_gates, h0, c0, recurrent_weight, projection_weight, step_sizes, cell_clip,
            proj_clip,
        )
        activations, cells, tanh_cells, cell_passes, output_passes = saved
        ctx.save_for_backward(h0, c0, recurrent_weight, projection_weight, activations, cells,
                              tanh_cells, cell_passes, outputs, output_passes)
        ctx.step_sizes = step_sizes
        return outputs, final_h, final_c

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, grad_outputs, grad_final_h, grad_final_c):  # type: ignore[override]
        (h0, c0, recurrent_weight, projection_weight, activations, cells, tanh_cells,
         cell_passes, outputs, output_passes) = ctx.saved_tensors
        step_sizes: List[int] = ctx.step_sizes
        # In mixed precision the multiplies take the weights' dtype (as in forward, so that the
        # weight gradients multiply the operands that forward multiplied) and everything else
        # the state's; in one precision both are the same and every .to() below is a no-op.
        matmul_dtype, state_dtype = recurrent_weight.dtype, c0.dtype
        offsets = [0]
        for rows in step_sizes:
            offsets.append(offsets[-1] + rows)
        grad_outputs = grad_outputs if grad_outputs is not None else torch.zeros_like(outputs)
        grad_final_h = grad_final_h if grad_final_h is not None else torch.zeros_like(h0)
        grad_final_c = grad_final_c if grad_final_c is not None else torch.zeros_like(c0)

        grad_gates = torch.empty_like(activations)
        grad_projected = torch.empty_like(outputs)  # gradient of each step's unclipped output
        # Gradients of the state after the step being processed, for the rows running then. A
        # row's final state is its state after its last step, so its final-state gradient joins
        # when backward reaches that step.
        grad_h = grad_final_h.clone()
        grad_c = grad_final_c.clone()
        for step in range(len(step_sizes) - 1, -1, -1):
            rows = step_sizes[step]
            span = slice(offsets[step], offsets[step + 1])
            if step + 1 < len(step_sizes) and step_sizes[step + 1] < rows:
                ended = slice(step_sizes[step + 1], rows)
                grad_h[ended] = grad_final_h[ended]
                grad_c[ended] = grad_final_c[ended]
            i, j, f, o = activations[span].chunk(4, dim=1)
            tanh_c = tanh_cells[span]
            d_projected = torch.mul(grad_h[:rows] + grad_outputs[span], output_passes[span],
                                    out=grad_projected[span])
            d_hidden = torch.mm(d_projected.to(matmul_dtype), projection_weight.t()).to(state_dtype)
            d_o = d_hidden * tanh_c
            d_c = grad_c[:rows] + d_hidden * o * (1 - tanh_c * tanh_c)
            d_c = d_c * cell_passes[span]
            previous_c = c0[:rows] if step == 0 else cells[offsets[step - 1] : offsets[step - 1] + rows]
            d_i, d_j, d_f, d_o_pre = grad_gates[span].chunk(4, dim=1)
            torch.mul(d_c * j, i * (1 - i), out=d_i)
            torch.mul(d_c * i, 1 - j * j, out=d_j)
            torch.mul(d_c * previous_c, f * (1 - f), out=d_f)
            torch.mul(d_o, o * (1 - o), out=d_o_pre)
            grad_h[:rows] = torch.mm(grad_gates[span].to(matmul_dtype), recurrent_weight.t())
            grad_c[:rows] = d_c * f
        # Rows of length 0 never ran: their final-state gradient is their initial state's.
        first_rows = step_sizes[0] if step_sizes else 0
        grad_h[first_rows:] = grad_final_h[first_rows:]
        grad_c[first_rows:] = grad_final_c[first_rows:]

        # The state each step read: h0 for the first step, then the previous step's outputs.
        previous_h = torch.cat(
            [h0[: step_sizes[0]]]
            + [outputs[offsets[k - 1] : offsets[k - 1] + rows] for k, rows in enumerate(step_sizes)
               if k > 0]
        )
        grad_recurrent = previous_h.to(matmul_dtype).t() @ grad_gates.to(matmul_dtype)
        hidden = tanh_cells * activations[:, 3 * tanh_cells.size(1):]  # tanh(c) * o
        grad_projection = hidden.to(matmul_dtype).t() @ grad_projected.to(matmul_dtype)
        return grad_gates, grad_h, grad_c, grad_recurrent, grad_projection, None, None, None


def reference_recurrence(
    input_gates: torch.Tensor,
    h0: torch.Tensor,
    c0: torch.Tensor,
    recurrent_weight: torch.Tensor,
    projection_weight: torch.Tensor,
    step_sizes: List[int],
    cell_clip: Optional[float],
    proj_clip: Optional[float],
) -> Tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """
    The plain definition that `ProjectedLstmRecurrence` and `inference_loop` compute:
    TensorFlow's ``LSTMCell`` with a projection, one step at a time, with autograd; the same
    arguments and outputs as `ProjectedLstmRecurrence`. Products in the weights' dtype, everything
    else in the state's.
    """
    state_dtype = c0.dtype
    h, c = h0, c0
    final_h, final_c = list(h0), list(c0)
    outputs = []
    offset = 0
    for rows in step_sizes:
        h, c = projected_lstm_step(
            input_gates[offset : offset + rows].to(state_dtype), h[:rows], c[:rows],
            recurrent_weight, projection_weight, cell_clip, proj_clip,
        )
        outputs.append(h)
        final_h[:rows], final_c[:rows] = list(h), list(c)
        offset += rows
    packed = torch.cat(outputs) if outputs else h0.new_zeros(0, h0.size(1))
    return packed, torch.stack(final_h), torch.stack(final_c)


def projected_lstm_step(
    input_gates: torch.Tensor,
    h: torch.Tensor,
    c: torch.Tensor,
    recurrent_weight: torch.Tensor,
    projection_weight: torch.Tensor,
    cell_clip: Optional[float],
    proj_clip: Optional[float],
) -> Tuple[torch.Tensor, torch.Tensor]:
    """
    One step of TensorFlow's ``LSTMCell`` with a projection for every row given, the one
    definition that `reference_recurrence`, the compiled loop (`compiled_step`) and the loop an
    ONNX export carries (`scan_recurrence`) all step with: ``input_gates`` ``(rows, 4 * cell)``
    (the input half of the gates plus bias, in the state's dtype), the state ``h`` ``(rows,
    projection)``, ``c`` ``(rows, cell)``; returns the new ``(h, c)``. The two products run in
    the weights' dtype, everything else in the state's (``c``'s); where the dtypes agree the
    conversions are no-ops (nothing in a traced or exported graph).
    """
    cell_size = c.size(1)
    matmul_dtype, state_dtype = recurrent_weight.dtype, c.dtype
    gates = input_gates + (h.to(matmul_dtype) @ recurrent_weight).to(state_dtype)
    i, j, f, o = gates.split(cell_size, dim=1)
    c = torch.sigmoid(f) * c + torch.sigmoid(i) * torch.tanh(j)
    if cell_clip is not None:
        c = c.clamp(-cell_clip, cell_clip)
    hidden = torch.tanh(c) * torch.sigmoid(o)
    h = (hidden.to(matmul_dtype) @ projection_weight).to(state_dtype)
    if proj_clip is not None:
        h = h.clamp(-proj_clip, proj_clip)
    return h, c
