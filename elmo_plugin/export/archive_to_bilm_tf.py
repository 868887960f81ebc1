"""
An ``elmo_bilm`` training run's biLM, or a task model's, in the bilm-tf format (``allennlp elmo-export``).
"""
import os
from typing import Dict, Optional

from allennlp.common.checks import ConfigurationError

from elmo_plugin.common.archive import open_model_archive
from elmo_plugin.common.paths import PathLike
from elmo_plugin.model_files.bilm_tf.directory import write_bilm_tf_directory
from elmo_plugin.model_files.elmoformanylangs import refuse_bilm_tf_export
from elmo_plugin.model_files.zip_model import is_zip_model
from elmo_plugin.models.language_model_source import read_archived_language_model
from elmo_plugin.models.task_model_bilm import export_task_model_bilm


def export_to_bilm_tf(
    archive_file: PathLike,
    output_directory: str,
    include_softmax: bool = False,
    n_characters: int = 262,
    embedder: Optional[str] = None,
) -> Dict[str, str]:
    """
    Writes ``options.json``, ``weights.hdf5`` and ``vocabulary.txt`` of the run's biLM (and
    ``softmax.hdf5`` with ``include_softmax``) into ``output_directory`` as one set; returns each
    file's path by kind. Of a task model, the biLM of its ELMo embedder (``embedder``, of several).
    """
    refuse_bilm_tf_export(archive_file)
    if is_zip_model(os.fspath(archive_file)):
        raise ConfigurationError(
            f"{os.fspath(archive_file)} is a ZIP of a bilm-tf model already (options.json, "
            "model.hdf5): use it as the model as it is (--model, model=), or export it with "
            "--format onnx"
        )
    with open_model_archive(archive_file) as archive:
        model_type = archive.config.get("model", {}).get("type")
    if model_type != "elmo_bilm":
        if include_softmax:
            raise ConfigurationError(
                f"{archive_file} is a {model_type!r} task model, which has no language-model "
                "softmax to export; leave out --include-softmax"
            )
        return export_task_model_bilm(archive_file, output_directory, embedder, n_characters)
    if embedder is not None:
        raise ConfigurationError(
            f"{archive_file} is an elmo_bilm language model, which is one biLM; --embedder "
            "names the ELMo embedder of a task model"
        )
    with open_model_archive(archive_file) as archive:
        bilm, words, softmax = read_archived_language_model(archive)
    if include_softmax and softmax is None:
        raise ConfigurationError(f"{archive_file}: the model's weights have no softmax to export")
    return write_bilm_tf_directory(
        output_directory,
        bilm.options,
        bilm.state_dict(),
        words,
        softmax=softmax if include_softmax else None,
        n_characters=n_characters,
    )
