"""
bilm-tf's HDF5 weight file, read into and written from the state dict of the plugin's biLM, which
keeps TensorFlow's conventions: only transposes, the split of ``W_0`` and the zero mask row of the
byte embedding (docs/implementation.md, "Weight layouts").
"""
import os
from dataclasses import dataclass, field
from typing import Any, Dict, Mapping, Set, Tuple

import h5py
import numpy as np
import torch
from allennlp.common.checks import ConfigurationError

from elmo_plugin.common.paths import PathLike
from elmo_plugin.model_files import parameter_names as names
from elmo_plugin.model_files.bilm_state import with_format_version
from elmo_plugin.model_files.bilm_tf.options import NUM_TRAINING_CHARACTER_IDS, BilmOptions

# Scopes whose datasets must all be understood: anything else there means the file and the
# options describe different models.
_CHECKED_SCOPES = ("CNN", "CNN_high_", "CNN_proj", "RNN_", "char_embed")
# A highway layer's two halves, in the order of the rows of our weight.
_HIGHWAY_PARTS = ("transform", "carry")


def lstm_scope(direction: int, layer: int, single_layer_names: bool = False) -> str:
    """The HDF5 group of one LSTM layer. With one layer TensorFlow names the scope without
    ``MultiRNNCell/Cell0``; AllenNLP only reads the ``MultiRNNCell`` form."""
    if single_layer_names:
        return f"RNN_{direction}/RNN/LSTMCell"
    return f"RNN_{direction}/RNN/MultiRNNCell/Cell{layer}/LSTMCell"


@dataclass
class _WeightReader:
    """The datasets of a weight file (h5py datasets or numpy arrays by name), read by name and shape,
    remembering which were used."""

    datasets: Mapping[str, Any]
    path: str
    options_source: str
    used: Set[str] = field(default_factory=set)

    def read(self, name: str, expected_shape: Tuple[int, ...]) -> torch.Tensor:
        if name not in self.datasets:
            groups = sorted({dataset.split("/")[0] for dataset in self.datasets})
            raise ConfigurationError(
                f"{self.path}: dataset '{name}' is missing, but {self.options_source} needs it "
                f"(top-level groups in the file: {', '.join(groups) or 'none'}). Is this the "
                "weight file that goes with these options?"
            )
        dataset = self.datasets[name]
        if tuple(dataset.shape) != tuple(expected_shape):
            raise ConfigurationError(
                f"{self.path}: dataset '{name}' has shape {tuple(dataset.shape)}, but "
                f"{self.options_source} implies {tuple(expected_shape)}. Is this the weight file "
                "that goes with these options?"
            )
        self.used.add(name)
        return torch.from_numpy(np.asarray(dataset[...], dtype=np.float32))

    def check_nothing_left(self) -> None:
        unused = [name for name in self.datasets if name.startswith(_CHECKED_SCOPES) and name not in self.used]
        if unused:
            raise ConfigurationError(
                f"{self.path}: datasets {', '.join(sorted(unused)[:6])}"
                f"{' ...' if len(unused) > 6 else ''} are not part of the model that "
                f"{self.options_source} describes (more filters, highway or LSTM layers in the "
                "file than in the options?)"
            )


def read_bilm_tf_weights(
    weight_file: PathLike, options: BilmOptions, options_source: str = "the options"
) -> Dict[str, torch.Tensor]:
    """Reads a bilm-tf ``weights.hdf5`` into the state dict of an `ElmoBiLm` built from ``options``; a
    `ConfigurationError` names the file and the datasets that do not fit the options."""
    path = os.fspath(weight_file)
    if not os.path.isfile(path):
        raise ConfigurationError(f"weight file not found: {path}")
    try:
        handle = h5py.File(path, "r")
    except OSError as error:
        raise ConfigurationError(f"{path}: not a readable HDF5 weight file ({error}); is the file complete?") from None
    with handle:
        datasets: Dict[str, h5py.Dataset] = {}
        handle.visititems(lambda name, obj: datasets.update({name: obj}) if isinstance(obj, h5py.Dataset) else None)
        return bilm_tf_state_dict(datasets, options, path, options_source)


def bilm_tf_state_dict(
    arrays: Mapping[str, Any], options: BilmOptions, path: str, options_source: str = "the options"
) -> Dict[str, torch.Tensor]:
    """`read_bilm_tf_weights` for datasets already in memory (numpy arrays or h5py datasets, by
    their HDF5 names); ``path`` names where they came from in errors."""
    state: Dict[str, torch.Tensor] = {}
    reader = _WeightReader(arrays, path, options_source)
    char_dim = options.char_embedding_dim
    char_embed = reader.read("char_embed", (NUM_TRAINING_CHARACTER_IDS, char_dim))
    state[names.CHARACTER_EMBEDDING] = torch.cat([char_embed.new_zeros(1, char_dim), char_embed])
    for index, (width, count) in enumerate(options.filters):
        kernel = reader.read(f"CNN/W_cnn_{index}", (1, width, char_dim, count))
        state[names.convolution(index, "weight")] = kernel[0].permute(2, 1, 0)
        state[names.convolution(index, "bias")] = reader.read(f"CNN/b_cnn_{index}", (count,))
    n_filters = options.n_filters
    for index in range(options.n_highway):
        scope = f"CNN_high_{index}"
        weights = [reader.read(f"{scope}/W_{part}", (n_filters, n_filters)).t() for part in _HIGHWAY_PARTS]
        biases = [reader.read(f"{scope}/b_{part}", (n_filters,)) for part in _HIGHWAY_PARTS]
        state[names.highway(index, "weight")] = torch.cat(weights)
        state[names.highway(index, "bias")] = torch.cat(biases)
    if options.has_character_projection:
        projection_dim = options.projection_dim
        state[names.projection("weight")] = reader.read("CNN_proj/W_proj", (n_filters, projection_dim)).t()
        state[names.projection("bias")] = reader.read("CNN_proj/b_proj", (projection_dim,))

    single_layer_names = options.n_layers == 1 and lstm_scope(0, 0) + "/W_0" not in arrays
    # Every layer's input (the token vectors, or the layer below) is as wide as the projection.
    projection_size, cell_size = options.projection_dim, options.lstm_dim
    for direction, name in enumerate(names.DIRECTIONS):
        for layer in range(options.n_layers):
            scope = lstm_scope(direction, layer, single_layer_names)
            kernel = reader.read(f"{scope}/W_0", (2 * projection_size, 4 * cell_size))
            state[names.lstm(name, layer, "input_weight")] = kernel[:projection_size]
            state[names.lstm(name, layer, "recurrent_weight")] = kernel[projection_size:]
            state[names.lstm(name, layer, "bias")] = reader.read(f"{scope}/B", (4 * cell_size,))
            state[names.lstm(name, layer, "projection_weight")] = reader.read(
                f"{scope}/W_P_0", (cell_size, projection_size)
            )
    reader.check_nothing_left()
    return with_format_version(state)


def bilm_tf_arrays(state_dict: Dict[str, torch.Tensor], options: BilmOptions) -> Dict[str, np.ndarray]:
    """Every dataset of the bilm-tf weight file of a biLM's state dict, by HDF5 name (float32)."""
    state = {name: value.detach().cpu().float() for name, value in state_dict.items()}
    arrays = {"char_embed": state[names.CHARACTER_EMBEDDING][1:]}
    for index in range(len(options.filters)):
        arrays[f"CNN/W_cnn_{index}"] = state[names.convolution(index, "weight")].permute(2, 1, 0).unsqueeze(0)
        arrays[f"CNN/b_cnn_{index}"] = state[names.convolution(index, "bias")]
    n_filters = options.n_filters
    for index in range(options.n_highway):
        scope = f"CNN_high_{index}"
        weight, bias = state[names.highway(index, "weight")], state[names.highway(index, "bias")]
        arrays[f"{scope}/W_transform"] = weight[:n_filters].t()
        arrays[f"{scope}/W_carry"] = weight[n_filters:].t()
        arrays[f"{scope}/b_transform"] = bias[:n_filters]
        arrays[f"{scope}/b_carry"] = bias[n_filters:]
    if options.has_character_projection:
        arrays["CNN_proj/W_proj"] = state[names.projection("weight")].t()
        arrays["CNN_proj/b_proj"] = state[names.projection("bias")]
    for direction, name in enumerate(names.DIRECTIONS):
        for layer in range(options.n_layers):
            scope = lstm_scope(direction, layer)
            parameter = {key: state[names.lstm(name, layer, key)] for key in names.LSTM_PARAMETERS}
            arrays[f"{scope}/W_0"] = torch.cat([parameter["input_weight"], parameter["recurrent_weight"]])
            arrays[f"{scope}/B"] = parameter["bias"]
            arrays[f"{scope}/W_P_0"] = parameter["projection_weight"]
    return {name: value.numpy().astype(np.float32) for name, value in arrays.items()}
