"""
The LSTM recurrence under ``torch.compile`` for batches in which every row runs every step
(training windows, inference batches of one sentence length): the steps unrolled, each step's
elementwise work fused, no Python between steps (docs/implementation.md). What is compiled is
`lstm_recurrence.reference_recurrence`, and for training its recording forward and
`lstm_recurrence.recurrence_backward`, each one graph. Each new shape is compiled on its first
call, timed and logged once; after `MAX_SHAPES` shapes, new ones run eagerly.
"""
import functools
import logging
import time
from typing import Callable, List, Optional, Set, Tuple

import torch

from elmo_plugin.modules.execution.fast_paths import fast_path
from elmo_plugin.modules.execution.lstm_recurrence import (
    LstmWeights,
    Recurrence,
    recurrence_backward,
    reference_recurrence,
    training_recurrence,
)
from elmo_plugin.modules.execution.plan import ExecutionPlan

logger = logging.getLogger(__name__)

# The most shapes compiled in one process; later shapes run eagerly.
MAX_SHAPES = 6

# Modes whose graphs replay as CUDA graphs on a GPU (outputs written over by the next replay).
CUDA_GRAPH_MODES = ("reduce-overhead", "max-autotune")

_SHAPES_SEEN: Set[Tuple] = set()
_OVER_LIMIT_LOGGED: List[bool] = [False]


@functools.lru_cache(maxsize=None)
def _compiled(function: Callable, mode: str) -> Callable:
    compiled = torch.compile(function, fullgraph=True, dynamic=False, mode=None if mode == "default" else mode)
    return _copying_outputs(compiled) if mode in CUDA_GRAPH_MODES else compiled


def _copying_outputs(function: Callable) -> Callable:
    """
    ``function`` returning copies of its outputs: one CUDA graph serves every layer and direction
    of a shape, and its next replay would write over the outputs an earlier layer still needs.
    """

    def copying(*arguments):
        from torch.utils import _pytree as pytree  # private: imported only where a CUDA graph is compiled

        return pytree.tree_map_only(torch.Tensor, torch.clone, function(*arguments))

    return copying


@fast_path(reference_recurrence, gradients=True, full_batches=True)
def traced_training_recurrence(
    input_gates: torch.Tensor, h0: torch.Tensor, c0: torch.Tensor, weights: LstmWeights,
    step_sizes: List[int],
) -> Recurrence:
    """What `compiled_recurrence` compiles for training, run eagerly."""
    return training_recurrence(input_gates, h0, c0, weights, step_sizes, reference_recurrence)


def compiled_recurrence(mode: str, needs_gradient: bool = False) -> Callable[..., Recurrence]:
    """
    The recurrence for a batch without padding compiled in ``mode`` (whole graphs, static shapes),
    with `reference_recurrence`'s arguments; with gradients, with the compiled backward.
    """
    forward = _compiled(reference_recurrence, mode)
    if not needs_gradient:
        return forward
    backward = _compiled(recurrence_backward, mode)

    def recurrence(input_gates, h0, c0, weights, step_sizes):
        return training_recurrence(input_gates, h0, c0, weights, step_sizes, forward, backward)

    return recurrence


def recurrence_for(
    plan: Optional[ExecutionPlan], input_gates: torch.Tensor, h0: torch.Tensor, c0: torch.Tensor,
    weights: LstmWeights, step_sizes: List[int], needs_gradient: bool,
) -> Optional[Callable[..., Recurrence]]:
    """
    The compiled recurrence for this call, or None (eager) where the plan does not compile, the
    batch has padding (each pattern of lengths would be a graph) or `MAX_SHAPES` shapes are
    compiled already. A shape's first call compiles it and logs the time it took.
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
    """Seconds to compile ``function`` for ``arguments``: one call (and backward) on copies of them,
    with gradients required and enabled as the call will have them (the graph is specialised on both)."""
    from torch.utils import _pytree as pytree  # private: imported only when something is compiled

    copies = pytree.tree_map_only(
        torch.Tensor, lambda tensor: tensor.detach().clone().requires_grad_(tensor.requires_grad),
        arguments,
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
    _compiled.cache_clear()
    _OVER_LIMIT_LOGGED[0] = False
