"""
``F.linear(inputs, weight, bias)`` for the ``nn.Linear`` layers of the character encoder (highway,
projection), run as the plan says.
"""
from typing import Optional

import torch
from torch import nn

from elmo_plugin.modules.execution.plan import ExecutionPlan, products_dtype, products_in
from elmo_plugin.modules.execution.weight_copies import kept_copy


def linear(
    inputs: torch.Tensor,
    weight: torch.Tensor,
    bias: torch.Tensor,
    plan: Optional[ExecutionPlan] = None,
) -> torch.Tensor:
    """
    ``F.linear(inputs, weight, bias)``, its operands rounded to the plan's products dtype
    (`plan.products_in`); a frozen weight's copy in that dtype is kept between calls
    (`weight_copies`: the same bits). In the parameters' dtype, PyTorch's own product, as in
    AllenNLP core. (oneDNN's private ``torch.ops.mkldnn._linear_pointwise`` ran a few rows 1.4x
    as fast on a CPU, but 3x further from float64, and took our float32 output beyond twice core
    float32's distance on wide character encoders: docs/implementation.md.)
    """
    device_type, parameters = inputs.device.type, weight.dtype
    products = products_dtype(plan, device_type, parameters)
    if products != parameters and not (torch.is_grad_enabled() and weight.requires_grad):
        weight = kept_copy(weight, products)
    with products_in(products, device_type, parameters):
        return nn.functional.linear(inputs, weight, bias)
