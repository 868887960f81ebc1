"""
AllenNLP 0.x's conventions for ELMo's LSTM and highway layers (gate order i, f, j, o and ``(out, in)``
matrices; the forget bias of 1.0 stored in the bias; the highway gate's half negated), converted to
bilm-tf's, which our biLM keeps, for AllenNLP's biLM and ELMoForManyLangs' models alike
(docs/implementation.md, "Weight layouts").
"""
from typing import Dict, Tuple

import torch

from elmo_plugin.model_files import parameter_names as names

# What TensorFlow's LSTMCell (bilm-tf's, and `ProjectedLstmLayer` by default) adds to the forget
# gate at run time.
FORGET_BIAS = 1.0

# The parameters of an LstmCellWithProjection, by our name (`parameter_names.LSTM_PARAMETERS`).
LSTM_CELL_PARAMETERS = {
    "input_weight": "input_linearity.weight",
    "recurrent_weight": "state_linearity.weight",
    "bias": "state_linearity.bias",
    "projection_weight": "state_projection.weight",
}


def lstm_cell_key(direction: str, layer: int, parameter: str) -> str:
    """The key, relative to an ``ElmoLstm``, of what we call ``parameter`` in one of its layers
    (``forward_layer_0.input_linearity.weight``)."""
    return f"{direction}_layer_{layer}.{LSTM_CELL_PARAMETERS[parameter]}"


def highway_key(layer: int, kind: str) -> str:
    """The key, relative to a ``Highway``, of the ``kind`` (weight or bias) of ``layer``."""
    return f"_layers.{layer}.{kind}"


def lstm_cell_shape(parameter: str, our_shape: Tuple[int, ...]) -> Tuple[int, ...]:
    """The shape AllenNLP stores our LSTM ``parameter`` of ``our_shape`` in: matrices transposed."""
    our_shape = tuple(our_shape)
    return our_shape[::-1] if parameter in names.LSTM_MATRICES else our_shape


def _gates_to_tensorflow(tensor: torch.Tensor, cell_size: int) -> torch.Tensor:
    """Gate blocks along dim 0: AllenNLP's (i, f, j, o) to TensorFlow's (i, j, f, o)."""
    i, f, j, o = tensor.split(cell_size, dim=0)
    return torch.cat([i, j, f, o], dim=0)


def lstm_parameter_from_allennlp(parameter: str, value: torch.Tensor, cell_size: int) -> torch.Tensor:
    """Our LSTM ``parameter`` from the ``value`` AllenNLP stores for it, in a cell of ``cell_size``."""
    if parameter == "projection_weight":
        converted = value.t()
    elif parameter == "bias":
        converted = _gates_to_tensorflow(value, cell_size).clone()
        converted[2 * cell_size : 3 * cell_size] -= FORGET_BIAS
    else:
        converted = _gates_to_tensorflow(value, cell_size).t()
    return converted.contiguous()


def highway_parameter_from_allennlp(value: torch.Tensor) -> torch.Tensor:
    """Our highway layer's weight ``(2F, F)`` or bias ``(2F,)`` from AllenNLP's: gate half negated."""
    half = value.size(0) // 2
    return torch.cat([value[:half], -value[half:]])


def lstm_stack_from_allennlp(
    state: Dict[str, torch.Tensor], prefix: str, num_layers: int, cell_size: int
) -> Dict[str, torch.Tensor]:
    """Every parameter of our LSTM stacks from the ``ElmoLstm`` under ``prefix`` in ``state``."""
    return {
        names.lstm(direction, layer, parameter): lstm_parameter_from_allennlp(
            parameter, state[prefix + lstm_cell_key(direction, layer, parameter)], cell_size
        )
        for direction in names.DIRECTIONS
        for layer in range(num_layers)
        for parameter in names.LSTM_PARAMETERS
    }


def highways_from_allennlp(state: Dict[str, torch.Tensor], prefix: str, num_layers: int) -> Dict[str, torch.Tensor]:
    """Every parameter of our highway layers from the ``Highway`` under ``prefix`` in ``state``."""
    return {
        names.highway(layer, kind): highway_parameter_from_allennlp(state[prefix + highway_key(layer, kind)])
        for layer in range(num_layers)
        for kind in names.WEIGHT_AND_BIAS
    }
