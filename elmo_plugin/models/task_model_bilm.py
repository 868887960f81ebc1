"""
The biLM inside a task model's archive (a tagger, a classifier, ... with an
``elmo_token_embedder``, which may have fine-tuned it), written back to the bilm-tf format: what
``allennlp elmo-export`` does with an archive that is not an ``elmo_bilm`` language model. The
archive is loaded with AllenNLP's ``load_archive``, as for prediction.
"""
from typing import Any, Dict, Optional

from allennlp.common.checks import ConfigurationError
from torch import nn

from elmo_plugin.common.paths import PathLike
from elmo_plugin.model_files.bilm_tf.directory import write_bilm_tf_directory
from elmo_plugin.modules.bilm import ElmoBiLm

_TOKEN_EMBEDDER_PREFIX = "token_embedder_"


def elmo_bilms(model: nn.Module) -> Dict[str, ElmoBiLm]:
    """
    Every biLM of ``model``, by the name of the module that holds it: the biLM's module path
    without the trailing ``_elmo_lstm`` (the biLM inside ``Elmo``) and ``_elmo`` (the ``Elmo``
    inside ``ElmoTokenEmbedder``). A biLM shared by several modules is listed once.
    """
    found: Dict[str, ElmoBiLm] = {}
    for path, module in model.named_modules():
        if not isinstance(module, ElmoBiLm):
            continue
        name = path
        for suffix in ("._elmo_lstm", "._elmo"):
            if name.endswith(suffix):
                name = name[: -len(suffix)]
        found[name or path] = module
    return found


def _short_name(name: str) -> Optional[str]:
    """``elmo`` for ``text_field_embedder.token_embedder_elmo`` (the key in the config)."""
    last = name.rsplit(".", 1)[-1]
    return last[len(_TOKEN_EMBEDDER_PREFIX) :] if last.startswith(_TOKEN_EMBEDDER_PREFIX) else None


def _describe(bilms: Dict[str, ElmoBiLm]) -> str:
    return ", ".join(f"{name} (or {_short_name(name)})" if _short_name(name) else name for name in bilms)


def choose_bilm(bilms: Dict[str, ElmoBiLm], embedder: Optional[str], source: str) -> ElmoBiLm:
    """The biLM named ``embedder`` (a full name of `elmo_bilms` or its token-embedder key), or the
    only one when ``embedder`` is None; else a `ConfigurationError` listing the names there are."""
    if not bilms:
        raise ConfigurationError(f"{source} holds no ELMo biLM (no elmo_token_embedder or Elmo)")
    if embedder is None:
        if len(bilms) > 1:
            raise ConfigurationError(
                f"{source} holds {len(bilms)} ELMo biLMs; name the one to export with "
                f"--embedder: {_describe(bilms)}"
            )
        return next(iter(bilms.values()))
    if embedder in bilms:
        return bilms[embedder]
    by_short = [name for name in bilms if _short_name(name) == embedder]
    if len(by_short) == 1:
        return bilms[by_short[0]]
    if len(by_short) > 1:
        raise ConfigurationError(
            f"--embedder {embedder} is ambiguous in {source}; use one of the full names: "
            f"{', '.join(by_short)}"
        )
    raise ConfigurationError(f"{source} has no ELMo embedder named {embedder!r}; it has: {_describe(bilms)}")


def load_task_model(source: str) -> Any:
    """AllenNLP's ``load_archive`` of ``source`` on the CPU; failing, a one-line `ConfigurationError`."""
    from allennlp.models.archival import load_archive

    try:
        return load_archive(source, cuda_device=-1)
    except (RuntimeError, KeyError, OSError) as error:
        raise ConfigurationError(f"{source}: cannot load the model ({error})") from None


def export_task_model_bilm(
    archive_file: PathLike,
    output_directory: str,
    embedder: Optional[str] = None,
    n_characters: int = 262,
) -> Dict[str, str]:
    """
    Writes the biLM of the task model in ``archive_file`` (``model.tar.gz`` or serialization
    directory) as ``options.json`` + ``weights.hdf5`` into ``output_directory``
    (`write_bilm_tf_directory`) and returns the path of each file by kind. ``embedder`` names the
    biLM when the model has more than one (`choose_bilm`).
    """
    source = str(archive_file)
    archive = load_task_model(source)
    bilms = elmo_bilms(archive.model)
    if not bilms:
        model_type = archive.config.as_dict(quiet=True).get("model", {}).get("type")
        raise ConfigurationError(
            f"{source} holds a model of type {model_type!r}, not an elmo_bilm language model, "
            "and the model has no ELMo embedder (elmo_token_embedder or Elmo) whose biLM could "
            "be exported"
        )
    bilm = choose_bilm(bilms, embedder, source)
    return write_bilm_tf_directory(output_directory, bilm.options, bilm.state_dict(), None, n_characters=n_characters)
