"""
``nn.Linear`` at inference on a few rows, through oneDNN's linear kernel where PyTorch has it.

Why: the highway layer of ELMo's character encoder multiplies each distinct token of a batch by
a 2,048 x 4,096 matrix (Small and Original: 32 MB). At batch 1 that is about 18 rows, and there
PyTorch's own float32 product (MKL, through ``torch.nn.functional.linear``) ran at 23 GFLOP/s on
an AVX2 AMD EPYC, against 37 for large products: the highway was the largest item of a Small
batch-1 call (15-18 ms of about 41). oneDNN's kernel (``torch.ops.mkldnn._linear_pointwise``,
the op PyTorch's own compiler uses for linear layers on CPU) did the same product in 8 ms, and
was faster from 8 to 600 rows (1 row: the same; measured with one thread, BENCHMARKS.md, issue
28). It is the same arithmetic (float32 products and sums, in another order: the results differ
by float rounding, 2e-4 on sums of 2,048 products of magnitude 45).

Only where nothing else is needed of the result: on the CPU, in float32, outside autocast
(bfloat16 inference keeps autocast's own linear), without gradients (the oneDNN op has no
backward), and for at most `MAX_ROWS` rows. Anywhere else, or if the op is missing or fails (an
older or a differently built PyTorch), ``layer(inputs)``.
"""
import logging

import torch
from torch import nn

logger = logging.getLogger(__name__)

# Beyond this many rows PyTorch's own product was as fast (1,408 rows: the same within noise).
MAX_ROWS = 512
# Whether the oneDNN op is there and works; None until first asked.
_onednn_usable = None


def _onednn_available() -> bool:
    global _onednn_usable
    if _onednn_usable is None:
        _onednn_usable = bool(
            torch.backends.mkldnn.is_available()
            and hasattr(torch.ops.mkldnn, "_linear_pointwise")
        )
    return _onednn_usable


def _onednn_linear(inputs: torch.Tensor, weight: torch.Tensor, bias) -> torch.Tensor:
    return torch.ops.mkldnn._linear_pointwise(inputs, weight, bias, "none", [], "")


def linear(inputs: torch.Tensor, layer: nn.Linear) -> torch.Tensor:
    """``layer(inputs)`` for ``(rows, in_features)`` inputs, through oneDNN where that pays."""
    global _onednn_usable
    if (
        inputs.dim() == 2
        and 1 < inputs.size(0) <= MAX_ROWS
        and inputs.device.type == "cpu"
        and inputs.dtype == torch.float32
        and layer.weight.dtype == torch.float32
        and not torch.is_autocast_enabled("cpu")
        and not (torch.is_grad_enabled() and (inputs.requires_grad or layer.weight.requires_grad))
        and _onednn_available()
    ):
        try:
            return _onednn_linear(inputs.contiguous(), layer.weight, layer.bias)
        except (RuntimeError, TypeError) as error:  # a PyTorch whose op differs
            _onednn_usable = False
            logger.info("oneDNN's linear is not usable here (%s); using torch's", error)
    return layer(inputs)
