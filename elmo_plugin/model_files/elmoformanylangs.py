"""
ELMoForManyLangs model directories (HIT-SCIR's ELMo for 44 languages), read into the plugin's
`ElmoBiLm` wherever a model is named: ``config.json``, ``char.dic`` and ``word.dic``, and state dicts
in AllenNLP 0.x's layout (`elmo_plugin.model_files.allennlp_conventions`); docs/elmoformanylangs.md.
"""
import codecs
import dataclasses
import json
import logging
import os
from typing import Any, Dict, Optional, Tuple

import torch
from allennlp.common.checks import ConfigurationError

from elmo_plugin.common.paths import PathLike
from elmo_plugin.model_files import parameter_names as names
from elmo_plugin.model_files.allennlp_conventions import (
    highway_key,
    highways_from_allennlp,
    lstm_cell_key,
    lstm_cell_shape,
    lstm_stack_from_allennlp,
)
from elmo_plugin.model_files.bilm_state import with_format_version
from elmo_plugin.model_files.bilm_tf.options import BilmOptions

logger = logging.getLogger(__name__)

# Special entries of its dictionaries (char.dic, word.dic).
BOS_TOKEN = "<bos>"
EOS_TOKEN = "<eos>"
OOV_TOKEN = "<oov>"
PAD_TOKEN = "<pad>"
BOW_CHARACTER = "<bow>"
EOW_CHARACTER = "<eow>"
# Entries its code looks up unconditionally; a dictionary without them cannot be used.
REQUIRED_CHARACTERS = (BOS_TOKEN, EOS_TOKEN, OOV_TOKEN, PAD_TOKEN, BOW_CHARACTER, EOW_CHARACTER)
REQUIRED_WORDS = (OOV_TOKEN, PAD_TOKEN)

CONFIG_NAME = "config.json"
CHARACTER_DICTIONARY_NAME = "char.dic"
WORD_DICTIONARY_NAME = "word.dic"
TOKEN_EMBEDDER_NAME = "token_embedder.pkl"
ENCODER_NAME = "encoder.pkl"
# Where its token embedder keeps its (AllenNLP) Highway.
_HIGHWAYS = "highways."
# Files that only an ELMoForManyLangs model directory has.
_SIGNATURE_FILES = (TOKEN_EMBEDDER_NAME, ENCODER_NAME, CHARACTER_DICTIONARY_NAME)

# The options files in elmoformanylangs 0.0.4.post2's package, which its Embedder falls back to when
# the model directory lacks the file config.json names (the released models do not ship one).
_RELEASED_OPTIONS: Dict[str, Any] = {
    "encoder": {"name": "elmo", "projection_dim": 512, "cell_clip": 3, "proj_clip": 3, "dim": 4096, "n_layers": 2},
    "token_embedder": {
        "name": "cnn", "activation": "relu",
        "filters": [[1, 32], [2, 32], [3, 64], [4, 128], [5, 256], [6, 512], [7, 1024]],
        "n_highway": 2, "word_dim": 100, "char_dim": 50, "max_characters_per_token": 50,
    },
    "classifier": {"name": "sampled_softmax", "n_samples": 8192},
    "dropout": 0.1,
}
PACKAGED_OPTIONS = dict.fromkeys(
    ("cnn_50_100_512_4096_sample.json", "cnn_0_100_512_4096_sample.json"), _RELEASED_OPTIONS
)


def is_elmoformanylangs_directory(path: PathLike) -> bool:
    """Whether ``path`` is (meant to be) an ELMoForManyLangs model directory: it holds one of
    ``token_embedder.pkl``, ``encoder.pkl``, ``char.dic``, or a ``config.json`` with a ``config_path``."""
    directory = os.fspath(path)
    if not os.path.isdir(directory):
        return False
    if any(os.path.exists(os.path.join(directory, name)) for name in _SIGNATURE_FILES):
        return True
    config = os.path.join(directory, CONFIG_NAME)
    if not os.path.isfile(config):
        return False
    try:
        with open(config, encoding="utf-8") as handle:
            content = json.load(handle)
    except (OSError, ValueError):
        return False
    return isinstance(content, dict) and "config_path" in content


@dataclasses.dataclass
class ElmoForManyLangsOptions(BilmOptions):
    """The architecture of an ELMoForManyLangs model (its options file), checked: its `BilmOptions`,
    ``word_dim`` (0: no word embedding) and ``source``, the file, for errors."""

    word_dim: int = 0
    source: str = ""

    @classmethod
    def from_dict(cls, options: Any, source: str) -> "ElmoForManyLangsOptions":
        def section(name: str) -> Dict[str, Any]:
            value = options.get(name)
            if not isinstance(value, dict):
                raise ConfigurationError(f"{source}: missing section {name!r}")
            return value

        def need(part: Dict[str, Any], part_name: str, key: str) -> Any:
            if key not in part:
                raise ConfigurationError(f"{source}: missing key '{part_name}.{key}'")
            return part[key]

        if not isinstance(options, dict):
            raise ConfigurationError(f"{source}: expected a JSON object")
        embedder, encoder = section("token_embedder"), section("encoder")
        embedder_name = str(need(embedder, "token_embedder", "name")).lower()
        if embedder_name != "cnn":
            raise ConfigurationError(
                f"{source}: token_embedder.name is {embedder_name!r}; only the character CNN "
                "('cnn', what all released models use) is supported, not its character LSTM"
            )
        encoder_name = str(need(encoder, "encoder", "name")).lower()
        if encoder_name != "elmo":
            raise ConfigurationError(
                f"{source}: encoder.name is {encoder_name!r}; only 'elmo' (the biLM with "
                "projections, what all released models use) is supported"
            )
        char_dim = int(need(embedder, "token_embedder", "char_dim"))
        if char_dim <= 0:
            raise ConfigurationError(
                f"{source}: token_embedder.char_dim is {char_dim}: a model without characters "
                "(word embedding only) is not supported"
            )
        activation = str(need(embedder, "token_embedder", "activation"))
        if activation not in ("relu", "tanh"):
            raise ConfigurationError(
                f"{source}: token_embedder.activation must be 'relu' or 'tanh', got {activation!r}"
            )
        try:
            filters = [(int(width), int(count)) for width, count in need(embedder, "token_embedder", "filters")]
        except (TypeError, ValueError):
            message = f"{source}: token_embedder.filters must be a list of [width, count] pairs"
            raise ConfigurationError(message) from None
        return cls(
            filters=filters,
            char_embedding_dim=char_dim,
            word_dim=int(embedder.get("word_dim") or 0),
            n_highway=int(embedder.get("n_highway") or 0),
            activation=activation,
            max_characters_per_token=int(need(embedder, "token_embedder", "max_characters_per_token")),
            projection_dim=int(need(encoder, "encoder", "projection_dim")),
            lstm_dim=int(need(encoder, "encoder", "dim")),
            n_layers=int(need(encoder, "encoder", "n_layers")),
            # Its code skips a clip of 0 or null.
            cell_clip=float(encoder["cell_clip"]) if encoder.get("cell_clip") else None,
            proj_clip=float(encoder["proj_clip"]) if encoder.get("proj_clip") else None,
            # Its ElmobiLm adds every layer's input to its output from the second layer on.
            use_skip_connections=True,
            source=source,
        )

    def to_bilm_options(self) -> BilmOptions:
        """The `BilmOptions` of the same architecture (what `ElmoBiLm` is built from)."""
        return BilmOptions(**{field.name: getattr(self, field.name) for field in dataclasses.fields(BilmOptions)})


def _read_json(path: str) -> Any:
    try:
        with open(path, encoding="utf-8") as handle:
            return json.load(handle)
    except json.JSONDecodeError as error:
        raise ConfigurationError(f"{path}:{error.lineno}: not valid JSON ({error.msg})") from None
    except (OSError, UnicodeDecodeError) as error:
        raise ConfigurationError(f"{path}: cannot be read ({error})") from None


def read_options(directory: PathLike) -> ElmoForManyLangsOptions:
    """The options of the model in ``directory``: ``config_path`` as given, relative to the directory,
    its file name in the directory, then the options files the package ships, as its code looks."""
    directory = os.fspath(directory)
    config_file = os.path.join(directory, CONFIG_NAME)
    if not os.path.isfile(config_file):
        raise ConfigurationError(f"{config_file}: missing; an ELMoForManyLangs model directory needs its config.json")
    config = _read_json(config_file)
    if not isinstance(config, dict) or not isinstance(config.get("config_path"), str):
        raise ConfigurationError(
            f"{config_file}: no 'config_path' naming the options file "
            "(cnn_50_100_512_4096_sample.json)"
        )
    config_path = config["config_path"]
    name = os.path.basename(config_path)
    for candidate in (os.path.join(directory, config_path), os.path.join(directory, name)):
        if os.path.isfile(candidate):
            return ElmoForManyLangsOptions.from_dict(_read_json(candidate), source=candidate)
    if name in PACKAGED_OPTIONS:
        logger.info(
            "%s names %s, which is not in %s: using elmoformanylangs' own %s, as its code does",
            config_file, config_path, directory, name,
        )
        return ElmoForManyLangsOptions.from_dict(
            PACKAGED_OPTIONS[name], source=f"elmoformanylangs' packaged {name} (named by {config_file})"
        )
    raise ConfigurationError(
        f"{config_file}: its config_path {config_path!r} is neither in {directory} nor one of "
        f"the options files elmoformanylangs ships ({', '.join(PACKAGED_OPTIONS)}); put the "
        "options file into the model directory"
    )


def read_dictionary(path: PathLike) -> Dict[str, int]:
    """A ``char.dic`` or ``word.dic``, parsed as its code parses it: lines ``strip()``-ed, split at tabs
    (a line left with one field is U+3000, which ``strip`` removed); a later line wins."""
    path = os.fspath(path)
    if not os.path.isfile(path):
        raise ConfigurationError(f"{path}: missing")
    dictionary: Dict[str, int] = {}
    try:
        with codecs.open(path, "r", encoding="utf-8") as handle:
            for number, line in enumerate(handle, start=1):
                fields = line.strip().split("\t")
                if len(fields) == 1:
                    fields.insert(0, "\u3000")
                if len(fields) != 2:
                    raise ConfigurationError(f"{path}:{number}: expected 'entry<TAB>id', got {line.rstrip()!r}")
                try:
                    dictionary[fields[0]] = int(fields[1])
                except ValueError:
                    raise ConfigurationError(f"{path}:{number}: the id {fields[1]!r} is not an integer") from None
    except UnicodeDecodeError as error:
        raise ConfigurationError(f"{path}: not UTF-8 ({error})") from None
    return dictionary


def _load_state_dict(path: str) -> Dict[str, torch.Tensor]:
    if not os.path.isfile(path):
        raise ConfigurationError(
            f"{path}: missing; an ELMoForManyLangs model directory needs {TOKEN_EMBEDDER_NAME} "
            f"and {ENCODER_NAME}"
        )
    try:
        # weights_only: a state dict needs no code to be unpickled, so none is run.
        state = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as error:  # torch raises RuntimeError, EOFError, UnpicklingError, ...
        raise ConfigurationError(
            f"{path}: not a readable PyTorch state dict ({type(error).__name__}: "
            f"{str(error).splitlines()[0] if str(error) else 'no detail'}); is the file complete?"
        ) from None
    if not isinstance(state, dict) or not all(isinstance(value, torch.Tensor) for value in state.values()):
        raise ConfigurationError(f"{path}: does not hold a state dict (names -> tensors)")
    return {key: value.float() for key, value in state.items()}


def _check_shapes(path: str, state: Dict[str, torch.Tensor], expected: Dict[str, Tuple[int, ...]], source: str) -> None:
    """Every expected tensor there with its shape and nothing else, or one error naming ``path``."""
    missing = [name for name in expected if name not in state]
    if missing:
        raise ConfigurationError(
            f"{path}: {', '.join(missing[:4])}{' ...' if len(missing) > 4 else ''} missing, but "
            f"{source} needs {'it' if len(missing) == 1 else 'them'}; do the weights and the "
            "options belong together?"
        )
    unexpected = sorted(set(state) - set(expected))
    if unexpected:
        raise ConfigurationError(
            f"{path}: {', '.join(unexpected[:4])}{' ...' if len(unexpected) > 4 else ''} not part "
            f"of the model {source} describes; do the weights and the options belong together?"
        )
    for name, shape in expected.items():
        if tuple(state[name].shape) != shape:
            raise ConfigurationError(
                f"{path}: {name} has shape {tuple(state[name].shape)}, but {source} implies "
                f"{shape}; do the weights and the options belong together?"
            )


def _check_dictionary_fits(
    dictionary_path: str, dictionary: Dict[str, int], weights_path: str, weight: torch.Tensor, what: str
) -> None:
    rows = weight.size(0)
    out_of_range = [entry for entry, index in dictionary.items() if not 0 <= index < rows]
    if len(dictionary) != rows or out_of_range:
        detail = f"; e.g. {out_of_range[0]!r} has id {dictionary[out_of_range[0]]}" if out_of_range else ""
        raise ConfigurationError(
            f"{dictionary_path}: {len(dictionary)} entries, but the {what} embedding in "
            f"{weights_path} has {rows} rows (ids 0-{rows - 1}){detail}: this dictionary does not "
            "belong to these weights"
        )


def _with_mask_row(weight: torch.Tensor) -> torch.Tensor:
    """An embedding with the all-zero row 0 of the +1-shifted ids in front."""
    return torch.cat([weight.new_zeros(1, weight.size(1)), weight])


class ElmoForManyLangsModel:
    """
    An ELMoForManyLangs model directory, read and checked: `options`, `char_to_id`, `word_to_id`
    (None without a word embedding) and `state`, the state dict of our `ElmoBiLm`.

    # Parameters

    directory : `PathLike`
        The model directory (``config.json``, ``char.dic``, ``word.dic``, ``token_embedder.pkl``,
        ``encoder.pkl``).
    weights : `bool`, optional (default = `True`)
        Read and convert the weights too; the indexer needs only the dictionaries.
    """

    def __init__(self, directory: PathLike, weights: bool = True) -> None:
        self.directory = os.fspath(directory)
        if not os.path.isdir(self.directory):
            raise ConfigurationError(f"{self.directory}: not a directory")
        self.options = read_options(self.directory)
        self.character_dictionary_path = os.path.join(self.directory, CHARACTER_DICTIONARY_NAME)
        self.word_dictionary_path = os.path.join(self.directory, WORD_DICTIONARY_NAME)
        self.char_to_id = read_dictionary(self.character_dictionary_path)
        self.word_to_id = read_dictionary(self.word_dictionary_path) if self.options.word_dim > 0 else None
        for path, dictionary, required in (
            (self.character_dictionary_path, self.char_to_id, REQUIRED_CHARACTERS),
            (self.word_dictionary_path, self.word_to_id, REQUIRED_WORDS),
        ):
            missing = [entry for entry in required if dictionary is not None and entry not in dictionary]
            if missing:
                raise ConfigurationError(
                    f"{path}: no entry for {', '.join(missing)}, which elmoformanylangs' code "
                    "looks up for every sentence"
                )
        self.state: Optional[Dict[str, torch.Tensor]] = self._read_weights() if weights else None

    def _read_weights(self) -> Dict[str, torch.Tensor]:
        options = self.options
        source = options.source
        embedder_path = os.path.join(self.directory, TOKEN_EMBEDDER_NAME)
        encoder_path = os.path.join(self.directory, ENCODER_NAME)
        embedder = _load_state_dict(embedder_path)
        encoder = _load_state_dict(encoder_path)

        # Rows of the embeddings come from the dictionaries: check the widths first, so that a
        # mismatch of dictionary and weights is reported as that.
        n_filters = options.n_filters
        expected: Dict[str, Tuple[int, ...]] = {}
        for name, dim in (("char_emb_layer", options.char_embedding_dim), ("word_emb_layer", options.word_dim)):
            if dim > 0:
                key = f"{name}.embedding.weight"
                rows = embedder[key].size(0) if key in embedder and embedder[key].dim() == 2 else -1
                expected[key] = (rows, dim)
        for index, (width, count) in enumerate(options.filters):
            expected[f"convolutions.{index}.weight"] = (count, options.char_embedding_dim, width)
            expected[f"convolutions.{index}.bias"] = (count,)
        for index in range(options.n_highway):
            expected[_HIGHWAYS + highway_key(index, "weight")] = (2 * n_filters, n_filters)
            expected[_HIGHWAYS + highway_key(index, "bias")] = (2 * n_filters,)
        projection, cell = options.projection_dim, options.lstm_dim
        expected["projection.weight"] = (projection, options.word_dim + n_filters)
        expected["projection.bias"] = (projection,)
        _check_shapes(embedder_path, embedder, expected, source)

        for what, path, dictionary, layer in (
            ("character", self.character_dictionary_path, self.char_to_id, "char_emb_layer"),
            ("word", self.word_dictionary_path, self.word_to_id, "word_emb_layer"),
        ):
            if dictionary is not None:
                _check_dictionary_fits(path, dictionary, embedder_path, embedder[f"{layer}.embedding.weight"], what)

        # Ours: every layer's input is the projection's width.
        our_shapes = {
            "input_weight": (projection, 4 * cell),
            "recurrent_weight": (projection, 4 * cell),
            "bias": (4 * cell,),
            "projection_weight": (cell, projection),
        }
        expected = {
            lstm_cell_key(direction, layer, parameter): lstm_cell_shape(parameter, shape)
            for direction in names.DIRECTIONS
            for layer in range(options.n_layers)
            for parameter, shape in our_shapes.items()
        }
        _check_shapes(encoder_path, encoder, expected, source)
        return self._convert(embedder, encoder)

    def _convert(self, embedder: Dict[str, torch.Tensor], encoder: Dict[str, torch.Tensor]) -> Dict[str, torch.Tensor]:
        """Their state dicts -> the state dict of our `ElmoBiLm` (see the module documentation)."""
        options = self.options
        state: Dict[str, torch.Tensor] = {
            names.CHARACTER_EMBEDDING: _with_mask_row(embedder["char_emb_layer.embedding.weight"])
        }
        if self.word_to_id is not None:
            state[names.WORD_EMBEDDING] = _with_mask_row(embedder["word_emb_layer.embedding.weight"])
        for kind in names.WEIGHT_AND_BIAS:
            for index in range(len(options.filters)):
                state[names.convolution(index, kind)] = embedder[f"convolutions.{index}.{kind}"]
            state[names.projection(kind)] = embedder[f"projection.{kind}"]
        state.update(highways_from_allennlp(embedder, _HIGHWAYS, options.n_highway))
        state.update(lstm_stack_from_allennlp(encoder, "", options.n_layers, options.lstm_dim))
        return with_format_version({name: value.contiguous() for name, value in state.items()})


def refuse_bilm_tf_export(path: PathLike) -> None:
    """`ConfigurationError` (one line) if ``path`` is an ELMoForManyLangs model, which the bilm-tf
    format cannot hold (its characters are ids of its own vocabulary; its word embedding)."""
    if is_elmoformanylangs_directory(path):
        raise ConfigurationError(
            f"{os.fspath(path)} is an ELMoForManyLangs model, which the bilm-tf format cannot "
            "hold (its characters are ids of its own char.dic, not UTF-8 bytes, and bilm-tf has "
            "no word-embedding path); use the directory itself as the model instead: "
            "--model DIR, ElmoEmbedder(model=DIR), \"model\": DIR"
        )
