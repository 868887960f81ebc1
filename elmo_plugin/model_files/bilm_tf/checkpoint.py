"""
A bilm-tf *training* checkpoint (what its ``tf.train.Saver`` writes in the save directory:
``model.ckpt-N.index``, ``model.ckpt-N.data-*``, a ``checkpoint`` file naming the latest, and
``options.json``), read without TensorFlow into the plugin's biLM, the softmax and the Adagrad
accumulators, so that a published checkpoint (BioELMo's and others') can be trained further.

The variables are renamed as bilm-tf's ``dump_weights`` renames them for ``weights.hdf5``
(`dump_weights_name`) and then converted as that file is (`bilm_tf_state_dict`), so that a
checkpoint and its dumped weights load to the same biLM.
"""
import glob
import json
import logging
import os
import re
from dataclasses import dataclass
from typing import Any, Dict, List, Mapping, Optional, Tuple

import numpy as np
import torch
from allennlp.common.checks import ConfigurationError

from elmo_plugin.common.paths import PathLike
from elmo_plugin.model_files import parameter_names as names
from elmo_plugin.model_files.bilm_tf.options import NUM_TRAINING_CHARACTER_IDS, BilmOptions
from elmo_plugin.model_files.bilm_tf.vocabulary_file import read_bilm_tf_vocabulary
from elmo_plugin.model_files.bilm_tf.weights import bilm_tf_state_dict, lstm_scope
from elmo_plugin.model_files.tf_hub.checkpoint import read_checkpoint

logger = logging.getLogger(__name__)

# The file in a save directory that names the latest checkpoint (TensorFlow's ``CheckpointState``
# as a text proto), and the options bilm-tf's ``train`` writes beside it.
CHECKPOINT_STATE_NAME = "checkpoint"
OPTIONS_NAME = "options.json"
# Vocabulary files looked for beside the checkpoint (``vocabulary.txt`` among them).
VOCABULARY_PATTERN = "vocab*.txt"
# The scope bilm-tf builds its model in, and the slot ``tf.train.AdagradOptimizer`` adds to every
# trained variable: ``<variable>/Adagrad``.
MODEL_SCOPE = "lm/"
ADAGRAD_SLOT = "Adagrad"
# bilm-tf's ``AdagradOptimizer(initial_accumulator_value=1.0)``: what an accumulator holds for a
# parameter that has never had a gradient.
INITIAL_ACCUMULATOR_VALUE = 1.0
# The softmax's variables, as `dump_weights_name` names them, and the names of the parameters of
# `ElmoLanguageModel` that they become.
SOFTMAX_WEIGHT, SOFTMAX_BIAS = "softmax/W", "softmax/b"
LANGUAGE_MODEL_SOFTMAX = ("softmax.softmax_weight", "softmax.softmax_bias")
LANGUAGE_MODEL_BILM = "bilm."
# A line of Google's 1B-word vocabulary that bilm-tf's ``Vocabulary`` skips: it has no softmax row.
_SKIPPED_VOCABULARY_LINE = "!!!MAXTERMID"
# The scopes of the biLM's variables: anything else there that the options do not describe means the
# checkpoint is of another model.
_BILM_SCOPES = ("CNN", "char_embed", "RNN_")
# The files of a checkpoint, any of which may be given for its prefix.
_CHECKPOINT_FILE = re.compile(r"\.(index|meta|data-\d+-of-\d+)$")
_STEP_SUFFIX = re.compile(r"-(\d+)$")
_STATE_LINE = re.compile(r'^\s*model_checkpoint_path\s*:\s*"(.*)"\s*$')


@dataclass
class BilmTfCheckpoint:
    """
    What `read_bilm_tf_checkpoint` read.

    # Parameters

    options : `BilmOptions`
        The architecture, from the checkpoint's ``options.json``.
    bilm_state : `Dict[str, torch.Tensor]`
        The state dict of an `ElmoBiLm` of ``options``, as `read_bilm_tf_weights` returns it for
        the ``weights.hdf5`` that bilm-tf's ``dump_weights`` would write from this checkpoint.
    softmax : `Tuple[torch.Tensor, torch.Tensor]`
        The softmax's weight ``(V, projection_dim)`` and bias ``(V,)`` (float32), rows in the order
        of the vocabulary file; `ElmoLanguageModel`'s ``softmax.softmax_weight`` and ``softmax_bias``.
    vocabulary : `List[str]`, optional
        The tokens of the vocabulary file, one per softmax row; `None` when no file was given or found.
    adagrad : `Dict[str, torch.Tensor]`, optional
        The Adagrad accumulators (bilm-tf's ``<variable>/Adagrad``), keyed by the names of the
        parameters of `ElmoLanguageModel` (``"bilm."`` + the `ElmoBiLm` parameter name,
        ``"softmax.softmax_weight"``, ``"softmax.softmax_bias"``), each of its parameter's shape;
        `None` when the checkpoint has no Adagrad slots.
    global_step : `int`, optional
        The training step the checkpoint was saved at.
    description : `str`
        The checkpoint's prefix, for messages.
    """

    options: BilmOptions
    bilm_state: Dict[str, torch.Tensor]
    softmax: Tuple[torch.Tensor, torch.Tensor]
    vocabulary: Optional[List[str]]
    adagrad: Optional[Dict[str, torch.Tensor]]
    global_step: Optional[int]
    description: str


def dump_weights_name(variable_name: str) -> str:
    """
    The ``weights.hdf5`` dataset that bilm-tf's ``dump_weights`` writes a checkpoint variable to:
    without the ``lm/`` scope and ``:0``, and TensorFlow 1.3+'s LSTM names spelled as TensorFlow
    1.2 spelled them (``RNN_0/rnn/multi_rnn_cell/cell_0/lstm_cell/kernel`` becomes
    ``RNN_0/RNN/MultiRNNCell/Cell0/LSTMCell/W_0``; ``bias`` becomes ``B``, ``projection/kernel``
    ``W_P_0``). Names already in the old spelling are kept.
    """
    name = re.sub(r":0$", "", variable_name)
    # bilm-tf strips the characters "l", "m" and "/" from the left, which for its variables is
    # exactly the scope.
    if name.startswith(MODEL_SCOPE):
        name = name[len(MODEL_SCOPE):]
    for old, new in (("/rnn/", "/RNN/"), ("/multi_rnn_cell/", "/MultiRNNCell/"), ("/cell_", "/Cell"),
                     ("/lstm_cell/", "/LSTMCell/")):
        name = name.replace(old, new)
    if "/RNN/" in name:
        if "projection" in name:
            name = name.replace("projection/kernel", "W_P_0")
        else:
            name = name.replace("/kernel", "/W_0").replace("/bias", "/B")
    return name


def is_bilm_tf_checkpoint(path: PathLike) -> bool:
    """Whether ``path`` is a bilm-tf checkpoint: a prefix ``DIR/model.ckpt-N`` whose ``.index``
    exists (or one of its files), or a save directory holding a ``checkpoint`` file and ``options.json``."""
    path = os.fspath(path)
    if os.path.isdir(path):
        return all(os.path.isfile(os.path.join(path, name)) for name in (CHECKPOINT_STATE_NAME, OPTIONS_NAME))
    return os.path.isfile(_without_file_suffix(path) + ".index")


def _without_file_suffix(path: str) -> str:
    """The prefix of a checkpoint's file (``model.ckpt-N.index`` and the like); other paths as given."""
    return _CHECKPOINT_FILE.sub("", path) if os.path.isfile(path) else path


def checkpoint_prefix(checkpoint: PathLike) -> str:
    """
    The prefix of the checkpoint ``checkpoint`` names: a prefix ``DIR/model.ckpt-N`` (or one of its
    files), or a save directory, whose ``checkpoint`` file names the latest (by an absolute path
    from the machine it was trained on, often: the same name in the directory is taken then), or
    without that file the one with the highest ``N``. `ConfigurationError` where there is none.
    """
    path = os.fspath(checkpoint)
    if os.path.isdir(path):
        return _latest_in_directory(path)
    prefix = _without_file_suffix(path)
    if not os.path.isfile(prefix + ".index"):
        raise ConfigurationError(
            f"no bilm-tf checkpoint at {path}: {prefix}.index does not exist (give the prefix "
            "SAVE_DIR/model.ckpt-N or the save directory)"
        )
    return prefix


def _latest_in_directory(directory: str) -> str:
    found = sorted(path[: -len(".index")] for path in glob.glob(os.path.join(glob.escape(directory), "*.index")))
    state_file = os.path.join(directory, CHECKPOINT_STATE_NAME)
    if os.path.isfile(state_file):
        named = _named_in_state_file(state_file)
        candidates = [named if os.path.isabs(named) else os.path.join(directory, named)]
        candidates.append(os.path.join(directory, os.path.basename(named)))
        for candidate in candidates:
            if os.path.isfile(candidate + ".index"):
                return candidate
        raise ConfigurationError(
            f"{state_file} names the checkpoint {named}, but neither {candidates[0]}.index nor "
            f"{candidates[1]}.index exists (checkpoints in the directory: "
            f"{', '.join(os.path.basename(prefix) for prefix in found) or 'none'}); give the prefix"
        )
    numbered = [(int(match.group(1)), prefix) for prefix in found if (match := _STEP_SUFFIX.search(prefix))]
    if not numbered:
        raise ConfigurationError(
            f"no bilm-tf checkpoint in {directory}: no '{CHECKPOINT_STATE_NAME}' file and no model.ckpt-N.index"
        )
    return max(numbered)[1]


def _named_in_state_file(state_file: str) -> str:
    with open(state_file, encoding="utf-8", errors="replace") as handle:
        for line in handle:
            match = _STATE_LINE.match(line)
            if match:
                # A text proto's string: TensorFlow escapes backslashes and quotes.
                return re.sub(r"\\(.)", r"\1", match.group(1))
    raise ConfigurationError(f"{state_file}: no model_checkpoint_path line; is this TensorFlow's checkpoint file?")


def _read_options(options_file: str) -> BilmOptions:
    """The options, refusing the bilm-tf models that the plugin's biLM cannot be: word embeddings as
    the input, and the softmax shared with them."""
    if not _char_cnn_model(options_file):
        raise ConfigurationError(
            f"{options_file}: this bilm-tf model has no 'char_cnn' (its input is a word embedding); word-embedding "
            "models are not supported, only character-CNN ones"
        )
    options = BilmOptions.from_file(options_file)
    if options.extra.get("share_embedding_softmax"):
        raise ConfigurationError(
            f"{options_file}: 'share_embedding_softmax' (the softmax shared with a word embedding) is not "
            "supported; only character-CNN checkpoints with their own softmax are"
        )
    return options


def _char_cnn_model(options_file: str) -> bool:
    """False only for an options file that is a JSON object without ``char_cnn``; anything else is
    left to `BilmOptions.from_file` to judge (and explain)."""
    try:
        with open(options_file, encoding="utf-8") as handle:
            options = json.load(handle)
    except (OSError, UnicodeDecodeError, ValueError):
        return True
    return not isinstance(options, dict) or "char_cnn" in options


def _default_vocabulary(directory: str) -> Optional[str]:
    found = sorted(glob.glob(os.path.join(glob.escape(directory), VOCABULARY_PATTERN)))
    if len(found) > 1:
        logger.warning(
            "%s holds several vocabulary files (%s); none is read: pass vocabulary_file",
            directory, ", ".join(os.path.basename(path) for path in found),
        )
    return found[0] if len(found) == 1 else None


def _expected_shapes(options: BilmOptions, single_layer_names: bool) -> Dict[str, Tuple[int, ...]]:
    """The shape of every biLM variable of ``options``, by `dump_weights_name`: what
    `bilm_tf_state_dict` reads."""
    char_dim, n_filters, projection = options.char_embedding_dim, options.n_filters, options.projection_dim
    shapes: Dict[str, Tuple[int, ...]] = {"char_embed": (NUM_TRAINING_CHARACTER_IDS, char_dim)}
    for index, (width, count) in enumerate(options.filters):
        shapes[f"CNN/W_cnn_{index}"] = (1, width, char_dim, count)
        shapes[f"CNN/b_cnn_{index}"] = (count,)
    for index in range(options.n_highway):
        for part in ("carry", "transform"):
            shapes[f"CNN_high_{index}/W_{part}"] = (n_filters, n_filters)
            shapes[f"CNN_high_{index}/b_{part}"] = (n_filters,)
    if options.has_character_projection:
        shapes["CNN_proj/W_proj"] = (n_filters, projection)
        shapes["CNN_proj/b_proj"] = (projection,)
    for direction in range(len(names.DIRECTIONS)):
        for layer in range(options.n_layers):
            scope = lstm_scope(direction, layer, single_layer_names)
            shapes[f"{scope}/W_0"] = (2 * projection, 4 * options.lstm_dim)
            shapes[f"{scope}/B"] = (4 * options.lstm_dim,)
            shapes[f"{scope}/W_P_0"] = (options.lstm_dim, projection)
    return shapes


@dataclass
class _Variables:
    """A checkpoint's variables by `dump_weights_name`, their own names kept for messages."""

    arrays: Dict[str, np.ndarray]
    tf_names: Dict[str, str]
    where: str  # the index file
    options_source: str

    def check(self, expected: Mapping[str, Tuple[int, ...]], what: str = "variable") -> None:
        for name, shape in expected.items():
            if name not in self.arrays:
                raise ConfigurationError(
                    f"{self.where}: no {what} for '{name}' (as bilm-tf's dump_weights names it), but "
                    f"{self.options_source} needs one of shape {shape}; is this the checkpoint of these options?"
                )
            if tuple(self.arrays[name].shape) != tuple(shape):
                raise ConfigurationError(
                    f"{self.where}: {what} '{self.tf_names[name]}' has shape {tuple(self.arrays[name].shape)}, "
                    f"but {self.options_source} implies {tuple(shape)}; is this the checkpoint of these options?"
                )


def read_bilm_tf_checkpoint(
    checkpoint: PathLike, vocabulary_file: Optional[PathLike] = None, options_file: Optional[PathLike] = None
) -> BilmTfCheckpoint:
    """
    Reads a bilm-tf training checkpoint without TensorFlow.

    The biLM's variables become `ElmoBiLm`'s state dict exactly as the checkpoint's dumped
    ``weights.hdf5`` does (`bilm_tf_state_dict`: transposes, the split of the LSTM kernel into its
    input and recurrent parts, the highway layer's two matrices stacked, a zero row prepended to the
    character embedding for the mask id; TensorFlow's gate order and forget bias are kept, the bias is
    stored without it). Each Adagrad accumulator goes through the same structural conversion, its
    character-embedding row for the mask id set to bilm-tf's initial accumulator value 1.0 (a row
    that has had no gradient). Parameters of `ElmoLanguageModel` with no bilm-tf counterpart would
    be left out of ``adagrad``; a character-CNN biLM and its softmax have none.

    # Parameters

    checkpoint : `PathLike`
        The prefix ``SAVE_DIR/model.ckpt-N`` (or one of its files), or the save directory: its
        ``checkpoint`` file's latest checkpoint, else the one with the highest ``N``.
    vocabulary_file : `PathLike`, optional
        The vocabulary the model was trained with; by default the one ``vocab*.txt`` (such as
        ``vocabulary.txt``) beside the checkpoint, if there is exactly one, else none.
    options_file : `PathLike`, optional
        By default the ``options.json`` beside the checkpoint.

    # Raises

    `ConfigurationError`
        On one line naming the file: no checkpoint, a variable missing or of another shape than the
        options imply, a vocabulary whose length differs from the softmax's rows, a word-embedding
        model or one whose softmax is shared with its embedding (not supported).
    """
    prefix = checkpoint_prefix(checkpoint)
    directory = os.path.dirname(prefix)
    options_path = os.fspath(options_file) if options_file is not None else os.path.join(directory, OPTIONS_NAME)
    if not os.path.isfile(options_path):
        raise ConfigurationError(
            f"no options file for the bilm-tf checkpoint {prefix}: {options_path} does not exist (pass options_file)"
        )
    options = _read_options(options_path)
    index_path = prefix + ".index"
    raw = read_checkpoint(prefix)
    if MODEL_SCOPE + "embedding" in raw:
        raise ConfigurationError(
            f"{index_path}: the checkpoint has a word embedding ({MODEL_SCOPE}embedding); word-embedding models "
            "are not supported, only character-CNN ones"
        )

    variables = _Variables({}, {}, index_path, options_path)
    slots = _Variables({}, {}, index_path, options_path)
    for tf_name, array in raw.items():
        target = variables
        if tf_name.endswith("/" + ADAGRAD_SLOT):
            target, tf_name = slots, tf_name[: -len(ADAGRAD_SLOT) - 1]
        name = dump_weights_name(tf_name)
        target.arrays[name] = array
        target.tf_names[name] = tf_name + ("/" + ADAGRAD_SLOT if target is slots else "")

    single_layer_names = options.n_layers == 1 and lstm_scope(0, 0) + "/W_0" not in variables.arrays
    expected = _expected_shapes(options, single_layer_names)
    n_tokens = options.extra.get("n_tokens_vocab")
    rows = int(n_tokens) if n_tokens is not None else _rows(variables, index_path)
    expected_softmax = {SOFTMAX_WEIGHT: (rows, options.projection_dim), SOFTMAX_BIAS: (rows,)}
    variables.check({**expected, **expected_softmax})
    unknown = sorted(
        variables.tf_names[name] for name in variables.arrays if name.startswith(_BILM_SCOPES) and name not in expected
    )
    if unknown:
        raise ConfigurationError(
            f"{index_path}: variables {', '.join(unknown[:6])}{' ...' if len(unknown) > 6 else ''} are not part "
            f"of the model that {options_path} describes (more filters, highway or LSTM layers in the "
            "checkpoint than in the options?)"
        )
    bilm_state = bilm_tf_state_dict(variables.arrays, options, index_path, options_path)
    softmax = tuple(_tensor(variables.arrays[name]) for name in (SOFTMAX_WEIGHT, SOFTMAX_BIAS))

    vocabulary_path = os.fspath(vocabulary_file) if vocabulary_file is not None else _default_vocabulary(directory)
    vocabulary = None
    if vocabulary_path is not None:
        # bilm-tf's Vocabulary gives that line no id, and so no softmax row.
        vocabulary = [token for token in read_bilm_tf_vocabulary(vocabulary_path) if token != _SKIPPED_VOCABULARY_LINE]
        if len(vocabulary) != rows:
            raise ConfigurationError(
                f"{vocabulary_path}: {len(vocabulary)} tokens, but the softmax of the checkpoint {prefix} has "
                f"{rows} rows; is this the vocabulary the model was trained with?"
            )

    return BilmTfCheckpoint(
        options=options,
        bilm_state=bilm_state,
        softmax=softmax,  # type: ignore[arg-type]
        vocabulary=vocabulary,
        adagrad=_adagrad(slots, {**expected, **expected_softmax}, options, index_path, options_path),
        global_step=_global_step(raw, prefix),
        description=prefix,
    )


def _rows(variables: _Variables, where: str) -> int:
    if SOFTMAX_WEIGHT not in variables.arrays:
        raise ConfigurationError(f"{where}: no softmax ({MODEL_SCOPE}{SOFTMAX_WEIGHT}); is this a bilm-tf checkpoint?")
    return int(variables.arrays[SOFTMAX_WEIGHT].shape[0])


def _tensor(array: Any) -> torch.Tensor:
    return torch.from_numpy(np.array(array, dtype=np.float32))


def _adagrad(
    slots: _Variables,
    expected: Mapping[str, Tuple[int, ...]],
    options: BilmOptions,
    where: str,
    options_source: str,
) -> Optional[Dict[str, torch.Tensor]]:
    """The accumulators by `ElmoLanguageModel` parameter name; `None` without any."""
    if not slots.arrays:
        return None
    slots.check(expected, what="Adagrad accumulator")
    # The conversion of the weights is only structural (transposes, splits, stacking, a prepended
    # row), so the accumulators take the same one; the one row it makes up gets the value an
    # accumulator starts with, not the weight's zero.
    state = bilm_tf_state_dict(slots.arrays, options, where, options_source)
    del state[names.FORMAT_VERSION]
    state[names.CHARACTER_EMBEDDING] = state[names.CHARACTER_EMBEDDING].clone()
    state[names.CHARACTER_EMBEDDING][0] = INITIAL_ACCUMULATOR_VALUE
    adagrad = {LANGUAGE_MODEL_BILM + name: value.contiguous() for name, value in state.items()}
    for parameter, name in zip(LANGUAGE_MODEL_SOFTMAX, (SOFTMAX_WEIGHT, SOFTMAX_BIAS)):
        adagrad[parameter] = _tensor(slots.arrays[name])
    return adagrad


def _global_step(raw: Mapping[str, np.ndarray], prefix: str) -> Optional[int]:
    """The ``global_step`` variable (bilm-tf's is a float32), else the ``-N`` of the prefix."""
    if "global_step" in raw and np.asarray(raw["global_step"]).size == 1:
        return int(round(float(np.asarray(raw["global_step"]).reshape(()))))
    match = _STEP_SUFFIX.search(prefix)
    return int(match.group(1)) if match else None
