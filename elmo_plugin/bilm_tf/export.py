"""
Export a trained ``elmo_bilm`` model to the bilm-tf format: ``options.json`` + ``weights.hdf5``
(+ the vocabulary file, and the softmax in a separate file if asked), which every ELMo loader
reads: AllenNLP core's ``Elmo``, bilm-tf, and this plugin.
"""
import logging
import os
import tarfile
from typing import Dict, Optional

import h5py

from allennlp.common.checks import ConfigurationError
from allennlp.models.archival import CONFIG_NAME, load_archive
from allennlp.models.model import _DEFAULT_WEIGHTS  # "best.th", what load_archive reads

from elmo_plugin.common.atomic_output import atomic_output
from elmo_plugin.models.elmo_bilm import ElmoBilmModel
from elmo_plugin.bilm_tf.weights import write_bilm_tf_model

logger = logging.getLogger(__name__)


def load_bilm_model(archive_or_directory: str) -> ElmoBilmModel:
    """Loads a ``model.tar.gz`` or a serialization directory of an ``elmo_bilm`` model."""
    if not os.path.exists(archive_or_directory):
        raise ConfigurationError(f"no model archive or serialization directory at {archive_or_directory}")
    if os.path.isdir(archive_or_directory):
        missing = [
            name
            for name in (CONFIG_NAME, _DEFAULT_WEIGHTS)
            if not os.path.isfile(os.path.join(archive_or_directory, name))
        ]
        if missing:
            raise ConfigurationError(
                f"{archive_or_directory} is not the serialization directory of a trained model: "
                f"it has no {' and no '.join(missing)} (has training finished an epoch yet?)"
            )
    elif not tarfile.is_tarfile(archive_or_directory):
        raise ConfigurationError(
            f"{archive_or_directory} is neither a model archive (model.tar.gz) nor a "
            "serialization directory"
        )
    model = load_archive(archive_or_directory).model
    if not isinstance(model, ElmoBilmModel):
        raise ConfigurationError(
            f"{archive_or_directory} holds a {type(model).__name__}, not an elmo_bilm model"
        )
    return model


def export_bilm(
    model: ElmoBilmModel,
    output_directory: str,
    include_softmax: bool = False,
    n_characters: int = 262,
) -> Dict[str, str]:
    """
    Writes ``options.json``, ``weights.hdf5`` and ``vocabulary.txt`` (and ``softmax.hdf5``
    with datasets ``softmax/W`` (V, D) and ``softmax/b`` (V,) when ``include_softmax``) into
    ``output_directory``. Each file is written under a temporary name and renamed.

    ``n_characters`` is written into ``options.json``: 262 (the default) is what prediction-time
    loaders such as AllenNLP's expect; bilm-tf's training code wants 261.
    """
    os.makedirs(output_directory, exist_ok=True)
    paths = {
        "options": os.path.join(output_directory, "options.json"),
        "weights": os.path.join(output_directory, "weights.hdf5"),
        "vocabulary": os.path.join(output_directory, "vocabulary.txt"),
    }
    write_bilm_tf_model(model.bilm, paths["options"], paths["weights"], n_characters=n_characters)

    namespace = model._namespace
    vocabulary = model.vocab.get_index_to_token_vocabulary(namespace)
    tokens = [vocabulary[index] for index in range(len(vocabulary))]
    with atomic_output(paths["vocabulary"]) as temporary:
        with open(temporary, "w", encoding="utf-8", newline="\n") as out:
            out.write("\n".join(tokens) + "\n")

    if include_softmax:
        paths["softmax"] = os.path.join(output_directory, "softmax.hdf5")
        with atomic_output(paths["softmax"]) as temporary:
            with h5py.File(temporary, "w") as out:
                softmax = model.softmax
                out.create_dataset("softmax/W", data=softmax.softmax_weight.detach().cpu().numpy())
                out.create_dataset("softmax/b", data=softmax.softmax_bias.detach().cpu().numpy())
    return paths
