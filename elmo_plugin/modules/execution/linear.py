"""
``layer(inputs)`` for the ``nn.Linear`` layers of the character encoder (highway, projection),
run the fastest way that computes it for this call.
"""
import torch
from torch import nn

from elmo_plugin.modules.execution.weight_copies import kept_copy


def linear(inputs: torch.Tensor, layer: nn.Linear) -> torch.Tensor:
    """
    ``layer(inputs)``. Under autocast with a frozen weight, the product takes the weight's copy
    in autocast's dtype kept between calls (`weight_copies`: the bits autocast's own conversion
    gives). Everywhere else ``layer(inputs)`` itself: in float32 that is PyTorch's own product,
    as in AllenNLP core. (oneDNN's private ``torch.ops.mkldnn._linear_pointwise`` ran a few rows
    1.4x as fast on a CPU, but 3x further from float64, and took our float32 output beyond
    twice core float32's distance on wide character encoders: docs/implementation.md.)
    """
    device_type = inputs.device.type
    if torch.is_autocast_enabled(device_type) and not (
        torch.is_grad_enabled() and layer.weight.requires_grad
    ):
        weight = kept_copy(layer.weight, torch.get_autocast_dtype(device_type))
        return nn.functional.linear(inputs, weight, layer.bias)
    return layer(inputs)
