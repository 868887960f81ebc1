"""
Reading and writing the bilm-tf HDF5 weight layout (elmo-facts §3) for `ElmoBiLm`.

Our parameters keep TensorFlow's conventions (gate order i, j, f, o; highway gate as
"carry"; stored LSTM bias without the forget bias), so conversion is only transposes, the
split of ``W_0`` into input and recurrent halves, and the zero mask row of the byte embedding.
"""
import os
from typing import Dict, List, Optional, Set, Tuple

import h5py
import numpy as np
import torch

from allennlp.common.checks import ConfigurationError

from elmo_plugin.common.atomic_output import atomic_output
from elmo_plugin.modules.bilm import ElmoBiLm
from elmo_plugin.data.character_ids import NUM_TRAINING_CHARACTER_IDS

# Scopes whose datasets must all be understood: anything else there means the file and the
# options describe different models.
_CHECKED_SCOPES = ("CNN", "CNN_high_", "CNN_proj", "RNN_", "char_embed")


def lstm_scope(direction: int, layer: int, single_layer_names: bool = False) -> str:
    """
    The HDF5 group of one LSTM layer. With one layer TensorFlow names the scope without
    ``MultiRNNCell/Cell0``; AllenNLP only reads the ``MultiRNNCell`` form.
    """
    if single_layer_names:
        return f"RNN_{direction}/RNN/LSTMCell"
    return f"RNN_{direction}/RNN/MultiRNNCell/Cell{layer}/LSTMCell"


class _WeightReader:
    def __init__(self, handle: h5py.File, path: str, options_source: str) -> None:
        self.handle = handle
        self.path = path
        self.options_source = options_source
        self.used: Set[str] = set()

    def has(self, name: str) -> bool:
        return name in self.handle and isinstance(self.handle[name], h5py.Dataset)

    def read(self, name: str, expected_shape: Tuple[int, ...]) -> torch.Tensor:
        if not self.has(name):
            groups = sorted(self.handle.keys())
            raise ConfigurationError(
                f"{self.path}: dataset '{name}' is missing, but {self.options_source} needs it "
                f"(top-level groups in the file: {', '.join(groups) or 'none'}). Is this the "
                "weight file that goes with these options?"
            )
        dataset = self.handle[name]
        if tuple(dataset.shape) != tuple(expected_shape):
            raise ConfigurationError(
                f"{self.path}: dataset '{name}' has shape {tuple(dataset.shape)}, but "
                f"{self.options_source} implies {tuple(expected_shape)}. Is this the weight file "
                "that goes with these options?"
            )
        self.used.add(name)
        return torch.from_numpy(np.asarray(dataset[...], dtype=np.float32))

    def check_nothing_left(self) -> None:
        names: List[str] = []
        self.handle.visititems(
            lambda name, obj: names.append(name) if isinstance(obj, h5py.Dataset) else None
        )
        unused = [
            name for name in names if name.startswith(_CHECKED_SCOPES) and name not in self.used
        ]
        if unused:
            raise ConfigurationError(
                f"{self.path}: datasets {', '.join(sorted(unused)[:6])}"
                f"{' ...' if len(unused) > 6 else ''} are not part of the model that "
                f"{self.options_source} describes (more filters, highway or LSTM layers in the "
                "file than in the options?)"
            )


def load_bilm_tf_weights(
    bilm: ElmoBiLm, weight_file: "os.PathLike[str] | str", options_source: str = "the options"
) -> None:
    """
    Copies a bilm-tf ``weights.hdf5`` into ``bilm``. Raises `ConfigurationError` naming the
    dataset and both shapes if the file does not fit the options the biLM was built from.
    """
    path = os.fspath(weight_file)
    if not os.path.isfile(path):
        raise ConfigurationError(f"weight file not found: {path}")
    try:
        handle = h5py.File(path, "r")
    except OSError as error:
        raise ConfigurationError(f"{path}: not a readable HDF5 weight file ({error})") from None
    options = bilm.options
    encoder = bilm.character_encoder
    with handle, torch.no_grad():
        reader = _WeightReader(handle, path, options_source)
        char_dim = options.char_embedding_dim
        char_embed = reader.read("char_embed", (NUM_TRAINING_CHARACTER_IDS, char_dim))
        encoder.char_embedding.weight[0].zero_()
        encoder.char_embedding.weight[1:].copy_(char_embed)

        for index, ((width, count), conv) in enumerate(zip(options.filters, encoder.convolutions)):
            weight = reader.read(f"CNN/W_cnn_{index}", (1, width, char_dim, count))
            conv.weight.copy_(weight[0].permute(2, 1, 0))
            conv.bias.copy_(reader.read(f"CNN/b_cnn_{index}", (count,)))

        n_filters = options.n_filters
        for index, layer in enumerate(encoder.highway.layers):
            scope = f"CNN_high_{index}"
            square = (n_filters, n_filters)
            layer.weight[:n_filters].copy_(reader.read(f"{scope}/W_transform", square).t())
            layer.weight[n_filters:].copy_(reader.read(f"{scope}/W_carry", square).t())
            layer.bias[:n_filters].copy_(reader.read(f"{scope}/b_transform", (n_filters,)))
            layer.bias[n_filters:].copy_(reader.read(f"{scope}/b_carry", (n_filters,)))

        if encoder.projection is not None:
            projection_dim = options.projection_dim
            encoder.projection.weight.copy_(
                reader.read("CNN_proj/W_proj", (n_filters, projection_dim)).t()
            )
            encoder.projection.bias.copy_(reader.read("CNN_proj/b_proj", (projection_dim,)))

        single_layer_names = options.n_layers == 1 and not reader.has(
            lstm_scope(0, 0) + "/W_0"
        )
        lstm = bilm.lstm
        for direction, layers in enumerate((lstm.forward_layers, lstm.backward_layers)):
            for index, layer in enumerate(layers):
                scope = lstm_scope(direction, index, single_layer_names)
                gates = 4 * layer.cell_size
                kernel = reader.read(
                    f"{scope}/W_0", (layer.input_size + layer.projection_size, gates)
                )
                layer.input_weight.copy_(kernel[: layer.input_size])
                layer.recurrent_weight.copy_(kernel[layer.input_size :])
                layer.bias.copy_(reader.read(f"{scope}/B", (gates,)))
                layer.projection_weight.copy_(
                    reader.read(f"{scope}/W_P_0", (layer.cell_size, layer.projection_size))
                )
        reader.check_nothing_left()


def bilm_tf_arrays(bilm: ElmoBiLm) -> Dict[str, np.ndarray]:
    """Every dataset of the bilm-tf weight file for ``bilm``, by HDF5 name (float32)."""

    def array(tensor: torch.Tensor) -> np.ndarray:
        return tensor.detach().cpu().numpy().astype(np.float32)

    encoder = bilm.character_encoder
    arrays: Dict[str, np.ndarray] = {"char_embed": array(encoder.char_embedding.weight[1:])}
    for index, conv in enumerate(encoder.convolutions):
        arrays[f"CNN/W_cnn_{index}"] = array(conv.weight.permute(2, 1, 0).unsqueeze(0))
        arrays[f"CNN/b_cnn_{index}"] = array(conv.bias)
    n_filters = encoder.n_filters
    for index, layer in enumerate(encoder.highway.layers):
        scope = f"CNN_high_{index}"
        arrays[f"{scope}/W_transform"] = array(layer.weight[:n_filters].t())
        arrays[f"{scope}/W_carry"] = array(layer.weight[n_filters:].t())
        arrays[f"{scope}/b_transform"] = array(layer.bias[:n_filters])
        arrays[f"{scope}/b_carry"] = array(layer.bias[n_filters:])
    if encoder.projection is not None:
        arrays["CNN_proj/W_proj"] = array(encoder.projection.weight.t())
        arrays["CNN_proj/b_proj"] = array(encoder.projection.bias)
    for direction, layers in enumerate((bilm.lstm.forward_layers, bilm.lstm.backward_layers)):
        for index, layer in enumerate(layers):
            scope = lstm_scope(direction, index)
            kernel = torch.cat([layer.input_weight, layer.recurrent_weight], dim=0)
            arrays[f"{scope}/W_0"] = array(kernel)
            arrays[f"{scope}/B"] = array(layer.bias)
            arrays[f"{scope}/W_P_0"] = array(layer.projection_weight)
    return arrays


def write_bilm_tf_weights(bilm: ElmoBiLm, weight_file: "os.PathLike[str] | str") -> None:
    """
    Writes ``bilm`` in the bilm-tf layout. LSTM scopes always use the ``MultiRNNCell/Cell{l}``
    names (also for one layer) because that is what AllenNLP and other loaders read. The file is
    written under a temporary name and renamed, so an interrupted write leaves no file that
    looks complete.
    """
    with atomic_output(os.fspath(weight_file)) as temporary:
        with h5py.File(temporary, "w") as out:
            for name, value in bilm_tf_arrays(bilm).items():
                out.create_dataset(name, data=value)


def write_bilm_tf_model(
    bilm: ElmoBiLm,
    options_file: "os.PathLike[str] | str",
    weight_file: "os.PathLike[str] | str",
    n_characters: Optional[int] = None,
) -> None:
    """Writes ``options.json`` and ``weights.hdf5`` for ``bilm``, each atomically."""
    write_bilm_tf_weights(bilm, weight_file)
    with atomic_output(os.fspath(options_file)) as temporary:
        bilm.options.to_file(temporary, n_characters=n_characters)
