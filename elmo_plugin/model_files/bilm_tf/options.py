"""
The bilm-tf ``options.json``: what a biLM looks like, read and checked in one place (the training
recipe's keys are kept in ``extra``, so that a file read and written again loses nothing).
"""
import json
import os
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Tuple

from allennlp.common.checks import ConfigurationError

from elmo_plugin.common.paths import PathLike

# The first bytes of every HDF5 file (a weights.hdf5 given where the options belong).
HDF5_SIGNATURE = b"\x89HDF\r\n\x1a\n"

class SwappedModelFilesError(ConfigurationError):
    """An HDF5 file given as the options (the weight file in the options' place), the arguments
    spelled as the caller spells them."""

    def __init__(self, path: str, options_name: str = "options_file", weights_name: str = "weight_file") -> None:
        self.path = path
        super().__init__(
            f"{path} is not an options.json: this looks like an HDF5 weight file; did you swap "
            f"{options_name} and {weights_name}?"
        )


# Character ids as stored in a bilm-tf weight file's ``char_embed`` (before the +1 shift that
# `elmo_plugin.data.character_ids` applies): 256 bytes and 5 special ids.
NUM_TRAINING_CHARACTER_IDS = 261


@dataclass
class BilmOptions:
    """
    The architecture of a character-based biLM, as in bilm-tf's ``options.json``.

    # Parameters

    filters : `List[Tuple[int, int]]`
        ``(width, count)`` of every character convolution.
    char_embedding_dim : `int`
        Size of each byte's embedding (``char_cnn.embedding.dim``).
    n_highway : `int`
        Number of highway layers after the convolutions (0 allowed).
    max_characters_per_token : `int`
        Bytes per token including the begin/end-of-word ids (50 English, 30 Korean).
    n_characters : `int`
        261 in training files, 262 in prediction files; both describe the same weights.
    activation : `str`
        ``"relu"`` or ``"tanh"``, applied after the max-pool of each convolution.
    lstm_dim : `int`
        LSTM cell size (``lstm.dim``).
    projection_dim : `int`
        Size of the LSTM projection and of the token embedding.
    n_layers : `int`
        LSTM layers per direction (1 allowed).
    cell_clip, proj_clip : `float`, optional
        Clip values for the cell state and the projected output; `None` means no clipping.
    use_skip_connections : `bool`
        Add each LSTM layer's input to its output, for every layer after the first.
    dropout : `float`
        Dropout used in training (ignored for inference).
    extra : `Dict[str, Any]`
        All other top-level keys of the file (the training recipe), kept for round trips.
    """

    filters: List[Tuple[int, int]]
    char_embedding_dim: int
    n_highway: int
    max_characters_per_token: int
    lstm_dim: int
    projection_dim: int
    n_layers: int = 1
    n_characters: int = 262
    activation: str = "relu"
    cell_clip: Optional[float] = None
    proj_clip: Optional[float] = None
    use_skip_connections: bool = False
    dropout: float = 0.0
    extra: Dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.filters = [(int(width), int(count)) for width, count in self.filters]

    @property
    def n_filters(self) -> int:
        """Total number of convolution filters: the width of the highway layers."""
        return sum(count for _, count in self.filters)

    @property
    def has_character_projection(self) -> bool:
        """Whether the token vectors are projected: bilm-tf has no projection when the filters
        already sum to ``projection_dim``."""
        return self.n_filters != self.projection_dim

    @property
    def output_dim(self) -> int:
        """Width of every ELMo layer: forward and backward halves together."""
        return 2 * self.projection_dim

    @property
    def num_output_layers(self) -> int:
        """The token layer plus one per LSTM layer."""
        return self.n_layers + 1

    @classmethod
    def from_dict(cls, options: Dict[str, Any], source: str = "options") -> "BilmOptions":
        """Reads the bilm-tf dictionary; ``source`` names the file in error messages."""

        def need(section: Dict[str, Any], key: str, where: str) -> Any:
            if key not in section:
                raise ConfigurationError(f"{source}: missing required key '{where}{key}'")
            return section[key]

        if not isinstance(options, dict):
            raise ConfigurationError(f"{source}: expected a JSON object, got {type(options).__name__}")
        if not options.get("bidirectional", True):
            raise ConfigurationError(f"{source}: 'bidirectional' is false; ELMo needs a bidirectional LM")
        char_cnn = need(options, "char_cnn", "")
        lstm = need(options, "lstm", "")
        filters = need(char_cnn, "filters", "char_cnn.")
        activation = char_cnn.get("activation", "relu")
        if activation not in ("relu", "tanh"):
            raise ConfigurationError(f"{source}: char_cnn.activation must be 'relu' or 'tanh', got {activation!r}")
        n_characters = int(char_cnn.get("n_characters", 262))
        if n_characters not in (261, 262):
            raise ConfigurationError(
                f"{source}: char_cnn.n_characters must be 261 (training) or 262 (prediction), "
                f"got {n_characters}"
            )
        try:
            filters = [(int(w), int(n)) for w, n in filters]
        except (TypeError, ValueError):
            raise ConfigurationError(
                f"{source}: char_cnn.filters must be a list of [width, count] pairs, got {filters!r}"
            )
        known = {"char_cnn", "lstm", "dropout", "bidirectional"}
        return cls(
            filters=filters,
            char_embedding_dim=int(need(need(char_cnn, "embedding", "char_cnn."), "dim", "char_cnn.embedding.")),
            n_highway=int(char_cnn.get("n_highway") or 0),
            max_characters_per_token=int(need(char_cnn, "max_characters_per_token", "char_cnn.")),
            n_characters=n_characters,
            activation=activation,
            lstm_dim=int(need(lstm, "dim", "lstm.")),
            projection_dim=int(need(lstm, "projection_dim", "lstm.")),
            n_layers=int(lstm.get("n_layers", 1)),
            cell_clip=lstm.get("cell_clip"),
            proj_clip=lstm.get("proj_clip"),
            use_skip_connections=bool(lstm.get("use_skip_connections", False)),
            dropout=float(options.get("dropout", 0.0)),
            extra={k: v for k, v in options.items() if k not in known},
        )

    @classmethod
    def from_file(cls, options_file: PathLike) -> "BilmOptions":
        """Reads ``options.json``; errors name the file (and the line, for bad JSON)."""
        path = os.fspath(options_file)
        if not os.path.isfile(path):
            raise ConfigurationError(f"options file not found: {path}")
        with open(path, "rb") as handle:
            data = handle.read()
        if data.startswith(HDF5_SIGNATURE):
            raise SwappedModelFilesError(path)
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError as error:
            raise ConfigurationError(
                f"{path}: not an options.json (not UTF-8 text: byte {error.start} is "
                f"0x{data[error.start]:02x}); give the bilm-tf options.json of the model"
            ) from None
        try:
            options = json.loads(text)
        except json.JSONDecodeError as error:
            raise ConfigurationError(f"{path}:{error.lineno}: not valid JSON ({error.msg})") from None
        return cls.from_dict(options, source=path)

    def to_dict(self, n_characters: Optional[int] = None) -> Dict[str, Any]:
        """The bilm-tf dictionary. ``n_characters`` overrides the stored value (261 or 262)."""
        return {
            **self.extra,
            "bidirectional": True,
            "dropout": self.dropout,
            "char_cnn": {
                "activation": self.activation,
                "embedding": {"dim": self.char_embedding_dim},
                "filters": [[w, n] for w, n in self.filters],
                "max_characters_per_token": self.max_characters_per_token,
                "n_characters": n_characters or self.n_characters,
                "n_highway": self.n_highway,
            },
            "lstm": {
                "cell_clip": self.cell_clip,
                "dim": self.lstm_dim,
                "n_layers": self.n_layers,
                "proj_clip": self.proj_clip,
                "projection_dim": self.projection_dim,
                "use_skip_connections": self.use_skip_connections,
            },
        }

    def to_file(self, path: PathLike, n_characters: Optional[int] = None) -> None:
        with open(path, "w", encoding="utf-8") as handle:
            json.dump(self.to_dict(n_characters), handle, indent=2)
            handle.write("\n")
