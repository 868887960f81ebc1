"""
How the biLM runs, decided once: an `ExecutionPlan`, built from the device and the settings and
handed down as a value to the character encoder and every LSTM layer. ``None`` wherever a plan
is taken is plain PyTorch (docs/implementation.md, "How it runs: one execution plan").
"""
import contextlib
from dataclasses import dataclass
from typing import Any, ContextManager, Dict, Iterable, Iterator, Optional, Sequence, Type, Union

import torch

# The values of a ``compile`` setting: False (eager), True (torch.compile's default mode), "auto"
# (compiled where `COMPILED_BY_DEFAULT` says it was measured faster, eager elsewhere), or a
# torch.compile mode by name ("reduce-overhead" adds CUDA graphs on a GPU).
COMPILE_MODES = ("default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs")
COMPILE_SETTINGS = (False, True, "auto") + COMPILE_MODES
# Where "auto" compiles, by device type: nowhere yet (docs/implementation.md says why), until
# `benchmarks/gpu/session.sh compiled 1|2|3` measures it faster (then, say, "cuda": "default").
COMPILED_BY_DEFAULT: Dict[str, Optional[str]] = {"cpu": None, "cuda": None}


def setting_error(name: str, setting: Any, choices: Sequence, error: Type[Exception] = ValueError) -> Exception:
    """The ``error`` for a ``setting`` of ``name`` that is none of ``choices``, naming them."""
    return error(f"{name} must be one of {', '.join(repr(choice) for choice in choices)}; got {setting!r}")


def check_compile_setting(setting: Union[bool, str], name: str = "compile",
                          error: Type[Exception] = ValueError) -> Union[bool, str]:
    """``setting`` if it is one of `COMPILE_SETTINGS`, else an ``error`` naming them."""
    if isinstance(setting, bool) or setting in COMPILE_SETTINGS[2:]:
        return setting
    raise setting_error(name, setting, COMPILE_SETTINGS, error)


@dataclass(frozen=True)
class ExecutionPlan:
    """
    How the biLM runs on one device; what it computes is the modules'.

    # Parameters

    device : `torch.device`
    products : `torch.dtype`, optional (default = `None`)
        The dtype the matrix products round their operands to (bfloat16, where the device has
        it natively); what accumulates stays in the parameters' dtype. None: as without a plan.
    compile_mode : `str`, optional (default = `None`)
        The ``torch.compile`` mode of the LSTM recurrence for batches without padding
        (`compiled_step`); None: the eager loops.
    tf32 : `bool`, optional (default = `None`)
        On a CUDA device, float32 products in TF32 (True) or plain float32 (False) while the plan
        runs (`float32_products`, `tf32_through_backward`); None leaves the process's setting.
    fixed_shape : `bool`, optional (default = `False`)
        Every row of every batch runs every step (stream training's windows): no lengths read by
        the host, no shape from the data (the LSTM, token encoder and convolutions run every row,
        position and window). The same outputs; a padded row's carried state runs over its padding.
    """

    device: torch.device
    products: Optional[torch.dtype] = None
    compile_mode: Optional[str] = None
    tf32: Optional[bool] = None
    fixed_shape: bool = False

    @classmethod
    def build(cls, device: Union[torch.device, str], products: Optional[torch.dtype] = None,
              compile: Union[bool, str] = False, tf32: Optional[bool] = None,
              fixed_shape: bool = False) -> "ExecutionPlan":
        """The plan of ``device`` for a ``compile`` setting, and ``tf32`` only on CUDA (whose
        flag it is: oneDNN's own precision setting is not touched)."""
        device = torch.device(device)
        mode = {False: None, True: "default", "auto": COMPILED_BY_DEFAULT.get(device.type)}.get(
            check_compile_setting(compile), compile)
        return cls(device, products, mode, tf32 if device.type == "cuda" else None, fixed_shape)


def fixed_shape(plan: Optional[ExecutionPlan]) -> bool:
    """Whether ``plan`` runs every row every step (`ExecutionPlan`'s ``fixed_shape``)."""
    return plan is not None and plan.fixed_shape


def products_dtype(plan: Optional[ExecutionPlan], device_type: str, parameters: torch.dtype
                   ) -> torch.dtype:
    """
    The dtype that products of ``parameters``-dtype weights run in: the plan's; else, for float32
    weights, that of an autocast the caller entered (which PyTorch's layers follow); else theirs.
    """
    if plan is not None and plan.products is not None:
        return plan.products
    if parameters == torch.float32 and torch.is_autocast_enabled(device_type):
        return torch.get_autocast_dtype(device_type)
    return parameters


def products_in(products: torch.dtype, device_type: str, parameters: torch.dtype
                ) -> ContextManager[None]:
    """Within: the products' operands rounded to ``products`` where that differs from
    ``parameters``, by autocast (so with autocast's bits); else nothing."""
    if products == parameters:
        return contextlib.nullcontext()
    return torch.autocast(device_type, dtype=products)


@contextlib.contextmanager
def float32_products(plan: Optional[ExecutionPlan]) -> Iterator[None]:
    """Within: the plan's TF32 setting of CUDA's float32 products; the one before, afterwards."""
    if plan is None or plan.tf32 is None or plan.device.type != "cuda":
        yield
        return
    before = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = plan.tf32
    try:
        yield
    finally:
        torch.backends.cuda.matmul.allow_tf32 = before


@contextlib.contextmanager
def running(plan: Optional[ExecutionPlan]) -> Iterator[None]:
    """Within: `float32_products` and autocast to the plan's products (off without them), for code
    that takes no plan (the softmax, AllenNLP's biLM). No plan: nothing changes."""
    if plan is None:
        yield
        return
    with torch.autocast(plan.device.type, dtype=plan.products or torch.bfloat16,
                        enabled=plan.products is not None), float32_products(plan):
        yield


def tf32_through_backward(plan: Optional[ExecutionPlan], loss: torch.Tensor,
                          parameters: Iterable[torch.Tensor]) -> None:
    """The plan's TF32 setting for the backward pass of ``loss`` too (after `float32_products`
    restored it): set when it starts, restored once the gradients of ``parameters`` are computed."""
    if plan is None or plan.tf32 is None or plan.device.type != "cuda" or not loss.requires_grad:
        return
    trained = [parameter for parameter in parameters if parameter.requires_grad]

    def start(_gradient: torch.Tensor) -> None:
        setting = contextlib.ExitStack()
        setting.enter_context(float32_products(plan))

        def end(_gradients) -> None:
            handle.remove()
            setting.close()

        # Registered when the backward pass starts: a forward pass without one leaves nothing.
        handle = torch.autograd.graph.register_multi_grad_hook(trained, end)

    loss.register_hook(start)
