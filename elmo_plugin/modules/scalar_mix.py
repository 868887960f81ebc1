"""
ELMo's layer mix (Peters et al. 2018, eq. 1): ``gamma * sum_j softmax(s)_j * h_j``.
"""
from typing import List, Optional, Sequence

import torch
from allennlp.common import Registrable
from allennlp.common.checks import ConfigurationError
from allennlp.nn.util import tiny_value_of_dtype


class ScalarMix(torch.nn.Module, Registrable):
    """
    Mixes the ``L + 1`` layers of a biLM into one vector per token: ``gamma * sum_j softmax(s)_j *
    h_j``, with ``s`` starting at zero and ``gamma`` at one; with ``do_layer_norm`` each layer is
    first normalised over all its unmasked elements in the batch, as bilm-tf and AllenNLP do.

    The parameters are AllenNLP's, under its names (``scalar_parameters``, one-element parameters,
    and ``gamma``; docs/implementation.md says why). Registered as ``"softmax"`` (the default).

    # Parameters

    num_layers : `int`
        The number of layers to mix (the biLM's ``num_layers``: 3 for a 2-layer biLM).
    do_layer_norm : `bool`, optional (default = `False`)
        Normalise every layer over the batch's unmasked elements before mixing.
    initial_scalar_parameters : `List[float]`, optional (default = `None`)
        Pre-softmax layer weights to start from; zeros (an equal mix) if not given.
    trainable : `bool`, optional (default = `True`)
        Learn ``s`` and ``gamma``; ``False`` with ``initial_scalar_parameters``: a fixed mix.
    mixture_size : `int`, optional
        AllenNLP's name for ``num_layers``.
    """

    default_implementation = "softmax"

    def __init__(
        self,
        num_layers: Optional[int] = None,
        do_layer_norm: bool = False,
        initial_scalar_parameters: Optional[List[float]] = None,
        trainable: bool = True,
        mixture_size: Optional[int] = None,
    ) -> None:
        super().__init__()
        if (num_layers is None) == (mixture_size is None):
            raise ConfigurationError("give the number of layers once, as num_layers (or AllenNLP's mixture_size)")
        num_layers = mixture_size if num_layers is None else num_layers
        if num_layers < 1:
            raise ConfigurationError(f"a scalar mix needs at least one layer, got {num_layers}")
        if initial_scalar_parameters is None:
            initial_scalar_parameters = [0.0] * num_layers
        if len(initial_scalar_parameters) != num_layers:
            raise ConfigurationError(
                f"{len(initial_scalar_parameters)} initial scalar parameters "
                f"{list(initial_scalar_parameters)} for a mix of {num_layers} layers"
            )
        self.num_layers = num_layers
        self.do_layer_norm = do_layer_norm
        self.scalar_parameters = torch.nn.ParameterList(
            [
                torch.nn.Parameter(torch.tensor([float(value)]), requires_grad=trainable)
                for value in initial_scalar_parameters
            ]
        )
        self.gamma = torch.nn.Parameter(torch.tensor([1.0]), requires_grad=trainable)

    @property
    def mixture_size(self) -> int:
        """AllenNLP's name for `num_layers`."""
        return self.num_layers

    def layer_weights(self) -> torch.Tensor:
        """The normalised weights ``softmax(s)``, one per layer (what the paper's Figure 2 plots)."""
        return torch.softmax(torch.cat(list(self.scalar_parameters)), dim=0)

    def _load_from_state_dict(self, state_dict, prefix, *args, **kwargs):
        # elmo_plugin 0.1 saved the layer weights as one vector under "scalar_parameters" itself.
        key = prefix + "scalar_parameters"
        if key in state_dict:
            vector = state_dict.pop(key)
            if vector.dim() != 1:
                raise ConfigurationError(
                    f"{key} has shape {tuple(vector.shape)}; a scalar mix's weights are a vector"
                )
            for index, value in enumerate(vector):
                state_dict[f"{key}.{index}"] = value.reshape(1)
        super()._load_from_state_dict(state_dict, prefix, *args, **kwargs)

    def forward(
        self, layers: Sequence[torch.Tensor], mask: Optional[torch.BoolTensor] = None
    ) -> torch.Tensor:
        """
        # Parameters

        layers : `Sequence[torch.Tensor]`
            ``num_layers`` tensors of the same shape ``(batch, time, dim)``.
        mask : `torch.BoolTensor`, optional
            ``(batch, time)``; required with ``do_layer_norm``.
        """
        if len(layers) != self.num_layers:
            raise ConfigurationError(
                f"{len(layers)} tensors were passed, but the mix was built for {self.num_layers}"
            )
        weights = self.layer_weights()
        if self.do_layer_norm:
            if mask is None:
                raise ConfigurationError("a mix with do_layer_norm needs the mask")
            broadcast_mask = mask.unsqueeze(-1).to(layers[0].dtype)
            count = broadcast_mask.sum() * layers[0].size(-1)
            layers = [_masked_layer_norm(layer, broadcast_mask, count) for layer in layers]
        stacked = torch.stack(list(layers), dim=0)
        mixed = torch.tensordot(weights.to(stacked.dtype), stacked, dims=1)
        return self.gamma.to(mixed.dtype) * mixed


def _masked_layer_norm(
    layer: torch.Tensor, broadcast_mask: torch.Tensor, count: torch.Tensor
) -> torch.Tensor:
    # Statistics over every unmasked element of the batch (not per token): bilm-tf's and
    # AllenNLP's definition, kept so that published mixes behave the same.
    masked = layer * broadcast_mask
    mean = masked.sum() / count
    variance = (((masked - mean) * broadcast_mask) ** 2).sum() / count
    return (layer - mean) / torch.sqrt(variance + tiny_value_of_dtype(variance.dtype))


ScalarMix.register("softmax")(ScalarMix)


@ScalarMix.register("single_layer")
class SingleLayerMix(ScalarMix):
    """
    A fixed mix that returns one layer unchanged.

    # Parameters

    num_layers, do_layer_norm
        As `ScalarMix`'s.
    layer : `int`
        The layer to return: 0 the character-based token layer, 1..L the LSTM layers, -1 the top.
    """

    def __init__(self, num_layers: int, layer: int, do_layer_norm: bool = False) -> None:
        if not -num_layers <= layer < num_layers:
            raise ConfigurationError(f"layer {layer} of a biLM with {num_layers} layers")
        self.layer = layer % num_layers
        # -inf would make softmax produce NaN gradients if anyone unfroze it; a large negative
        # number gives exactly 0.0 in float32 all the same.
        initial = [-9e10] * num_layers
        initial[self.layer] = 0.0
        super().__init__(num_layers, do_layer_norm, initial, trainable=False)
