"""
The arithmetic precision of a frozen biLM at inference: ``"float32"`` (the default) or
``"bfloat16"``, for `ElmoEmbedder`, ``allennlp elmo --precision``, `Elmo` and
``elmo_token_embedder``.

In bfloat16 the biLM runs under bfloat16 autocast, the mechanism that pretraining's
``mixed_precision`` uses (`elmo_plugin.models.elmo_language_model`): the matrix products take
bfloat16 operands (the character convolutions, the highway layers, the token projection, the
LSTM's input half for all steps, and its per-step recurrent and projection products, for which
`ProjectedLstmLayer` hands the recurrence bfloat16 copies of its two weights). What accumulates
stays float32: the LSTM's gates and cell state (summed over every step), the clipping, and the
convolution and highway sums outside the products. The layers come back as float32, so the
scalar mix, the HDF5 output and the numpy arrays are float32 whichever precision computed them.

bfloat16 only where the device multiplies it natively (`bfloat16_support`: a CPU with
AVX512-BF16 or AMX, or Arm's BF16; an Ampere or newer GPU), asked through the same helper as
training's ``mixed_precision`` (`elmo_plugin.modules.execution.bfloat16`). Elsewhere PyTorch
emulates bfloat16 products in software, many times slower
than float32 (17x for training on an AVX2-only AMD EPYC), so there is one warning and the biLM
runs in float32: the very same computation as ``precision="float32"``, to the bit.
"""
import logging
from typing import Dict, List, Union

import torch
from allennlp.common.checks import ConfigurationError

from elmo_plugin.modules.execution.bfloat16 import NativeBfloat16

logger = logging.getLogger(__name__)

PRECISIONS = ("float32", "bfloat16")


def check_precision(precision: str) -> str:
    """``precision`` if it is one of `PRECISIONS`, else a `ConfigurationError` naming them."""
    if precision not in PRECISIONS:
        raise ConfigurationError(
            f"precision must be one of {', '.join(PRECISIONS)}; got {precision!r}"
        )
    return precision


class InferencePrecision:
    """
    Runs a frozen biLM in the precision asked for, where the device allows it.

    Whether a device gets bfloat16 is decided the first time it is asked about
    (`uses_bfloat16`), with one log line: an info naming the hardware when it has native
    bfloat16, a warning saying that the biLM runs in float32 when it has not. Later calls
    neither ask again nor log again.

    # Parameters

    precision : `str`, optional (default = `"float32"`)
        ``"float32"`` or ``"bfloat16"``.
    native_only : `bool`, optional (default = `True`)
        Use bfloat16 only where the device has it natively. ``False`` uses it everywhere,
        emulated where it must be (slowly): for measuring its accuracy on any machine
        (``benchmarks/bfloat16_accuracy.py``), not for speed.
    """

    def __init__(self, precision: str = "float32", native_only: bool = True) -> None:
        self.precision = check_precision(precision)
        self.native_only = native_only
        self._native = NativeBfloat16(
            "precision bfloat16: the biLM's products in bfloat16 (%s)",
            "%s; precision bfloat16 would be emulated in software, many times slower than "
            "float32, so the biLM runs in float32",
            logger,
        )

    def uses_bfloat16(self, device: Union[torch.device, str]) -> bool:
        """Whether the biLM runs in bfloat16 on ``device`` (asked and logged once per device)."""
        if self.precision != "bfloat16":
            return False
        if not self.native_only:
            return True
        return self._native.on(device)

    def run_bilm(
        self, bilm: torch.nn.Module, character_ids: torch.Tensor
    ) -> Dict[str, Union[torch.Tensor, List[torch.Tensor]]]:
        """
        ``bilm(character_ids)`` (an `ElmoBiLm`'s output) with its products in bfloat16 where
        `uses_bfloat16`, and its ``"activations"`` in float32 either way. In float32 nothing
        is wrapped or converted: the output is the biLM's own.
        """
        if not self.uses_bfloat16(character_ids.device):
            return bilm(character_ids)
        with torch.autocast(character_ids.device.type, dtype=torch.bfloat16):
            output = bilm(character_ids)
        # The token layer comes out of the projection in bfloat16 (the LSTM layers are float32
        # already: their outputs are written into float32 buffers).
        output["activations"] = [layer.float() for layer in output["activations"]]
        return output

    def __repr__(self) -> str:
        return f"InferencePrecision({self.precision!r})"


def check_frozen(precision: str, requires_grad: bool) -> None:
    """
    A `ConfigurationError` when ``precision`` is bfloat16 and the biLM is trained
    (``requires_grad``: any of its parameters requires a gradient): the option is for inference
    with a frozen biLM. Fine-tuning in bfloat16 is
    mixed-precision training (float32 weights and optimizer, gradients through bfloat16
    products), which task models have not been measured with; silently running it in float32
    instead would hide that the option did nothing.
    """
    if precision == "bfloat16" and requires_grad:
        raise ConfigurationError(
            "precision 'bfloat16' is for a frozen biLM (requires_grad false): with "
            "requires_grad true the biLM is fine-tuned, which this option does not cover; use "
            "precision 'float32', or freeze the biLM"
        )
