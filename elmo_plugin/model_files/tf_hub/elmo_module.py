"""
A TF-Hub ELMo module (``google/elmo/2``, ``/3``, DeepPavlov's: any SavedModel of bilm-tf's graph) read
into the bilm-tf layout (docs/models.md maps the names). The options come from the variables' shapes
and the graph; what neither stores is bilm-tf's (`ASSUMED`), listed in `TfHubElmo.notes`.
"""
import itertools
import logging
import os
import re
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Tuple

import numpy as np
import torch
from allennlp.common.checks import ConfigurationError

from elmo_plugin.common.paths import PathLike
from elmo_plugin.model_files.bilm_tf.options import NUM_TRAINING_CHARACTER_IDS, BilmOptions
from elmo_plugin.model_files.bilm_tf.weights import bilm_tf_state_dict
from elmo_plugin.model_files.tf_hub.checkpoint import read_checkpoint
from elmo_plugin.model_files.tf_hub.saved_model_graph import SAVED_MODEL_NAME, GraphNode, saved_model_nodes

logger = logging.getLogger(__name__)

VARIABLES_PREFIX = os.path.join("variables", "variables")
LAYER_MIX = ("aggregation/weights", "aggregation/scaling")
# bilm-tf's values of what no module stores.
ASSUMED = {"cell_clip": 3.0, "proj_clip": 3.0, "use_skip_connections": True}
# Where the graph says nothing: bilm-tf's values.
GRAPH_DEFAULTS = {"activation": "relu", "max_characters_per_token": 50}

# TensorFlow's LSTMCell variables (or bilm-tf's own names) to the bilm-tf weight file's.
_LSTM_VARIABLE = re.compile(
    r"^RNN_(?P<direction>[01])/RNN/(?:MultiRNNCell/Cell(?P<layer>\d+)/)?"
    r"(?:rnn/lstm_cell|LSTMCell)/(?P<name>kernel|bias|projection/kernel|W_0|B|W_P_0)$"
)
_LSTM_NAMES = {"kernel": "W_0", "bias": "B", "projection/kernel": "W_P_0"}
_CHARACTER_CNN_VARIABLE = re.compile(r"^(CNN/[Wb]_cnn_\d+|CNN_high_\d+/[Wb]_(carry|transform)|CNN_proj/[Wb]_proj)$")


def is_tf_hub_module(path: PathLike) -> bool:
    """Whether ``path`` is a SavedModel directory (a TF-Hub module is one): ``saved_model.pb``
    and a checkpoint in ``variables/``."""
    path = os.fspath(path)
    return all(os.path.isfile(os.path.join(path, name)) for name in (SAVED_MODEL_NAME, VARIABLES_PREFIX + ".index"))


@dataclass
class TfHubElmo:
    """The biLM of a TF-Hub module: its ``options``, its ``state`` (`ElmoBiLm`'s state dict), and
    ``notes``: a line for each option taken from bilm-tf rather than read, and for the module's layer mix."""

    options: BilmOptions
    state: Dict[str, torch.Tensor]
    notes: List[str] = field(default_factory=list)


def _bilm_variables(variables: Dict[str, np.ndarray], directory: str) -> Dict[str, np.ndarray]:
    """The biLM's variables, by bilm-tf's weight-file names."""
    scopes = sorted({name[: -len("char_embed")] for name in variables if name.split("/")[-1] == "char_embed"})
    if len(scopes) != 1:
        listed = ", ".join(sorted(variables)[:8]) + (" ..." if len(variables) > 8 else "")
        problem = "no variable" if not scopes else f"{len(scopes)} variables"
        raise ConfigurationError(
            f"{directory}: {problem} named .../char_embed: not an ELMo module of character inputs "
            f"(its variables: {listed or 'none'})"
        )
    scope = scopes[0]
    arrays: Dict[str, np.ndarray] = {}
    unknown: List[str] = []
    for name, value in variables.items():
        if not name.startswith(scope):
            continue
        local = name[len(scope) :]
        lstm = _LSTM_VARIABLE.match(local)
        if local == "char_embed" or _CHARACTER_CNN_VARIABLE.match(local):
            arrays[local] = value
        elif lstm:
            file_name = _LSTM_NAMES.get(lstm.group("name"), lstm.group("name"))
            layer = int(lstm.group("layer") or 0)
            arrays[f"RNN_{lstm.group('direction')}/RNN/MultiRNNCell/Cell{layer}/LSTMCell/{file_name}"] = value
        else:
            unknown.append(name)
    if unknown:
        raise ConfigurationError(
            f"{directory}: variables {', '.join(sorted(unknown)[:6])}{' ...' if len(unknown) > 6 else ''} "
            "are not part of a bilm-tf biLM (a module of word inputs, or another model?)"
        )
    char_embed = arrays["char_embed"]
    if char_embed.ndim == 2 and char_embed.shape[0] == NUM_TRAINING_CHARACTER_IDS + 1:
        # The inference graph's padding row (id 0), which the bilm-tf file leaves out.
        arrays["char_embed"] = char_embed[1:]
    return arrays


def _shape(arrays: Dict[str, np.ndarray], name: str, rank: int, directory: str) -> Tuple[int, ...]:
    if name not in arrays:
        raise ConfigurationError(f"{directory}: the module has no variable for bilm-tf's {name}")
    shape = tuple(arrays[name].shape)
    if len(shape) != rank:
        raise ConfigurationError(f"{directory}: bilm-tf's {name} has shape {shape}; expected {rank} dimensions")
    return shape


def _count(arrays: Dict[str, np.ndarray], template: str) -> int:
    """How many of ``template`` numbered 0, 1, ... are in ``arrays``, in a row."""
    return next(index for index in itertools.count() if template.format(index) not in arrays)


def options_from_shapes(
    arrays: Dict[str, np.ndarray], directory: str, activation: str, max_characters_per_token: int
) -> BilmOptions:
    """The architecture the bilm-tf arrays' shapes fix, with what the shapes cannot say given."""
    char_dim = _shape(arrays, "char_embed", 2, directory)[1]
    filters = [
        _shape(arrays, f"CNN/W_cnn_{index}", 4, directory)[1::2] for index in range(_count(arrays, "CNN/W_cnn_{}"))
    ]
    if not filters:
        raise ConfigurationError(f"{directory}: the module has no character convolutions (CNN/W_cnn_0)")
    n_highway = _count(arrays, "CNN_high_{}/W_carry")
    n_layers = _count(arrays, "RNN_0/RNN/MultiRNNCell/Cell{}/LSTMCell/W_P_0")
    if n_layers == 0:
        raise ConfigurationError(f"{directory}: the module has no LSTM layers (RNN_0/.../W_P_0)")
    cell_size, projection_dim = _shape(arrays, "RNN_0/RNN/MultiRNNCell/Cell0/LSTMCell/W_P_0", 2, directory)
    return BilmOptions(
        filters=filters,
        char_embedding_dim=char_dim,
        n_highway=n_highway,
        max_characters_per_token=max_characters_per_token,
        n_characters=NUM_TRAINING_CHARACTER_IDS + 1,
        activation=activation,
        lstm_dim=cell_size,
        projection_dim=projection_dim,
        n_layers=n_layers,
        cell_clip=ASSUMED["cell_clip"],
        proj_clip=ASSUMED["proj_clip"],
        use_skip_connections=ASSUMED["use_skip_connections"] and n_layers > 1,
    )


def _in_character_cnn(node: GraphNode) -> bool:
    return "CNN" in node.name.split("/")[:-1]


def graph_activation(nodes: List[GraphNode]) -> Optional[str]:
    """``relu`` or ``tanh``: the activation applied in the character CNN's scope (bilm-tf
    applies it after each convolution's max-pool); None if the graph shows neither or both."""
    found = {node.op for node in nodes if _in_character_cnn(node) and node.op in ("Relu", "Tanh")}
    return found.pop().lower() if len(found) == 1 else None


def graph_max_characters(nodes: List[GraphNode], widths: List[int]) -> Optional[int]:
    """The characters per token: each convolution of width w max-pools over all
    ``max_characters - w + 1`` windows of a token, so the pools' spans and the widths fix it;
    None if the graph's max-pools do not fit the widths."""
    spans = set()
    for node in nodes:
        if _in_character_cnn(node) and node.op == "MaxPool":
            ksize = node.int_list("ksize")
            if ksize is not None and len(ksize) == 4:
                spans.add(ksize[2])
    if not spans:
        return None
    candidate = max(spans) + min(widths) - 1
    return candidate if spans == {candidate - width + 1 for width in widths} else None


def read_tf_hub_module(directory: PathLike) -> TfHubElmo:
    """
    The biLM of the TF-Hub module (or SavedModel) in ``directory``: its options and weights.

    # Parameters

    directory : `PathLike`
        The module, unpacked (``saved_model.pb``, ``variables/``).

    # Raises

    `ConfigurationError`
        Naming the directory, for what is not a SavedModel of a character-based biLM.
    """
    directory = os.fspath(directory)
    if not is_tf_hub_module(directory):
        raise ConfigurationError(
            f"{directory} is not a TF-Hub module or SavedModel: it needs {SAVED_MODEL_NAME} and "
            f"{VARIABLES_PREFIX}.index (unpack the module's .tar.gz into a directory first)"
        )
    variables = read_checkpoint(os.path.join(directory, VARIABLES_PREFIX))
    arrays = _bilm_variables(variables, directory)
    nodes = saved_model_nodes(directory)
    notes: List[str] = []
    widths = [arrays[name].shape[1] for name in sorted(arrays) if name.startswith("CNN/W_cnn_")]
    found = {"activation": graph_activation(nodes), "max_characters_per_token": graph_max_characters(nodes, widths)}
    for option, value in found.items():
        if value is None:
            found[option] = GRAPH_DEFAULTS[option]
            notes.append(f"{option} {found[option]}: not found in the module's graph, bilm-tf's")
    options = options_from_shapes(arrays, directory, **found)
    notes.append(
        f"cell_clip {options.cell_clip:g}, proj_clip {options.proj_clip:g}, use_skip_connections "
        f"{str(options.use_skip_connections).lower()}: stored nowhere in a module, bilm-tf's"
    )
    source = f"the shapes of the variables in {directory}"
    state = bilm_tf_state_dict(arrays, options, os.path.join(directory, VARIABLES_PREFIX), source)
    mix = [variables.get(name) for name in LAYER_MIX]
    if mix[0] is not None and mix[1] is not None:
        weights = np.exp(mix[0] - mix[0].max())
        notes.append(
            "the module's layer mix (its 'elmo' output: softmax(aggregation/weights) = "
            f"{[round(float(weight), 4) for weight in weights / weights.sum()]}, scaling "
            f"{float(mix[1]):g}) is not part of the bilm-tf format"
        )
    logger.info("TF-Hub module %s: %s", directory, "; ".join(notes))
    return TfHubElmo(options, state, notes)
