"""
A training step (forward, loss, backward, gradient norm clipping, Adagrad's update of the
optimizer's own state) as one function of tensors with fixed shapes, run eagerly, compiled whole,
or captured as one CUDA graph: a biLM step on a GPU waits on launching its kernels, which a graph
replays at once. Everything the step touches lives at fixed addresses and nothing reads a value
on the host (docs/implementation.md, "The fixed-shape stream step and the step captured whole").
"""
import logging
from typing import Any, Callable, List, Optional, Sequence, Union

import torch

from elmo_plugin.modules.execution.plan import setting_error

logger = logging.getLogger(__name__)

# How a step runs: eagerly (False), compiled whole with torch.compile ("compiled"), or captured
# whole as one CUDA graph and replayed ("cuda_graph", CUDA devices only).
CAPTURE_SETTINGS = (False, "compiled", "cuda_graph")
# Eager steps before a CUDA graph is captured: the optimizer's state, autograd's and the
# libraries' lazy initialisations exist by then, and the gradients are allocated.
WARMUP_STEPS = 3


def check_capture_setting(setting: Union[bool, str], name: str = "capture") -> Union[bool, str]:
    """``setting`` if it is one of `CAPTURE_SETTINGS`, else a `ValueError` naming them."""
    if setting in CAPTURE_SETTINGS and setting is not True:
        return setting
    raise setting_error(name, setting, CAPTURE_SETTINGS)


def adagrad_update(parameters: Sequence[torch.Tensor], sums: Sequence[torch.Tensor], lr: float,
                   eps: float, foreach: bool) -> None:
    """torch's Adagrad update of ``parameters`` from their ``.grad`` and accumulators ``sums``
    (``lr_decay`` and ``weight_decay`` 0), operation for operation as its single-tensor or
    ``foreach`` path (they round differently)."""
    grads = [parameter.grad for parameter in parameters]
    if foreach:
        torch._foreach_addcmul_(list(sums), grads, grads, 1)
        std = torch._foreach_sqrt(list(sums))
        torch._foreach_add_(std, eps)
        scaled = torch._foreach_mul(grads, -lr)
        torch._foreach_addcdiv_(list(parameters), scaled, std)
        return
    for parameter, grad, state_sum in zip(parameters, grads, sums):
        state_sum.addcmul_(grad, grad, value=1)
        std = state_sum.sqrt().add_(eps)
        parameter.addcdiv_(grad, std, value=-lr)


class CapturedStep:
    """
    One training step of ``loss_function``, gradient clipping and ``optimizer``'s update, run as
    ``capture`` says. Calling it runs a step and returns the loss, detached, on the device.

    # Parameters

    loss_function : `Callable[..., torch.Tensor]`
        The forward pass and loss; its tensors' shapes must depend on its inputs' shapes only.
    optimizer : `torch.optim.Adagrad`
        Its state updated as its own ``step`` would; ``lr_decay`` and ``weight_decay`` 0, gradients dense.
    max_norm : `float`, optional
        Clip the gradients to this global norm; None: no clipping.
    capture : `Union[bool, str]`, optional (default = `False`)
        One of `CAPTURE_SETTINGS`. ``"cuda_graph"`` captures after `WARMUP_STEPS` eager steps; a
        call of other shapes or non-tensor values than the captured ones runs eagerly, with one warning.
    """

    def __init__(self, loss_function: Callable[..., torch.Tensor], optimizer: torch.optim.Adagrad,
                 max_norm: Optional[float] = None, capture: Union[bool, str] = False) -> None:
        self.capture = check_capture_setting(capture)
        for group in optimizer.param_groups:
            if group["lr_decay"] != 0 or group["weight_decay"] != 0 or group["maximize"]:
                raise ValueError("a captured step's Adagrad takes no lr_decay, weight_decay or "
                                 "maximize")
        self.loss_function = loss_function
        self.optimizer = optimizer
        self.max_norm = max_norm
        self.parameters: List[torch.Tensor] = [
            parameter for group in optimizer.param_groups for parameter in group["params"]
            if parameter.requires_grad
        ]
        if self.capture == "cuda_graph" and not all(
                parameter.device.type == "cuda" for parameter in self.parameters):
            raise ValueError("capture 'cuda_graph' needs the parameters on a CUDA device")
        self._compiled: Optional[Callable] = None
        self._graph: Optional[Any] = None  # torch.cuda.CUDAGraph once captured
        self._static_inputs: Optional[List[torch.Tensor]] = None
        self._static_loss: Optional[torch.Tensor] = None
        self._static_others: List[Any] = []
        self._other_shapes_warned = False
        self.steps = 0

    def step(self, *inputs: Any) -> torch.Tensor:
        """The step itself, eager: what the other ways of running it must equal."""
        self._zero_gradients()
        return self._step_from_zero_gradients(*inputs)

    def _zero_gradients(self) -> None:
        # In place: a CUDA graph replays the same buffers. Outside the compiled function, whose
        # backward (a graph break) accumulates into buffers the compiled code did not touch.
        gradients = [parameter.grad for parameter in self.parameters if parameter.grad is not None]
        if gradients:
            torch._foreach_zero_(gradients)

    def _step_from_zero_gradients(self, *inputs: Any) -> torch.Tensor:
        loss = self.loss_function(*inputs)
        loss.backward()
        trained = [parameter for parameter in self.parameters if parameter.grad is not None]
        if any(parameter.grad.is_sparse for parameter in trained):
            raise ValueError("a captured step needs dense gradients (the softmax's "
                             "sparse_gradients off)")
        if self.max_norm is not None:
            torch.nn.utils.clip_grad_norm_(trained, self.max_norm)
        with torch.no_grad():
            for group in self.optimizer.param_groups:
                parameters = [p for p in group["params"] if p.grad is not None]
                foreach = group["foreach"]
                if foreach is None:  # torch's default: foreach on a GPU, a loop on a CPU
                    foreach = bool(parameters) and parameters[0].device.type == "cuda"
                adagrad_update(parameters, [self.optimizer.state[p]["sum"] for p in parameters],
                               group["lr"], group["eps"], foreach)
        return loss.detach()

    def __call__(self, *inputs: Any) -> torch.Tensor:
        if self.capture == "compiled":
            if self._compiled is None:
                self._compiled = torch.compile(self._step_from_zero_gradients)
            self._zero_gradients()
            loss = self._compiled(*inputs)
        elif self.capture == "cuda_graph":
            loss = self._on_cuda_graph(inputs)
        else:
            loss = self.step(*inputs)
        self._count_step()
        return loss

    def _count_step(self) -> None:
        """The optimizer's step counts, on the host as torch keeps them, outside any graph."""
        self.steps += 1
        for parameter in self.parameters:
            state = self.optimizer.state[parameter]
            if "step" in state and parameter.grad is not None:
                state["step"] += 1

    def _on_cuda_graph(self, inputs: Any) -> torch.Tensor:
        """`WARMUP_STEPS` eager steps on a side stream (torch's recipe), then the step captured once
        (its batch runs by the first replay) and replayed with each call's inputs copied in."""
        from torch.utils import _pytree as pytree  # private: imported only on the CUDA-graph path

        flat = [value for value in pytree.tree_leaves(inputs) if isinstance(value, torch.Tensor)]
        if self.steps < WARMUP_STEPS:
            side = torch.cuda.Stream()
            side.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(side):
                loss = self.step(*inputs)
            torch.cuda.current_stream().wait_stream(side)
            return loss
        others = [value for value in pytree.tree_leaves(inputs)
                  if not isinstance(value, torch.Tensor)]
        if self._graph is None:
            # Numbers and other values are captured as constants: they must not change.
            self._static_others = others
            static = pytree.tree_map_only(torch.Tensor, torch.clone, inputs)
            self._static_inputs = [value for value in pytree.tree_leaves(static) if isinstance(value, torch.Tensor)]
            self._graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(self._graph):
                self._static_loss = self.step(*static)
            logger.info("capture: the training step captured as one CUDA graph")
        assert self._static_inputs is not None and self._static_loss is not None
        if others != self._static_others or [tensor.shape for tensor in flat] != [
                tensor.shape for tensor in self._static_inputs]:
            if not self._other_shapes_warned:
                self._other_shapes_warned = True
                logger.warning("capture: a batch of other shapes than the captured step's runs "
                               "eagerly")
            return self.step(*inputs)
        for static, tensor in zip(self._static_inputs, flat):
            static.copy_(tensor)
        self._graph.replay()
        return self._static_loss.clone()
