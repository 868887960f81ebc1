"""
The arithmetic precision of a frozen biLM at inference, ``"float32"`` or ``"bfloat16"``, decided
once per device into the biLM's execution plan with the embedder's ``compile`` and ``tf32``
(`InferenceSettings`). What runs in bfloat16, and where (only on native bfloat16, else one
warning and float32, to the bit): docs/embedding.md, "Precision".
"""
import logging
from typing import Dict, List, Optional, Union

import torch
from allennlp.common.checks import ConfigurationError

from elmo_plugin.common.threads import threads_for_call
from elmo_plugin.modules.bilm import ElmoBiLm
from elmo_plugin.modules.execution.bfloat16 import NativeBfloat16
from elmo_plugin.modules.execution.plan import ExecutionPlan, check_compile_setting, float32_products, running

logger = logging.getLogger(__name__)

PRECISIONS = ("float32", "bfloat16")


def check_precision(precision: str) -> str:
    """``precision`` if it is one of `PRECISIONS`, else a `ConfigurationError` naming them."""
    if precision not in PRECISIONS:
        raise ConfigurationError(
            f"precision must be one of {', '.join(PRECISIONS)}; got {precision!r}"
        )
    return precision


class InferenceSettings:
    """
    How a frozen biLM runs at inference, decided into an `ExecutionPlan` once per device (`plan`),
    with one log line the first time a device is asked about: an info naming its native bfloat16,
    or a warning that the biLM runs in float32.

    # Parameters

    precision : `str`, optional (default = `"float32"`)
        ``"float32"`` or ``"bfloat16"``.
    compile : `Union[bool, str]`, optional (default = `False`)
        The LSTM's recurrence compiled for batches of one length (`ExecutionPlan`).
    tf32 : `bool`, optional (default = `None`)
        On a CUDA GPU, float32 products in TF32 (True) or plain float32 (False) during each call;
        None leaves the process's setting.
    native_only : `bool`, optional (default = `True`)
        Use bfloat16 only where the device has it natively. ``False`` uses it everywhere,
        emulated where it must be (slowly): for measuring its accuracy on any machine
        (``benchmarks/bfloat16_accuracy.py``), not for speed.
    """

    def __init__(self, precision: str = "float32", compile: Union[bool, str] = False,
                 tf32: Optional[bool] = None, native_only: bool = True) -> None:
        self.precision = check_precision(precision)
        self.compile = check_compile_setting(compile, error=ConfigurationError)
        self.tf32 = tf32
        self.native_only = native_only
        self._native = NativeBfloat16(
            "precision bfloat16: the biLM's products in bfloat16 (%s)",
            "%s; precision bfloat16 would be emulated in software, many times slower than "
            "float32, so the biLM runs in float32",
            logger,
        )
        self._plans: Dict[torch.device, Optional[ExecutionPlan]] = {}

    def plan(self, device: Union[torch.device, str]) -> Optional[ExecutionPlan]:
        """The plan on ``device``; None where that is plain PyTorch (float32, eager, TF32 as it is)."""
        device = torch.device(device)
        if device not in self._plans:
            bfloat16 = self.precision == "bfloat16" and (not self.native_only or self._native.on(device))
            plan = ExecutionPlan.build(device, torch.bfloat16 if bfloat16 else None, self.compile, self.tf32)
            self._plans[device] = None if plan == ExecutionPlan(device) else plan
        return self._plans[device]


def run_bilm(bilm: torch.nn.Module, character_ids: torch.Tensor, plan: Optional[ExecutionPlan]
             ) -> Dict[str, Union[torch.Tensor, List[torch.Tensor]]]:
    """
    ``bilm(character_ids)`` run as ``plan`` says: an `ElmoBiLm` is handed the plan, another module
    (AllenNLP's ``_ElmoBiLm``) runs under it (`running`); the ``"activations"`` come back float32.
    On the CPU, on the threads that `threads_for_call` chooses for the batch and the load.
    """
    if character_ids.device.type != "cpu":
        return _run_bilm(bilm, character_ids, plan)
    with threads_for_call(character_ids.shape[0]):
        return _run_bilm(bilm, character_ids, plan)


def _run_bilm(bilm: torch.nn.Module, character_ids: torch.Tensor, plan: Optional[ExecutionPlan]
              ) -> Dict[str, Union[torch.Tensor, List[torch.Tensor]]]:
    if plan is None:
        return bilm(character_ids)
    if isinstance(bilm, ElmoBiLm):
        with float32_products(plan):
            output = bilm(character_ids, execution=plan)
    else:
        with running(plan):
            output = bilm(character_ids)
    if plan.products is not None:
        # The token layer comes out of the projection in the products' dtype (the LSTM layers
        # are float32 already: their outputs are written into float32 buffers).
        output["activations"] = [layer.float() for layer in output["activations"]]
    return output


def check_frozen(precision: str, requires_grad: bool) -> None:
    """
    A `ConfigurationError` for bfloat16 with a trained biLM: fine-tuning in bfloat16 has not been
    measured with task models, and running it in float32 instead would hide that the option did
    nothing.
    """
    if precision == "bfloat16" and requires_grad:
        raise ConfigurationError(
            "precision 'bfloat16' is for a frozen biLM (requires_grad false): with "
            "requires_grad true the biLM is fine-tuned, which this option does not cover; use "
            "precision 'float32', or freeze the biLM"
        )
