"""
The recurrent loop of `ProjectedLstmLayer` over packed steps (each step's running rows a prefix
of the batch, rows sorted longest first): its step, defined once, and the ways the steps run.

- `projected_lstm_step`: one step of TensorFlow's ``LSTMCell`` with a projection: the definition;
- `reference_recurrence`: its steps one after the other, with autograd; it is also what
  `compiled_step` compiles, and what the ONNX export's scan steps with;
- `recurrence_loop` (a fast path of it): the same steps in place, into buffers, with as few
  operator calls a step as it allows: training's forward (``record``) and inference;
- `recurrence_backward`: backpropagation through time, written out, which `training_recurrence`
  runs after either forward (`ProjectedLstmRecurrence`).

Why the hand-written backward: with autograd's per-step graph, each step's backward multiplies
(projection x batch) by (batch x 4 cell) for the recurrent weight and writes a whole weight-sized
gradient that is then added to the running sum; collecting the step gradients of the gates and
multiplying once does the same arithmetic in one large, fast multiply (docs/implementation.md).

Precision: the input gates and the state share the state's dtype, in which the gates, cells and
outputs are computed and kept. The weights may have a narrower one (bfloat16: `lstm_layer` passes
copies in the plan's products dtype); each step's two products then run in it, their operands
rounded to it, and their results join the state's dtype. The cell state, which accumulates over
the steps, never leaves the state's dtype. The fast paths keep what only feeds a product (h, a
product's result already; tanh(c) o; in backward the gradients the products read) in the
products' dtype between the steps, so that no step runs a conversion of its own: the same
values, to the bit, with the conversions once per call (docs/implementation.md).
"""
from typing import Callable, List, NamedTuple, Optional, Tuple

import torch

from elmo_plugin.modules.execution.fast_paths import fast_path

# The most running rows for which a step multiplies by the transposed weights, where inference
# is given them (`recurrence_loop`): the measured crossover of the two layouts in bfloat16.
FEW_ROWS_MAX = 16


class LstmWeights(NamedTuple):
    """
    What the recurrence reads of a `ProjectedLstmLayer`: ``recurrent`` ``(projection, 4 * cell)``
    and ``projection`` ``(cell, projection)``, in the products' dtype; the clips, None for none.
    """

    recurrent: torch.Tensor
    projection: torch.Tensor
    cell_clip: Optional[float] = None
    proj_clip: Optional[float] = None


class RecurrenceRecord(NamedTuple):
    """
    What a training forward keeps of every position for `recurrence_backward`: the gate
    activations (i, j, f, o after their sigmoid or tanh), the clipped cells and their tanh, and
    where each clip passed its value (None without that clip).
    """

    activations: torch.Tensor
    cells: torch.Tensor
    tanh_cells: torch.Tensor
    cell_passes: Optional[torch.Tensor]
    output_passes: Optional[torch.Tensor]


Recurrence = Tuple[torch.Tensor, torch.Tensor, torch.Tensor]  # packed outputs, final h and c


def projected_lstm_step(input_gates: torch.Tensor, h: torch.Tensor, c: torch.Tensor,
                        weights: LstmWeights, record: bool = False) -> Tuple:
    """
    One step of TensorFlow's ``LSTMCell`` with a projection for every row given, the one
    definition: ``input_gates`` ``(rows, 4 * cell)`` (the input half of the gates plus bias, in
    the state's dtype), the state ``h`` ``(rows, projection)``, ``c`` ``(rows, cell)``; returns the
    new ``(h, c)``, with ``record`` followed by what `RecurrenceRecord` keeps of the step (the
    activations, the tanh of the cell, the clips' passes). The two products run in the weights'
    dtype, everything else in the state's (``c``'s); where the dtypes agree the conversions are
    no-ops (nothing in a traced or exported graph).
    """
    matmul_dtype, state_dtype = weights.recurrent.dtype, c.dtype
    gates = input_gates + (h.to(matmul_dtype) @ weights.recurrent).to(state_dtype)
    i, j, f, o = gates.split(c.size(1), dim=1)
    i, j, f, o = torch.sigmoid(i), torch.tanh(j), torch.sigmoid(f), torch.sigmoid(o)
    c = f * c + i * j
    cell_passes = output_passes = None
    if weights.cell_clip is not None:
        if record:
            cell_passes = (c >= -weights.cell_clip) & (c <= weights.cell_clip)
        c = c.clamp(-weights.cell_clip, weights.cell_clip)
    tanh_c = torch.tanh(c)
    h = ((tanh_c * o).to(matmul_dtype) @ weights.projection).to(state_dtype)
    if weights.proj_clip is not None:
        if record:
            output_passes = (h >= -weights.proj_clip) & (h <= weights.proj_clip)
        h = h.clamp(-weights.proj_clip, weights.proj_clip)
    if not record:
        return h, c
    return h, c, torch.cat([i, j, f, o], dim=1), tanh_c, cell_passes, output_passes


def reference_recurrence(input_gates: torch.Tensor, h0: torch.Tensor, c0: torch.Tensor,
                         weights: LstmWeights, step_sizes: List[int], record: bool = False) -> Tuple:
    """
    The plain definition: `projected_lstm_step` over the packed steps, one after the other, with
    autograd. ``input_gates`` ``(real positions, 4 * cell)``, packed step by step; ``h0``
    ``(batch, projection)``, ``c0`` ``(batch, cell)``; ``step_sizes``: the running rows of each
    step. Returns the packed outputs ``(real positions, projection)`` and each row's final ``h``,
    ``c`` (its state after its own last step; the initial state for rows of length 0), and with
    ``record`` the `RecurrenceRecord` of the steps. Written for tracing as well (a loop over a
    number of steps fixed by the arguments, no branch on data), so that TorchDynamo captures it
    whole with the steps unrolled.
    """
    h, c = h0, c0
    outputs: List[torch.Tensor] = []
    kept: List[Tuple] = []  # with record: each step's cell and the rest it records
    # The final states of rows that have ended, in the order they ended: the shortest rows, at
    # the bottom of the batch, first.
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
    `reference_recurrence` without autograd, its arithmetic in place, with as few operator calls
    a step as it allows, into buffers: with ``record`` (training's forward) the buffers of every
    position that `RecurrenceRecord` keeps; without (inference) work buffers of one step's rows,
    written over by every step. The same arguments and results.

    Why work buffers: fresh tensors would come from newly mapped pages on every step, whose
    faults cost more than the step's arithmetic. Why so few calls: at batch 1 a step's work is
    tiny, so each operator call (Python, the dispatcher, making a view) weighs: every step's
    input gates and outputs are views made by one ``split`` each, and inference makes the work
    buffers' gate views again only when the number of running rows changes. (f and o are
    adjacent, but one sigmoid over both rounds some values differently from two, by one unit in
    the last place; kept apart, the outputs with and without ``record`` are equal to the bit, so
    validation in training computes what inference computes.) Where the weights' and the state's
    dtypes agree, a step adds its input gates inside the recurrent product (``addmm``), which
    rounds once less than the reference; else as the reference does.

    ``input_gates`` may come in the products' narrower dtype (bfloat16, as inference's input
    product made them) rather than the state's: each step then widens its rows into the work
    buffer and adds the recurrent product there, in the state's dtype: the same arithmetic as
    widening all of them first, to the bit, without a newly allocated tensor of every position.

    ``few_rows``: the recurrent and projection weights transposed, ``(4 * cell, projection)`` and
    ``(projection, cell)``, contiguous, in the products' dtype. Steps with at most `FEW_ROWS_MAX`
    running rows then multiply by these instead (one row: a matrix-vector product): the same
    products summed in another order (the results may differ in the last bit of the products'
    dtype), faster in bfloat16 on a CPU. docs/implementation.md ("The fast paths, measured") has
    the measurements behind each of these choices.
    """
    batch_size, cell_size = c0.shape
    num_positions = input_gates.size(0)
    matmul_dtype = weights.recurrent.dtype
    mixed = matmul_dtype != c0.dtype
    kept = num_positions if record else batch_size
    activations = c0.new_empty(kept, 4 * cell_size)
    cells = c0.new_empty(kept, cell_size)
    tanh_cells = c0.new_empty(kept, cell_size)
    # With narrower products the state h is kept in their dtype from step to step: a projection
    # product's result is already rounded to it (and the projection clip, 3 in the published
    # models, is exact in bfloat16), so keeping it loses nothing, and no step converts it again.
    # The product input tanh(c) o is written in it directly. Widened once, after the loop.
    hidden = c0.new_empty(batch_size, cell_size, dtype=matmul_dtype)
    outputs = h0.new_empty(num_positions, h0.size(1), dtype=matmul_dtype)
    cell_passes = output_passes = None
    if record:
        # Training keeps every position for its backward, each step's part a view made once.
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
            # gates = float(step_input) + float(h W): an addition in the state's dtype, as
            # below (adding the two bfloat16 tensors would round the sum to bfloat16).
            gates.copy_(step_input).add_(times(h, step_recurrent))
        elif mixed:
            torch.add(step_input, times(h, step_recurrent), out=gates)
        else:
            torch.addmm(step_input, h, weights.recurrent, out=gates)
        i.sigmoid_()
        j.tanh_()
        f.sigmoid_()
        o.sigmoid_()
        # The first step reads the caller's c0 and writes the buffer; later ones may update it
        # in place (elementwise, so reading and writing the same memory is safe).
        c = torch.mul(f, c, out=cell).addcmul_(i, j)
        if weights.cell_clip is not None:
            if record:
                torch.logical_and(c >= -weights.cell_clip, c <= weights.cell_clip,
                                  out=cell_pass_steps[step])
            c.clamp_(-weights.cell_clip, weights.cell_clip)
        torch.tanh(c, out=tanh_cell)
        torch.mul(tanh_cell, o, out=hidden_rows)
        if mixed:
            h = step_output.copy_(times(hidden_rows, step_projection))
        else:
            h = torch.mm(hidden_rows, weights.projection, out=step_output)
        if weights.proj_clip is not None:
            if record:
                torch.logical_and(h >= -weights.proj_clip, h <= weights.proj_clip,
                                  out=output_pass_steps[step])
            h.clamp_(-weights.proj_clip, weights.proj_clip)
    final_h = torch.cat([h.to(h0.dtype)] + ended_h[::-1])
    result = (outputs.to(h0.dtype), final_h, torch.cat([c] + ended_c[::-1]))
    if not record:
        return result
    return result + (RecurrenceRecord(activations, cells, tanh_cells, cell_passes, output_passes),)


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
    Backpropagation through time of a training forward (`reference_recurrence` or
    `recurrence_loop` with ``record``): from the gradients of its packed outputs and final
    states, those of ``input_gates``, ``h0``, ``c0`` and the two weights, each weight's in one
    product over all steps. Through the clips as ``torch.clamp`` (passed within the bounds, ends
    included). The products in the weights' dtype, as in forward, everything else in the
    state's. Eager for packed batches, traced by `compiled_step` for full ones.
    """
    activations, cells, tanh_cells, cell_passes, output_passes = record
    matmul_dtype, state_dtype = weights.recurrent.dtype, c0.dtype
    offsets = [0]
    for rows in step_sizes:
        offsets.append(offsets[-1] + rows)
    # With narrower products, what only feeds a product is kept in their dtype, written there by
    # the elementwise operation that computes it (rounded as converting it would round it): the
    # gates' and projected outputs' gradients, and the recurrent part of h's. So no step runs a
    # conversion of its own; the few results in the state's dtype are widened once, at the end.
    # (The input gates' gradient is rounded to the products' dtype anyway: they came from a
    # product in that dtype, whose backward converts it.)
    grad_gates = torch.empty_like(activations, dtype=matmul_dtype)
    # The gradient of each step's unclipped output.
    grad_projected = torch.empty_like(outputs, dtype=matmul_dtype)
    # The gradient of h after the step being processed that came back through the next step's
    # recurrent product, for the rows that ran that step; a row's gradient after its last step
    # is its final state's, added to its output's where that step reads it.
    grad_h = grad_final_h.new_empty(grad_final_h.shape, dtype=matmul_dtype)
    # Gradients of c after the step being processed, for the rows running then.
    grad_c = grad_final_c.clone()
    compiling = torch.compiler.is_compiling()  # TorchDynamo takes no out= into a block
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
            if compiling:
                d_projected[part] = gradient[part] + step_grad_outputs[part]
            else:
                torch.add(gradient[part], step_grad_outputs[part], out=d_projected[part])
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
        if compiling:
            step_gates.copy_(torch.cat([left * right for left, right in blocks], dim=1))
        else:
            for (left, right), block in zip(blocks, step_gates.chunk(4, dim=1)):
                torch.mul(left, right, out=block)
        if compiling:
            grad_h[:rows] = torch.mm(step_gates, weights.recurrent.t())
        else:
            torch.mm(step_gates, weights.recurrent.t(), out=grad_h[:rows])
        grad_c[:rows] = d_c * f
    # The gradient of h0: through the first step's product for the rows that ran it; rows of
    # length 0 never ran: their final-state gradient is their initial state's.
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
    """
    A training recurrence as one autograd function of ``forward`` (with `reference_recurrence`'s
    arguments and results, run with ``record``) and ``backward`` (`recurrence_backward`'s), then
    the input gates, states, the `LstmWeights`' tensors and clips, and the step sizes.
    """

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
    """`ProjectedLstmRecurrence` of ``forward`` and ``backward``: eagerly `recurrence_loop`'s and
    `recurrence_backward`; `compiled_step` passes what it compiled."""
    return ProjectedLstmRecurrence.apply(forward, backward, input_gates, h0, c0, *weights,
                                         step_sizes)
