"""
The LSTM recurrence compiled with ``torch.compile`` (Inductor: C++ kernels on a CPU, Triton on a
GPU) for batches of a fixed shape, where every row runs every step: the biLM's training windows
(``unroll_steps`` tokens in every row, the batch size fixed), and inference batches whose
sentences all have one length (batches bucketed by length).

Why: the eager recurrence (`lstm_recurrence`) launches two products and about ten elementwise
operators per step, layer and direction, from Python. On a GPU a step of the Original biLM is
then bound by launching them (issue 36: the GPU's kernels busy 27% of a training step). Compiled
once for the fixed shape, with the steps unrolled, each step's elementwise work is fused into a
few kernels and the forward and backward run without Python between the steps (and with CUDA
graphs, no launch per kernel either, under ``mode="reduce-overhead"``).

What is compiled computes what the eager path computes, within float32 rounding (not to the
bit: fused kernels and the input gates added outside the product). In training,
`CompiledRecurrence` is `lstm_recurrence.ProjectedLstmRecurrence` for a batch without padding:
its forward (`full_batch_training_forward`, the training loop) and its hand-written backward
(`full_batch_training_backward`, backpropagation through time with the weight gradients as two
large products) are each one compiled graph. (Compiling autograd's backward of the plain
recurrence instead makes one weight-gradient product per step, which the hand-written backward
exists to avoid; on a CPU that version was 0.6x eager at the Small size.) The clips pass
gradients where the value was within the bounds, ends included, as ``torch.clamp`` does. For
inference, `full_batch_recurrence` is `lstm_recurrence.reference_recurrence` without padding.
Tests compare them (tests/modules/test_compiled_step.py).

How it is switched on: one setting, `COMPILE_SETTINGS`, given by the training model's and the
embedder's ``compile`` option, held for the length of a call by `compiling` (a context variable,
so that the modules that define ELMo keep no branch for it). `lstm_layer.run_layer` asks
`recurrence_for` once per call, which answers None (the eager loops) unless the setting is on for
the device and the batch has no padding.

Each new shape (with its dtypes, clips and whether gradients are needed) is compiled on its first
call, and that call is timed: forward and, where gradients are needed, backward on copies of the
inputs, so that the one log line per shape names the whole compile time. After `MAX_SHAPES`
shapes, new ones run eagerly (each shape is one more compiled graph; TorchDynamo has a limit of
its own).
"""
import contextlib
import contextvars
import logging
import time
from typing import Callable, Dict, Iterator, List, Optional, Set, Tuple, Union

import torch

from elmo_plugin.modules.execution.lstm_recurrence import projected_lstm_step

logger = logging.getLogger(__name__)

# The values of the ``compile`` option: False (eager), True (torch.compile's default mode),
# "auto" (compiled where `COMPILED_BY_DEFAULT` says it was measured faster, eager elsewhere), or a
# torch.compile mode by name ("reduce-overhead" adds CUDA graphs on a GPU).
COMPILE_MODES = ("default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs")
COMPILE_SETTINGS = (False, True, "auto") + COMPILE_MODES

# Where "auto" compiles, by device type: only where the compiled path was measured faster than
# eager and equal to it within float32 rounding. On a CPU, issue 36 measured the Small size only,
# on a shared, overloaded machine (1.28x eager at batch 32 x 20, after a compile of 505 s): no
# basis for a default, so "auto" stays eager there until `benchmarks/training_compiled.py` is
# run alone at the Small and Original sizes. On a GPU it has not been measured yet (no GPU
# machine was lent to issue 36): `benchmarks/gpu/session.sh compiled 1|2|3` measures it, and this
# table is where the result goes (for example "cuda": "default").
COMPILED_BY_DEFAULT: Dict[str, Optional[str]] = {"cpu": None, "cuda": None}

# The most shapes compiled in one process; later shapes run eagerly.
MAX_SHAPES = 6

_SETTING: contextvars.ContextVar = contextvars.ContextVar("elmo_compile", default=False)
_COMPILED: Dict[str, Callable] = {}  # the torch.compile'd functions below, by name and mode
_SHAPES_SEEN: Set[Tuple] = set()
_OVER_LIMIT_LOGGED: List[bool] = [False]

Recurrence = Callable[..., Tuple[torch.Tensor, torch.Tensor, torch.Tensor]]


def check_compile_setting(setting: Union[bool, str], name: str = "compile") -> Union[bool, str]:
    """``setting`` if it is one of `COMPILE_SETTINGS`, else a `ValueError` naming them."""
    if isinstance(setting, bool) or setting in COMPILE_SETTINGS[2:]:
        return setting
    choices = ", ".join(repr(choice) for choice in COMPILE_SETTINGS)
    raise ValueError(f"{name} must be one of {choices}; got {setting!r}")


def compile_mode(setting: Union[bool, str], device: torch.device) -> Optional[str]:
    """The torch.compile mode that ``setting`` asks for on ``device``; None: run eagerly."""
    if setting is False:
        return None
    if setting is True:
        return "default"
    if setting == "auto":
        return COMPILED_BY_DEFAULT.get(device.type)
    return setting


@contextlib.contextmanager
def compiling(setting: Union[bool, str]) -> Iterator[None]:
    """
    Within this context, fixed-shape LSTM recurrences run compiled as ``setting`` asks
    (`COMPILE_SETTINGS`). Outside any such context they run eagerly. A backward pass started
    after the context ended still runs the compiled backward of what ran compiled inside it.
    """
    token = _SETTING.set(check_compile_setting(setting))
    try:
        yield
    finally:
        _SETTING.reset(token)


def full_batch_recurrence(
    input_gates: torch.Tensor,
    h0: torch.Tensor,
    c0: torch.Tensor,
    recurrent_weight: torch.Tensor,
    projection_weight: torch.Tensor,
    cell_clip: Optional[float],
    proj_clip: Optional[float],
) -> Tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """
    `lstm_recurrence.reference_recurrence` for a batch in which every row runs every step
    (``step_sizes`` all ``batch``): ``input_gates`` ``(steps * batch, 4 * cell)``, step-major;
    returns the outputs ``(steps * batch, projection)`` and the final ``h`` and ``c``. Written
    for tracing: a loop over a number of steps fixed by the shapes, no data-dependent branch, so
    that TorchDynamo captures it whole (``fullgraph=True``) with the steps unrolled. Products in
    the weights' dtype, everything else in the state's, as in the eager loops.
    """
    batch_size, cell_size = c0.shape
    num_steps = input_gates.size(0) // batch_size
    steps = input_gates.to(c0.dtype).view(num_steps, batch_size, 4 * cell_size)
    h, c = h0, c0
    outputs = []
    for step in range(num_steps):
        h, c = projected_lstm_step(
            steps[step], h, c, recurrent_weight, projection_weight, cell_clip, proj_clip
        )
        outputs.append(h)
    return torch.cat(outputs), h, c


def full_batch_training_forward(
    input_gates: torch.Tensor,
    h0: torch.Tensor,
    c0: torch.Tensor,
    recurrent_weight: torch.Tensor,
    projection_weight: torch.Tensor,
    cell_clip: Optional[float],
    proj_clip: Optional[float],
) -> Tuple[torch.Tensor, ...]:
    """
    `lstm_recurrence.training_loop` for a batch without padding, written for tracing (no
    ``out=`` buffers, no in-place updates): the outputs, the final ``h`` and ``c``, and what
    `full_batch_training_backward` needs (the gate activations, cells, tanh of the cells, and
    the clips' pass masks of every position). Runs without autograd (inside
    `CompiledRecurrence.forward`).
    """
    batch_size, cell_size = c0.shape
    num_steps = input_gates.size(0) // batch_size
    matmul_dtype, state_dtype = recurrent_weight.dtype, c0.dtype
    steps = input_gates.to(state_dtype).view(num_steps, batch_size, 4 * cell_size)
    h, c = h0, c0
    activations, cells, tanh_cells, cell_passes, outputs, output_passes = [], [], [], [], [], []
    for step in range(num_steps):
        gates = steps[step] + torch.mm(h.to(matmul_dtype), recurrent_weight).to(state_dtype)
        i, j, f, o = gates.split(cell_size, dim=1)
        i, j, f, o = torch.sigmoid(i), torch.tanh(j), torch.sigmoid(f), torch.sigmoid(o)
        c = f * c + i * j
        if cell_clip is not None:
            cell_passes.append((c >= -cell_clip) & (c <= cell_clip))
            c = c.clamp(-cell_clip, cell_clip)
        tanh_c = torch.tanh(c)
        h = torch.mm((tanh_c * o).to(matmul_dtype), projection_weight).to(state_dtype)
        if proj_clip is not None:
            output_passes.append((h >= -proj_clip) & (h <= proj_clip))
            h = h.clamp(-proj_clip, proj_clip)
        activations.append(torch.cat([i, j, f, o], dim=1))
        cells.append(c)
        tanh_cells.append(tanh_c)
        outputs.append(h)
    passes = (
        torch.cat(cell_passes) if cell_clip is not None else None,
        torch.cat(output_passes) if proj_clip is not None else None,
    )
    return (torch.cat(outputs), h, c, torch.cat(activations), torch.cat(cells),
            torch.cat(tanh_cells)) + passes


def full_batch_training_backward(
    grad_outputs: torch.Tensor,
    grad_final_h: torch.Tensor,
    grad_final_c: torch.Tensor,
    h0: torch.Tensor,
    c0: torch.Tensor,
    recurrent_weight: torch.Tensor,
    projection_weight: torch.Tensor,
    outputs: torch.Tensor,
    activations: torch.Tensor,
    cells: torch.Tensor,
    tanh_cells: torch.Tensor,
    cell_passes: Optional[torch.Tensor],
    output_passes: Optional[torch.Tensor],
) -> Tuple[torch.Tensor, ...]:
    """
    `ProjectedLstmRecurrence.backward` for a batch without padding, written for tracing: the
    same backpropagation through time, in the same order of operations, with the weight
    gradients as two large products over all steps (not one per step, as autograd's backward
    of `full_batch_recurrence` would make them: on a CPU those per-step products cost more
    than the rest of the backward). Returns the gradients of the input gates, ``h0``, ``c0`` and
    the two weights.
    """
    batch_size, cell_size = c0.shape
    num_steps = outputs.size(0) // batch_size
    matmul_dtype, state_dtype = recurrent_weight.dtype, c0.dtype
    grad_h, grad_c = grad_final_h, grad_final_c
    grad_gates: List[torch.Tensor] = []
    grad_projected: List[torch.Tensor] = []
    for step in range(num_steps - 1, -1, -1):
        span = slice(step * batch_size, (step + 1) * batch_size)
        i, j, f, o = activations[span].split(cell_size, dim=1)
        tanh_c = tanh_cells[span]
        d_projected = grad_h + grad_outputs[span]
        if output_passes is not None:
            d_projected = d_projected * output_passes[span]
        d_hidden = torch.mm(d_projected.to(matmul_dtype), projection_weight.t()).to(state_dtype)
        d_o = d_hidden * tanh_c
        d_c = grad_c + d_hidden * o * (1 - tanh_c * tanh_c)
        if cell_passes is not None:
            d_c = d_c * cell_passes[span]
        previous_c = c0 if step == 0 else cells[span.start - batch_size : span.start]
        step_gates = torch.cat([
            (d_c * j) * (i * (1 - i)),
            (d_c * i) * (1 - j * j),
            (d_c * previous_c) * (f * (1 - f)),
            d_o * (o * (1 - o)),
        ], dim=1)
        grad_gates.append(step_gates)
        grad_projected.append(d_projected)
        grad_h = torch.mm(step_gates.to(matmul_dtype), recurrent_weight.t())
        grad_c = d_c * f
    all_gates = torch.cat(grad_gates[::-1])
    all_projected = torch.cat(grad_projected[::-1])
    previous_h = torch.cat([h0, outputs[: (num_steps - 1) * batch_size]])
    grad_recurrent = previous_h.to(matmul_dtype).t() @ all_gates.to(matmul_dtype)
    hidden = tanh_cells * activations[:, 3 * cell_size :]  # tanh(c) * o
    grad_projection = hidden.to(matmul_dtype).t() @ all_projected.to(matmul_dtype)
    return all_gates, grad_h.to(state_dtype), grad_c, grad_recurrent, grad_projection


class CompiledRecurrence(torch.autograd.Function):
    """
    `ProjectedLstmRecurrence` for a batch without padding, with its forward
    (`full_batch_training_forward`) and its hand-written backward
    (`full_batch_training_backward`) each run as one compiled graph (the compiled functions
    come in ``ctx``-free arguments: ``forward_function``, ``backward_function``). The same
    arithmetic as the eager training path, in the same order, fused.
    """

    @staticmethod
    def forward(  # type: ignore[override]
        ctx, forward_function, backward_function, input_gates, h0, c0, recurrent_weight,
        projection_weight, cell_clip, proj_clip,
    ):
        (outputs, final_h, final_c, activations, cells, tanh_cells, cell_passes,
         output_passes) = forward_function(input_gates, h0, c0, recurrent_weight,
                                           projection_weight, cell_clip, proj_clip)
        ctx.save_for_backward(h0, c0, recurrent_weight, projection_weight, outputs,
                              activations, cells, tanh_cells, cell_passes, output_passes)
        ctx.backward_function = backward_function
        return outputs, final_h, final_c

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, grad_outputs, grad_final_h, grad_final_c):  # type: ignore[override]
        # Contiguous: the graph is compiled for the strides it first saw.
        gradients = ctx.backward_function(grad_outputs.contiguous(), grad_final_h.contiguous(),
                                          grad_final_c.contiguous(), *ctx.saved_tensors)
        return (None, None) + tuple(gradients) + (None, None)


def _training(mode: str) -> Recurrence:
    """The compiled training recurrence in ``mode``: `full_batch_recurrence`'s arguments."""
    forward_function = _compiled(full_batch_training_forward, mode)
    backward_function = _compiled(full_batch_training_backward, mode)

    def recurrence(input_gates, h0, c0, recurrent_weight, projection_weight, cell_clip,
                   proj_clip):
        return CompiledRecurrence.apply(forward_function, backward_function, input_gates, h0,
                                        c0, recurrent_weight, projection_weight, cell_clip,
                                        proj_clip)

    return recurrence


# Modes whose graphs replay as CUDA graphs on a GPU: their outputs live in memory that the next
# replay of the same graph writes over.
CUDA_GRAPH_MODES = ("reduce-overhead", "max-autotune")


def _compiled(function: Callable, mode: str) -> Callable:
    key = f"{function.__name__}:{mode}"
    if key not in _COMPILED:
        compiled = torch.compile(
            function, fullgraph=True, dynamic=False, mode=None if mode == "default" else mode
        )
        if mode in CUDA_GRAPH_MODES:
            compiled = _copying_outputs(compiled)
        _COMPILED[key] = compiled
    return _COMPILED[key]


def _copying_outputs(function: Callable) -> Callable:
    """
    ``function`` returning copies of its outputs. Under CUDA graphs the next replay of the same
    graph writes over the last one's outputs, and one graph serves every layer and direction of
    a shape: the first layer's outputs (kept for its backward, and added to the next layer's by
    the skip connection) would be overwritten by the second's. A copy costs one pass over them.
    """

    def copying(*arguments):
        return tuple(output.clone() if isinstance(output, torch.Tensor) else output
                     for output in function(*arguments))

    return copying


def compiled_recurrence(mode: str, needs_gradient: bool = False) -> Recurrence:
    """
    The recurrence for a batch without padding, compiled in ``mode``: with gradients,
    `CompiledRecurrence` (forward and hand-written backward, each one graph); without,
    `full_batch_recurrence`. Each graph whole (``fullgraph=True``: a graph break is an error,
    not a silent slowdown), with static shapes.
    """
    if needs_gradient:
        return _training(mode)
    return _compiled(full_batch_recurrence, mode)


def recurrence_for(
    input_gates: torch.Tensor,
    h0: torch.Tensor,
    c0: torch.Tensor,
    recurrent_weight: torch.Tensor,
    projection_weight: torch.Tensor,
    step_sizes: List[int],
    cell_clip: Optional[float],
    proj_clip: Optional[float],
    needs_gradient: bool,
) -> Optional[Recurrence]:
    """
    The compiled recurrence for this call, or None where the eager loops run it: the setting of
    the enclosing `compiling` is off for this device, or the batch has padding (``step_sizes``
    not all the batch size: each pattern of lengths would be a graph of its own), or
    `MAX_SHAPES` other shapes were compiled already. Takes `full_batch_recurrence`'s arguments.
    The first call of a shape compiles it and logs the time it took.
    """
    mode = compile_mode(_SETTING.get(), input_gates.device)
    batch_size = c0.size(0)
    if mode is None or not step_sizes or step_sizes[-1] != batch_size:
        return None
    key = (
        mode, str(input_gates.device), needs_gradient, torch.is_autocast_enabled(
            input_gates.device.type),
        tuple((tuple(tensor.shape), tensor.dtype, tensor.requires_grad)
              for tensor in (input_gates, h0, c0, recurrent_weight, projection_weight)),
        cell_clip, proj_clip,
    )
    function = compiled_recurrence(mode, needs_gradient)
    if key in _SHAPES_SEEN:
        return function
    if len(_SHAPES_SEEN) >= MAX_SHAPES:
        if not _OVER_LIMIT_LOGGED[0]:
            _OVER_LIMIT_LOGGED[0] = True
            logger.warning("compile: %d LSTM shapes compiled already; new shapes (batch %d x %d "
                           "steps) run eagerly", MAX_SHAPES, batch_size, len(step_sizes))
        return None
    arguments = (input_gates, h0, c0, recurrent_weight, projection_weight, cell_clip, proj_clip)
    seconds = _compile_now(function, arguments, needs_gradient)
    _SHAPES_SEEN.add(key)
    logger.info(
        "compile: the LSTM recurrence for batch %d x %d steps (%d cells, projection %d, %s%s) "
        "compiled in %.1f s (mode %s, %s)",
        batch_size, len(step_sizes), c0.size(1), h0.size(1), recurrent_weight.dtype,
        ", forward and backward" if needs_gradient else ", no gradient", seconds, mode,
        input_gates.device,
    )
    return function


def _compile_now(function: Callable, arguments: Tuple, needs_gradient: bool) -> float:
    """
    Seconds to compile ``function`` for ``arguments``: one call on copies of them (and, where
    gradients are needed, a backward pass from it, which compiles the backward graph: AOTAutograd
    compiles it on first use). The copies require gradients where the arguments do, and run with
    gradients enabled or not as the call will, since the compiled graph is specialised on both.
    """
    copies = tuple(
        argument.detach().clone().requires_grad_(argument.requires_grad)
        if isinstance(argument, torch.Tensor) else argument
        for argument in arguments
    )
    start = time.perf_counter()
    if needs_gradient:
        outputs = function(*copies)
        outputs[0].backward(torch.ones_like(outputs[0]))
    else:
        with torch.no_grad():
            function(*copies)
    if copies[0].device.type == "cuda":
        torch.cuda.synchronize(copies[0].device)
    return time.perf_counter() - start


def forget_compiled_shapes() -> None:
    """Forget which shapes were compiled (tests; TorchDynamo's own cache is reset separately)."""
    _SHAPES_SEEN.clear()
    _COMPILED.clear()
    _OVER_LIMIT_LOGGED[0] = False
