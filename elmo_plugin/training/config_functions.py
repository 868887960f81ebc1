"""
Functions that the plugin's jsonnet configs call while they are read, ``std.native(NAME)``
(`elmo_plugin.patches.jsonnet_natives` gives them to AllenNLP's evaluation; ``null`` where the
plugin is not installed, so a config can fall back). ``elmo_output_dim(ELMO_JSON)``: the width of
the biLM that ``elmo_token_embedder`` would load from the ``model``, ``options_file`` and
``weight_file`` of the JSON object, read from its options; its ``output_dim``, if given, must agree.
``elmo_adaptation_source(JSON)``: of the language model ``start_from`` (``source_vocabulary`` for a
bilm-tf checkpoint), what ``bilm_adapt.jsonnet`` needs: its options and whether it has a softmax
and Adagrad accumulators (`SourceSummary`).
One JSON string argument: the ``_jsonnet`` 0.20 binding mishandles several parameters and ``null``.
"""
import itertools
import json
from typing import Any, Callable, Dict, Optional, Tuple

from allennlp.common.checks import ConfigurationError

NativeCallbacks = Dict[str, Tuple[Tuple[str, ...], Callable[..., Any]]]


def _describe(model: Optional[str], options_file: Optional[str], weight_file: Optional[str]) -> str:
    if options_file is not None:
        return f"options_file {options_file}"
    if model is not None:
        return f"model {model}"
    return f"weight_file {weight_file}"


def _read_width(model: Optional[str], options_file: Optional[str], weight_file: Optional[str]) -> int:
    """The output width of the biLM these arguments name, read from its options alone."""
    from elmo_plugin.model_files.bilm_tf.options import BilmOptions
    from elmo_plugin.model_files.build_hints import with_build_hint
    from elmo_plugin.model_files.catalogue import DEFAULT_MODEL, PUBLISHED_MODELS
    from elmo_plugin.model_files.download import is_remote
    from elmo_plugin.model_files.resolve import resolve_model
    from elmo_plugin.model_files.stored_bilm import read_stored_options

    try:
        if options_file is not None and weight_file is not None:
            # Only the options are needed: no download of the weights for a remote pair.
            if is_remote(options_file):
                from allennlp.common.file_utils import cached_path

                options_file = cached_path(options_file)
            return BilmOptions.from_file(options_file).output_dim
        if options_file is None and weight_file is None:
            name = model if model is not None else DEFAULT_MODEL
            published = PUBLISHED_MODELS.get(name.lower())
            if published is not None:
                return published.output_dim
        files = resolve_model(model=model, options_file=options_file, weight_file=weight_file)
        return read_stored_options(files).output_dim
    except ConfigurationError as error:
        raise with_build_hint(error, options_file, weight_file, model) from None


def elmo_output_dim(
    model: Optional[str], options_file: Optional[str], weight_file: Optional[str], output_dim: Optional[float]
) -> int:
    """
    The ``elmo_output_dim`` native function (see the module documentation).

    # Raises

    `ConfigurationError` (as jsonnet's error, on one line): a model that cannot be read, or an
    ``output_dim`` that is not the model's.
    """
    if output_dim is not None and (isinstance(output_dim, bool) or not isinstance(output_dim, (int, float))):
        raise ConfigurationError(
            f"elmo output_dim must be a number (or left out: it is read from the model), got "
            f"{json.dumps(output_dim)}"
        )
    width = _read_width(model, options_file, weight_file)
    if output_dim is not None and output_dim != width:
        shown = int(output_dim) if float(output_dim).is_integer() else output_dim
        raise ConfigurationError(
            f"elmo output_dim is {shown}, but the biLM "
            f"({_describe(model, options_file, weight_file)}) gives {width}: remove output_dim "
            "(the configs read it from the model) or correct it"
        )
    return width


def _elmo_output_dim_native(elmo_json: str) -> int:
    elmo = json.loads(elmo_json)
    return elmo_output_dim(*(elmo.get(key) for key in ("model", "options_file", "weight_file", "output_dim")))


def _elmo_adaptation_source_native(source_json: str) -> Dict[str, Any]:
    from elmo_plugin.models.language_model_source import summarize_source

    arguments = json.loads(source_json)
    start_from = arguments.get("start_from")
    if not isinstance(start_from, str):
        raise ConfigurationError(
            f"start_from must name the language model to adapt (a run, an export with its softmax, a published "
            f"model's name, a bilm-tf checkpoint, any ELMo model), got {json.dumps(start_from)}"
        )
    summary = summarize_source(start_from, arguments.get("source_vocabulary"))
    return {
        "options": summary.options.to_dict(), "has_softmax": summary.has_softmax,
        "has_adagrad": summary.has_adagrad, "vocabulary_size": summary.vocabulary_size,
    }


# Kept for the life of the process: the binding keeps no reference to the parameter names.
_NATIVE_CALLBACKS: NativeCallbacks = {
    "elmo_output_dim": (("elmo",), _elmo_output_dim_native),
    "elmo_adaptation_source": (("source",), _elmo_adaptation_source_native),
}


def native_callbacks() -> NativeCallbacks:
    """The plugin's native functions, as ``_jsonnet.evaluate_file`` takes them."""
    return _NATIVE_CALLBACKS


def jsonnet_error_line(error: BaseException) -> str:
    """
    A jsonnet error as one line: its message's lines joined with single spaces, without the
    ``RUNTIME ERROR:`` / ``STATIC ERROR:`` prefix and the stack trace (the lines that start with a tab).
    """
    lines = itertools.takewhile(lambda line: not line.startswith("\t"), str(error).split("\n"))
    message = " ".join(line.strip() for line in lines if line.strip())
    for prefix in ("RUNTIME ERROR: ", "STATIC ERROR: "):
        if message.startswith(prefix):
            return message[len(prefix):]
    return message


__all__ = ["elmo_output_dim", "jsonnet_error_line", "native_callbacks"]
