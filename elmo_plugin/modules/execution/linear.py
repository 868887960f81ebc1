"""
``layer(inputs)`` for the ``nn.Linear`` layers of the character encoder (highway, projection),
run the fastest way that computes it for this call.
"""
import torch
from torch import nn

from elmo_plugin.modules.execution import small_batch_linear
from elmo_plugin.modules.execution.weight_copies import kept_copy


def linear(inputs: torch.Tensor, layer: nn.Linear) -> torch.Tensor:
    """
    ``layer(inputs)``. Under autocast with a frozen weight, the product takes the weight's copy
    in autocast's dtype kept between calls (`weight_copies`: the bits autocast's own conversion
    gives); in float32 inference on a CPU, a few rows go through `small_batch_linear`.
    """
    device_type = inputs.device.type
    if torch.is_grad_enabled() and layer.weight.requires_grad:
        return layer(inputs)
    if torch.is_autocast_enabled(device_type):
        weight = kept_copy(layer.weight, torch.get_autocast_dtype(device_type))
        return nn.functional.linear(inputs, weight, layer.bias)
    return small_batch_linear.linear(inputs, layer)
