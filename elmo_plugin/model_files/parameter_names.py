"""
The names of the biLM's weights in its state dict (`ElmoBiLm`'s attribute names), spelled once for
everything that converts another layout (docs/implementation.md, "Weight layouts").
"""
from typing import List, Optional

from elmo_plugin.model_files.bilm_tf.options import BilmOptions

CHARACTER_ENCODER = "character_encoder"
LSTM = "lstm"
# The buffer that records the layout's version (`elmo_plugin.model_files.bilm_state`).
FORMAT_VERSION = "format_version"
# The first component of every key: what tells our layout from another one.
ROOTS = (CHARACTER_ENCODER, LSTM, FORMAT_VERSION)

CHARACTER_EMBEDDING = f"{CHARACTER_ENCODER}.char_embedding.weight"
WORD_EMBEDDING = f"{CHARACTER_ENCODER}.word_embedding.weight"

# The parameters of a convolution, highway layer or projection (PyTorch's Conv1d and Linear).
WEIGHT_AND_BIAS = ("weight", "bias")
# The two LSTM stacks, in bilm-tf's order: its scope RNN_0 is the forward LM, RNN_1 the backward.
DIRECTIONS = ("forward", "backward")
# The parameters of each LSTM layer.
LSTM_PARAMETERS = ("input_weight", "recurrent_weight", "bias", "projection_weight")
# Those of them that are matrices, (in, out) here and (out, in) in PyTorch's own modules.
LSTM_MATRICES = ("input_weight", "recurrent_weight", "projection_weight")


def convolution(index: int, kind: str) -> str:
    """The ``kind`` (``"weight"`` or ``"bias"``) of the character convolution ``index``."""
    return f"{CHARACTER_ENCODER}.convolutions.{index}.{kind}"


def highway(index: int, kind: str) -> str:
    """The ``kind`` (``"weight"`` or ``"bias"``) of highway layer ``index``."""
    return f"{CHARACTER_ENCODER}.highway.layers.{index}.{kind}"


def projection(kind: str) -> str:
    """The ``kind`` (``"weight"`` or ``"bias"``) of the token vector's projection."""
    return f"{CHARACTER_ENCODER}.projection.{kind}"


def lstm(direction: str, layer: int, parameter: str) -> str:
    """``parameter`` (`LSTM_PARAMETERS`) of LSTM ``layer`` of ``direction`` (`DIRECTIONS`)."""
    return f"{LSTM}.{direction}_layers.{layer}.{parameter}"


def state_dict_keys(
    options: BilmOptions, has_projection: Optional[bool] = None, has_word_embedding: bool = False
) -> List[str]:
    """
    Every key of the state dict of a biLM of ``options``' architecture, in the biLM's order.

    # Parameters

    options : `BilmOptions`
        The architecture.
    has_projection : `bool`, optional
        Whether the token vector is projected; by default as bilm-tf decides it
        (`BilmOptions.has_character_projection`). ELMoForManyLangs models always project.
    has_word_embedding : `bool`, optional (default = `False`)
        An ELMoForManyLangs model with a word embedding.
    """
    if has_projection is None:
        has_projection = options.has_character_projection
    # The biLM's own buffer first, then its modules' parameters, as PyTorch lists them.
    keys = [FORMAT_VERSION, CHARACTER_EMBEDDING]
    if has_word_embedding:
        keys.append(WORD_EMBEDDING)
    for index in range(len(options.filters)):
        keys += [convolution(index, kind) for kind in WEIGHT_AND_BIAS]
    for index in range(options.n_highway):
        keys += [highway(index, kind) for kind in WEIGHT_AND_BIAS]
    if has_projection:
        keys += [projection(kind) for kind in WEIGHT_AND_BIAS]
    for direction in DIRECTIONS:
        for layer in range(options.n_layers):
            keys += [lstm(direction, layer, parameter) for parameter in LSTM_PARAMETERS]
    return keys
