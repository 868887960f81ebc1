"""
The plugin's one bilm-tf writer: ``options.json`` + ``weights.hdf5`` (+ ``vocabulary.txt``,
``softmax.hdf5``), which every ELMo loader reads, written as a set (`atomic_directory`).
"""
import os
from typing import Dict, Optional, Sequence, Tuple

import h5py
import numpy as np
import torch
from allennlp.common.checks import ConfigurationError

from elmo_plugin.common.atomic_output import atomic_directory
from elmo_plugin.common.write_errors import hdf5_for_writing
from elmo_plugin.model_files.bilm_tf.options import BilmOptions
from elmo_plugin.model_files.bilm_tf.weights import bilm_tf_arrays

OPTIONS_NAME = "options.json"
WEIGHTS_NAME = "weights.hdf5"
VOCABULARY_NAME = "vocabulary.txt"
SOFTMAX_NAME = "softmax.hdf5"
EXPORT_NAMES = (OPTIONS_NAME, WEIGHTS_NAME, VOCABULARY_NAME, SOFTMAX_NAME)


def write_bilm_tf_directory(
    output_directory: str,
    options: BilmOptions,
    bilm_state: Dict[str, torch.Tensor],
    vocabulary: Optional[Sequence[str]] = None,
    softmax: Optional[Tuple[torch.Tensor, torch.Tensor]] = None,
    n_characters: int = 262,
) -> Dict[str, str]:
    """
    Writes ``output_directory`` (replacing an earlier export there; any other file there is an
    error) and returns the path of each file written by kind.

    # Parameters

    options : `BilmOptions`
        The architecture, written to ``options.json``.
    bilm_state : `Dict[str, torch.Tensor]`
        The biLM's state dict (`ElmoBiLm.state_dict()`), written to ``weights.hdf5``.
    vocabulary : `Sequence[str]`, optional
        The language model's vocabulary in id order (``vocabulary.txt``).
    softmax : `Tuple[torch.Tensor, torch.Tensor]`, optional
        The softmax weights ``(V, D)`` and bias ``(V,)`` (``softmax.hdf5``: ``softmax/W``, ``softmax/b``).
    n_characters : `int`, optional (default = `262`)
        Written into ``options.json``: 262 for prediction-time loaders, 261 for bilm-tf's training.
    """
    final = {
        "options": os.path.join(output_directory, OPTIONS_NAME),
        "weights": os.path.join(output_directory, WEIGHTS_NAME),
    }
    if vocabulary is not None:
        final["vocabulary"] = os.path.join(output_directory, VOCABULARY_NAME)
    if softmax is not None:
        final["softmax"] = os.path.join(output_directory, SOFTMAX_NAME)
    with atomic_directory(output_directory, EXPORT_NAMES) as directory:
        options.to_file(os.path.join(directory, OPTIONS_NAME), n_characters=n_characters)
        with hdf5_for_writing(os.path.join(directory, WEIGHTS_NAME)) as output:
            for name, value in bilm_tf_arrays(bilm_state, options).items():
                output.file.create_dataset(name, data=value)
        if vocabulary is not None:
            with open(
                os.path.join(directory, VOCABULARY_NAME), "w", encoding="utf-8", newline="\n"
            ) as out:
                out.write("\n".join(vocabulary) + "\n")
        if softmax is not None:
            weight, bias = softmax
            with hdf5_for_writing(os.path.join(directory, SOFTMAX_NAME)) as output:
                output.file.create_dataset("softmax/W", data=weight.detach().cpu().numpy().astype(np.float32))
                output.file.create_dataset("softmax/b", data=bias.detach().cpu().numpy().astype(np.float32))
    return final


def read_softmax(path: str) -> Tuple[torch.Tensor, torch.Tensor]:
    """The softmax's weight ``(V, D)`` and bias ``(V,)`` in float32 from ``path`` (``softmax/W``,
    ``softmax/b``: what `write_bilm_tf_directory` writes and AllenNLP published); a `ConfigurationError`
    naming the file otherwise."""
    try:
        with h5py.File(path, "r") as handle:
            weight, bias = (
                torch.from_numpy(np.asarray(handle[name][...], np.float32)) for name in ("softmax/W", "softmax/b")
            )
    except (OSError, KeyError) as error:
        raise ConfigurationError(
            f"{path}: not a language model's softmax ({error}); it needs datasets softmax/W and softmax/b"
        ) from None
    return weight, bias
