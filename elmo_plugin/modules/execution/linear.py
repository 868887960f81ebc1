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
    ``F.linear(inputs, weight, bias)``, its operands rounded to the plan's products dtype (a frozen
    weight's copy kept between calls); PyTorch's own product, as AllenNLP core's (docs/implementation.md
    says why not oneDNN's faster, less exact one).
    """
    device_type, parameters = inputs.device.type, weight.dtype
    products = products_dtype(plan, device_type, parameters)
    if products != parameters and not (torch.is_grad_enabled() and weight.requires_grad):
        weight = kept_copy(weight, products)
    with products_in(products, device_type, parameters):
        return nn.functional.linear(inputs, weight, bias)
