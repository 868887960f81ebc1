"""
A pretrained biLM as one ONNX graph for serving without PyTorch (``allennlp elmo-export MODEL OUT
--format onnx``): character ids in, with dynamic batch and token axes, what `ElmoEmbedder` gives
out and the mask (docs/serving.md), computed by `elmo_plugin.export.scan_forward`. Beside it go
``options.json`` and ``character_ids.json``, how tokens become ids (examples/serve_onnx.py).
"""
import contextlib
import json
import logging
import os
import time
import warnings
from typing import Any, Dict, Iterator, List, Optional, Tuple

import torch
from allennlp.common.checks import ConfigurationError
from torch import nn

from elmo_plugin.common.archive import open_model_archive
from elmo_plugin.common.atomic_output import atomic_directory
from elmo_plugin.common.paths import PathLike
from elmo_plugin.common.write_errors import is_write_failure
from elmo_plugin.data.character_ids import (
    BEGINNING_OF_WORD_CHARACTER,
    BOS_TOKEN,
    END_OF_WORD_CHARACTER,
    EOS_TOKEN,
    PADDING_CHARACTER,
    ElmoCharacterIds,
)
from elmo_plugin.data.elmoformanylangs_character_ids import ElmoForManyLangsCharacterIds
from elmo_plugin.export.scan_forward import bilm_layers_masked
from elmo_plugin.model_files.elmoformanylangs import OOV_TOKEN
from elmo_plugin.model_files.resolve import PYTHON_ARGUMENTS, ArgumentNames, resolve_model
from elmo_plugin.models.task_model_bilm import choose_bilm, elmo_bilms, load_task_model
from elmo_plugin.modules.bilm import ElmoBiLm
from elmo_plugin.modules.elmo import Elmo
from elmo_plugin.modules.scalar_mix import ScalarMix
from elmo_plugin.modules.util import remove_sentence_boundaries

logger = logging.getLogger(__name__)

MODEL_NAME = "elmo.onnx"
OPTIONS_NAME = "options.json"
CHARACTER_IDS_NAME = "character_ids.json"
EXPORT_NAMES = (MODEL_NAME, OPTIONS_NAME, CHARACTER_IDS_NAME)

INPUT_NAME = "character_ids"
MASK_NAME = "mask"
# --all, --top, --average: the output's name is the choice's ("layers" for all of them).
OUTPUTS = {"all": "layers", "top": "top", "average": "average"}
MIX_OUTPUT = "mix"
OPSET = 18
# The example traced: the second sentence shorter, so that the graph masks finished rows.
EXAMPLE_SHAPE = (2, 7)


class ExportedElmo(nn.Module):
    """
    What the exported graph computes, as a module: the biLM's layers without the sentence
    boundaries (all of them, the top one, their average, or a scalar mix of them) and the mask.

    # Parameters

    bilm : `ElmoBiLm`
        A frozen biLM, run in evaluation mode and statelessly.
    output : `str`, optional (default = `"all"`)
        ``"all"``, ``"top"`` or ``"average"``; ignored with ``scalar_mix``.
    scalar_mix : `ScalarMix`, optional
        A task model's mix of the layers, computed as `Elmo` computes it, without dropout.
    """

    def __init__(self, bilm: ElmoBiLm, output: str = "all", scalar_mix: Optional[ScalarMix] = None) -> None:
        super().__init__()
        if output not in OUTPUTS:
            raise ConfigurationError(f"output must be one of {', '.join(OUTPUTS)}, got {output!r}")
        self.bilm = bilm
        self.output = output
        self.scalar_mix = scalar_mix

    @property
    def output_name(self) -> str:
        return MIX_OUTPUT if self.scalar_mix is not None else OUTPUTS[self.output]

    def forward(self, character_ids: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor]:
        layers, mask_with_boundaries = bilm_layers_masked(self.bilm, character_ids)
        if self.scalar_mix is not None:
            mixed = self.scalar_mix(layers, mask_with_boundaries)
            return remove_sentence_boundaries(mixed, mask_with_boundaries)
        stacked = torch.stack(layers, dim=2)  # (batch, tokens + 2, layers, dim)
        tokens, mask = remove_sentence_boundaries(stacked, mask_with_boundaries)
        tokens = tokens.permute(2, 0, 1, 3)  # (layers, batch, tokens, dim)
        if self.output == "top":
            return tokens[-1], mask
        if self.output == "average":
            return tokens.mean(dim=0), mask
        return tokens, mask


def character_id_table(bilm: ElmoBiLm) -> Dict[str, Any]:
    """How the biLM's tokens become rows of ids, as JSON for a program without the plugin
    (examples/serve_onnx.py); every id +1-shifted (0: no token), as the graph takes them."""
    scheme = bilm.character_ids
    if isinstance(scheme, ElmoForManyLangsCharacterIds):
        return {
            "scheme": "elmoformanylangs",
            "max_characters_per_token": scheme.max_characters_per_token,
            # Its own, as ElmoForManyLangsCharacterIds writes them (begin and end swapped there).
            "beginning_of_word": scheme._begin,
            "end_of_word": scheme._end,
            "padding": scheme.padding_id,
            "unknown_character": scheme._unknown + 1,
            "characters": {key: value + 1 for key, value in scheme.char_to_id.items()},
            "words": None if scheme.word_to_id is None else {
                key: value + 1 for key, value in scheme.word_to_id.items()
            },
            "unknown_word": None if scheme.word_to_id is None else scheme.word_to_id[OOV_TOKEN] + 1,
        }
    if isinstance(scheme, ElmoCharacterIds) and not scheme.tokens_to_add:
        return {
            "scheme": "utf-8-bytes",
            "max_characters_per_token": scheme.max_characters_per_token,
            "beginning_of_word": BEGINNING_OF_WORD_CHARACTER + 1,
            "end_of_word": END_OF_WORD_CHARACTER + 1,
            "padding": PADDING_CHARACTER + 1,
            # Tokens whose whole row is given: the sentence markers, written as the graph
            # writes them around every sentence, if a text has them as tokens.
            "token_rows": {
                BOS_TOKEN: list(scheme.beginning_of_sentence_ids),
                EOS_TOKEN: list(scheme.end_of_sentence_ids),
            },
        }
    raise ConfigurationError(f"cannot write the character ids of {type(scheme).__name__} as a table for serving")


def example_ids(bilm: ElmoBiLm) -> torch.Tensor:
    """`EXAMPLE_SHAPE` character ids of real tokens, the second sentence shorter."""
    length = EXAMPLE_SHAPE[1]
    return bilm.character_ids.batch_to_ids([["export"] * length, ["export"] * (length - 2)])


def _input_axes(model_path: str) -> List:
    import onnx

    return list(onnx.load(model_path, load_external_data=False).graph.input[0].type.tensor_type
                .shape.dim)


def symbolic_input_axes(model_path: str) -> List[bool]:
    """For each axis of the graph's first input: True where it is symbolic (any size)."""
    return [bool(dim.dim_param) and not dim.HasField("dim_value") for dim in _input_axes(model_path)]


def check_dynamic_axes(model_path: str, shown_path: str) -> None:
    """`ConfigurationError` unless the graph's input has symbolic batch and token axes (an exporter
    that pins them writes a graph that takes only the example's shape, silently)."""
    symbolic = symbolic_input_axes(model_path)
    if len(symbolic) != 3 or not (symbolic[0] and symbolic[1]):
        axes = ", ".join(dim.dim_param or str(dim.dim_value) for dim in _input_axes(model_path))
        raise ConfigurationError(
            f"{shown_path}: the exported graph's input has fixed axes ({axes}), so it would take "
            "only one batch size or sentence length; nothing was written"
        )


@contextlib.contextmanager
def _quiet_exporter() -> Iterator[None]:
    """Only the exporter's warnings and errors (its passes log every rewrite at INFO)."""
    loggers = [logging.getLogger(name) for name in ("onnx_ir", "onnxscript", "torch.onnx")]
    levels = [each.level for each in loggers]
    try:
        for each in loggers:
            each.setLevel(max(each.getEffectiveLevel(), logging.WARNING))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", FutureWarning)
            yield
    finally:
        for each, level in zip(loggers, levels):
            each.setLevel(level)


def load_exported_module(
    model: Optional[PathLike],
    output: str = "all",
    embedder: Optional[str] = None,
    scalar_mix: Optional[int] = None,
    argument_names: ArgumentNames = PYTHON_ARGUMENTS,
) -> ExportedElmo:
    """
    The `ExportedElmo` of ``model``: any model `resolve_model` takes, or a task model's archive
    (an AllenNLP model with an ELMo embedder), whose biLM ``embedder`` names when it has several
    (`choose_bilm`) and whose ``scalar_mix``-th mix of that embedder is exported if given.
    """
    files = resolve_model(model, argument_names=argument_names)
    task_model = False
    if files.archive_file is not None:
        with open_model_archive(files.archive_file) as archive:
            task_model = archive.config.get("model", {}).get("type") != "elmo_bilm"
    if not task_model:
        if embedder is not None or scalar_mix is not None:
            option = "--embedder" if embedder is not None else "--scalar-mix"
            raise ConfigurationError(
                f"{option} picks the ELMo embedder of a task model's archive; {files.description}"
                " is a biLM"
            )
        bilm = ElmoBiLm.from_model(files)
        return ExportedElmo(bilm.eval(), output)
    source = str(files.archive_file)
    task = load_task_model(source).model.eval()
    bilm = choose_bilm(elmo_bilms(task), embedder, source)
    mix = None
    if scalar_mix is not None:
        mixes = [module.scalar_mixes for module in task.modules() if isinstance(module, Elmo) and module.bilm is bilm]
        available = mixes[0] if mixes else []
        if not 0 <= scalar_mix < len(available):
            raise ConfigurationError(
                f"{source}: the ELMo embedder has {len(available)} scalar mix(es); --scalar-mix "
                f"takes 0 to {len(available) - 1}, got {scalar_mix}"
                if available else f"{source}: the ELMo embedder has no scalar mix to export"
            )
        mix = available[scalar_mix]
    bilm.requires_grad_(False)
    return ExportedElmo(bilm, output, mix)


def export_onnx(
    model: Optional[PathLike],
    output_directory: str,
    output: str = "all",
    embedder: Optional[str] = None,
    scalar_mix: Optional[int] = None,
    n_characters: int = 262,
    argument_names: ArgumentNames = PYTHON_ARGUMENTS,
) -> Dict[str, str]:
    """Writes ``elmo.onnx``, ``options.json`` and ``character_ids.json`` of ``model`` (see
    `load_exported_module`) into ``output_directory`` as one set; returns each file's path by kind."""
    try:
        import onnx  # noqa: F401
        import onnxscript  # noqa: F401
    except ImportError as error:
        raise ConfigurationError(
            f"--format onnx needs the packages onnx and onnxscript ({error}); see "
            "requirements/dev.txt for the versions tested"
        ) from None
    module = load_exported_module(model, output, embedder, scalar_mix, argument_names).eval()
    bilm = module.bilm
    table = character_id_table(bilm)
    ids = example_ids(bilm)
    batch, tokens = torch.export.Dim.DYNAMIC, torch.export.Dim.DYNAMIC
    with atomic_directory(output_directory, EXPORT_NAMES) as directory:
        graph_path = os.path.join(directory, MODEL_NAME)
        start = time.perf_counter()
        try:
            with torch.no_grad(), _quiet_exporter():
                torch.onnx.export(
                    module, (ids,), graph_path, dynamo=True, opset_version=OPSET, input_names=[INPUT_NAME],
                    output_names=[module.output_name, MASK_NAME], dynamic_shapes=({0: batch, 1: tokens},),
                    external_data=False, verbose=False,
                )
        except Exception as error:  # the exporter's own errors have no common class
            if is_write_failure(error):
                raise
            first_line = str(error).strip().splitlines()[0] if str(error).strip() else ""
            raise ConfigurationError(
                f"{model}: PyTorch's ONNX exporter cannot export this biLM "
                f"({type(error).__name__}: {first_line[:300]})"
            ) from None
        logger.info("exported in %.1f s", time.perf_counter() - start)
        check_dynamic_axes(graph_path, os.path.join(output_directory, MODEL_NAME))
        bilm.options.to_file(os.path.join(directory, OPTIONS_NAME), n_characters=n_characters)
        with open(os.path.join(directory, CHARACTER_IDS_NAME), "w", encoding="utf-8") as handle:
            json.dump(table, handle, ensure_ascii=False)
            handle.write("\n")
    kinds = ("model", "options", "character ids")
    return {kind: os.path.join(output_directory, name) for kind, name in zip(kinds, EXPORT_NAMES)}
