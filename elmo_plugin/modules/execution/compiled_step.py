"""
The LSTM recurrence compiled with ``torch.compile`` (Inductor: C++ kernels on a CPU, Triton on a
GPU) for batches of a fixed shape, where every row runs every step: the biLM's training windows
(``unroll_steps`` tokens in every row) and inference batches whose sentences all have one length.
Compiled once for the shape, with the steps unrolled, each step's elementwise work is fused into
a few kernels and the steps run without Python between them (and without a launch per kernel
under CUDA graphs, ``mode="reduce-overhead"``): the eager loop launches two products and about
ten elementwise operators per step, which bound a GPU (docs/implementation.md).

What is compiled is the plain definition, `lstm_recurrence.reference_recurrence`, and for
training `lstm_recurrence.ProjectedLstmRecurrence` of it (``record``) and of the hand-written
`lstm_recurrence.recurrence_backward`, each one graph (autograd's own backward of the plain
recurrence makes one weight-gradient product per step: 0.6x eager at the Small size on a CPU).
The same arithmetic as the eager path within float32 rounding (fused kernels; the input gates
added outside the product). `lstm_layer.run_layer` asks `recurrence_for` once per call: None (the
eager loops) unless the plan's ``compile_mode`` is set and the batch has no padding.

Each new shape (with its dtypes, clips and whether gradients are needed) is compiled on its first
call, which is timed (forward and, for training, backward, on copies of the inputs) and logged
once. After `MAX_SHAPES` shapes, new ones run eagerly (each is one more compiled graph).
"""
import logging
import time
from typing import Callable, Dict, List, Optional, Set, Tuple

import torch

from elmo_plugin.modules.execution.fast_paths import fast_path
from elmo_plugin.modules.execution.lstm_recurrence import (
    LstmWeights,
    Recurrence,
    RecurrenceRecord,
    recurrence_backward,
    reference_recurrence,
    training_recurrence,
)
from elmo_plugin.modules.execution.plan import ExecutionPlan

logger = logging.getLogger(__name__)

# The most shapes compiled in one process; later shapes run eagerly.
MAX_SHAPES = 6

# Modes whose graphs replay as CUDA graphs on a GPU: their outputs live in memory that the next
# replay of the same graph writes over.
CUDA_GRAPH_MODES = ("reduce-overhead", "max-autotune")

_COMPILED: Dict[str, Callable] = {}  # the torch.compile'd functions, by name and mode
_SHAPES_SEEN: Set[Tuple] = set()
_OVER_LIMIT_LOGGED: List[bool] = [False]


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
        return _copy(function(*arguments))

    return copying


def _copy(value):
    if isinstance(value, torch.Tensor):
        return value.clone()
    if isinstance(value, RecurrenceRecord):
        return RecurrenceRecord(*(_copy(item) for item in value))
    if isinstance(value, tuple):
        return tuple(_copy(item) for item in value)
    return value


@fast_path(reference_recurrence, gradients=True, full_batches=True)
def traced_training_recurrence(
    input_gates: torch.Tensor, h0: torch.Tensor, c0: torch.Tensor, weights: LstmWeights,
    step_sizes: List[int],
) -> Recurrence:
    """What `compiled_recurrence` compiles for training, run eagerly."""
    return training_recurrence(input_gates, h0, c0, weights, step_sizes, reference_recurrence)


def compiled_recurrence(mode: str, needs_gradient: bool = False) -> Callable[..., Recurrence]:
    """
    The recurrence for a batch without padding, compiled in ``mode``, with
    `reference_recurrence`'s arguments: with gradients, `ProjectedLstmRecurrence` of the
    compiled forward and backward; without, the compiled `reference_recurrence`. Each graph
    whole (``fullgraph=True``: a graph break is an error, not a silent slowdown), with static
    shapes.
    """
    if not needs_gradient:
        return _compiled(reference_recurrence, mode)
    forward = _compiled(reference_recurrence, mode)
    backward = _compiled(recurrence_backward, mode)

    def recurrence(input_gates, h0, c0, weights, step_sizes):
        return training_recurrence(input_gates, h0, c0, weights, step_sizes, forward, backward)

    return recurrence


def recurrence_for(
    plan: Optional[ExecutionPlan], input_gates: torch.Tensor, h0: torch.Tensor, c0: torch.Tensor,
    weights: LstmWeights, step_sizes: List[int], needs_gradient: bool,
) -> Optional[Callable[..., Recurrence]]:
    """
    The compiled recurrence for this call, or None where the eager loops run it: the plan does
    not compile, or the batch has padding (``step_sizes`` not all the batch size: each pattern
    of lengths would be a graph of its own), or `MAX_SHAPES` other shapes were compiled already.
    The first call of a shape compiles it and logs the time it took.
    """
    mode = plan.compile_mode if plan is not None else None
    batch_size = c0.size(0)
    if mode is None or not step_sizes or step_sizes[-1] != batch_size:
        return None
    key = (
        mode, str(input_gates.device), needs_gradient, weights.cell_clip, weights.proj_clip,
        tuple((tuple(tensor.shape), tensor.dtype, tensor.requires_grad)
              for tensor in (input_gates, h0, c0, weights.recurrent, weights.projection)),
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
    seconds = _compile_now(function, (input_gates, h0, c0, weights, step_sizes), needs_gradient)
    _SHAPES_SEEN.add(key)
    logger.info(
        "compile: the LSTM recurrence for batch %d x %d steps (%d cells, projection %d, %s%s) "
        "compiled in %.1f s (mode %s, %s)",
        batch_size, len(step_sizes), c0.size(1), h0.size(1), weights.recurrent.dtype,
        ", forward and backward" if needs_gradient else ", no gradient", seconds, mode,
        input_gates.device,
    )
    return function


def _compile_now(function: Callable, arguments: Tuple, needs_gradient: bool) -> float:
    """
    Seconds to compile ``function`` for ``arguments``: one call on copies of them (and, where
    gradients are needed, a backward pass from it, which compiles the backward graph). The copies
    require gradients where the arguments do, and run with gradients enabled or not as the call
    will, since the compiled graph is specialised on both.
    """

    def copy(argument):
        if isinstance(argument, torch.Tensor):
            return argument.detach().clone().requires_grad_(argument.requires_grad)
        if isinstance(argument, LstmWeights):
            return LstmWeights(*(copy(item) for item in argument))
        return argument

    copies = tuple(copy(argument) for argument in arguments)
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
