"""
`EmbeddingJob`: one ``allennlp elmo`` run (or ``ElmoEmbedder.embed_file`` call) as a value, each
option spelled once; `checked` runs every check that needs no model.
"""
import os
from dataclasses import dataclass, replace
from typing import IO, Iterable, Iterator, List, Optional, Union

import numpy as np
from allennlp.common.checks import ConfigurationError

from elmo_plugin.common.atomic_output import input_at
from elmo_plugin.common.paths import PathLike
from elmo_plugin.data.sentence_file import check_is_text_input, check_sentence_file
from elmo_plugin.embedding_output.batching import DEFAULT_SORT_CHUNK_BATCHES, Line, line_batches
from elmo_plugin.embedding_output.layout import FLAT, LAYOUTS, PER_SENTENCE, SENTENCE_INDICES, SENTENCE_TO_INDEX
from elmo_plugin.model_files.resolve import PYTHON_ARGUMENTS, ArgumentNames

DEFAULT_BATCH_SIZE = 64

# Under torchrun, about this many tokens per piece (a shard file, the unit a rerun reuses): at
# --top float16 with 1024 dims a 2 GiB shard, on one GPU a minute or so of work lost to a kill.
DEFAULT_PIECE_TOKENS = 1 << 20

OUTPUT_FORMATS = ("all", "top", "average")


class ExistingOutputError(ConfigurationError):
    """The output file exists, and the job may not replace it (no ``--overwrite``)."""


def check_batch_size(batch_size: int) -> None:
    is_integer = isinstance(batch_size, (int, np.integer)) and not isinstance(batch_size, bool)
    if not is_integer or batch_size < 1:
        raise ConfigurationError(f"batch_size must be a positive integer, got {batch_size!r}")


def check_output_format(output_format: str) -> None:
    if output_format not in OUTPUT_FORMATS:
        raise ConfigurationError(f"output_format must be one of {', '.join(OUTPUT_FORMATS)}; got {output_format!r}")


def input_path_of(input_file: Union[PathLike, IO]) -> str:
    # AllenNLP 0.9 took an open file (argparse.FileType); a job reads the input twice (checked,
    # then embedded), so an open file is accepted for its name.
    if hasattr(input_file, "read"):
        name = getattr(input_file, "name", None)
        if not isinstance(name, (str, bytes, os.PathLike)) or not os.path.isfile(name):
            raise ConfigurationError(
                "embed_file needs a path (or a file opened from a path) to read the input twice, "
                f"got {input_file!r}"
            )
        return os.fsdecode(name)
    return os.fspath(input_file)  # type: ignore[arg-type]


@dataclass(frozen=True)
class EmbeddingJob:
    """
    One embedding run: every option of ``allennlp elmo`` but the console's, spelled once.

    # Parameters

    input_path : `str`
        The sentences: one whitespace-tokenized sentence a line, UTF-8.
    output_path : `str`
        The HDF5 file to write.
    num_sentences : `int`, optional (default = `None`)
        The number of lines of the input, once `checked` has counted them.
    output_format : `str`, optional (default = `"all"`)
        ``"all"`` every layer, ``"top"`` the top layer, ``"average"`` the mean of all layers.
    batch_size : `int`, optional (default = `64`)
        Sentences per biLM call.
    forget_sentences : `bool`, optional (default = `False`)
        Write no sentence index.
    use_sentence_keys : `bool`, optional (default = `False`)
        Per-sentence layout: key each dataset by its sentence instead of its line number.
    include_sentence_indices : `bool`, optional (default = `False`)
        Per-sentence layout: also write the sentence index under AllenNLP 0.8's name.
    layout : `str`, optional (default = `"per-sentence"`)
        ``"per-sentence"`` (AllenNLP 0.9's) or ``"flat"`` (`elmo_plugin.embedding_output.layout`).
    float16 : `bool`, optional (default = `False`)
        Store the vectors as float16.
    sentence_vectors : `bool`, optional (default = `False`)
        Write one vector per sentence, the mean over its tokens of the chosen output.
    overwrite : `bool`, optional (default = `True`)
        Replace an existing output once the new one is complete.
    sort_chunk_batches : `int`, optional (default = `32`)
        Stateless runs: embed this many batches at a time longest first (`line_batches`).
    piece_tokens : `int`, optional (default = `2^20`)
        Under ``torchrun``: about this many tokens per shard file.
    model, options_file, weight_file : `str`, optional
        The model, as `elmo_plugin.ElmoEmbedder` takes them (``None``: the published Original).
    cuda_device : `int`, optional (default = `-1`)
        The GPU; -1 the CPU. Under ``torchrun`` any value >= 0 means each process's own GPU.
    stateful : `bool`, optional (default = `False`)
        Carry the LSTM state from batch to batch in file order (AllenNLP 0.9's results).
    precision : `str`, optional (default = `"float32"`)
        What the biLM computes in (`elmo_plugin.modules.precision`).
    argument_names : `ArgumentNames`, optional (default = `PYTHON_ARGUMENTS`)
        How errors about the model spell its arguments.
    ray_address : `str`, optional (default = `None`)
        Run on Ray and write a Parquet folder: ``"local"``, ``"auto"`` or a cluster's address.
    ray_workers : `int`, optional (default = `1`)
        With ``ray_address``: the number of Ray workers, each holding one embedder.
    """

    input_path: str
    output_path: str
    num_sentences: Optional[int] = None
    output_format: str = "all"
    batch_size: int = DEFAULT_BATCH_SIZE
    forget_sentences: bool = False
    use_sentence_keys: bool = False
    include_sentence_indices: bool = False
    layout: str = PER_SENTENCE
    float16: bool = False
    sentence_vectors: bool = False
    overwrite: bool = True
    sort_chunk_batches: int = DEFAULT_SORT_CHUNK_BATCHES
    piece_tokens: int = DEFAULT_PIECE_TOKENS
    model: Optional[str] = None
    options_file: Optional[str] = None
    weight_file: Optional[str] = None
    cuda_device: int = -1
    stateful: bool = False
    precision: str = "float32"
    argument_names: ArgumentNames = PYTHON_ARGUMENTS
    ray_address: Optional[str] = None
    ray_workers: int = 1

    @classmethod
    def prepare(
        cls, input_file: Union[PathLike, IO], output_file_path: PathLike, **options
    ) -> "EmbeddingJob":
        """The `checked` job of ``input_file`` (a path, or a file opened from one); ``options``
        are the other fields."""
        return cls(input_path_of(input_file), os.fspath(output_file_path), **options).checked()

    def checked(self) -> "EmbeddingJob":
        """The job with ``num_sentences`` counted, after every check that needs no model (cheap
        ones first); a `ConfigurationError` naming the problem otherwise."""
        check_output_format(self.output_format)
        check_batch_size(self.batch_size)
        if self.include_sentence_indices and self.use_sentence_keys:
            raise ConfigurationError(
                "include_sentence_indices maps each sentence to its line number; with "
                "use_sentence_keys the keys are the sentences themselves, so there is no such map"
            )
        if self.layout not in LAYOUTS:
            raise ConfigurationError(f"layout must be one of {', '.join(LAYOUTS)}; got {self.layout!r}")
        if self.layout == FLAT and (self.use_sentence_keys or self.include_sentence_indices):
            raise ConfigurationError(
                "the flat layout keys sentences by line number and writes its own sentence "
                "index ('sentences'); use_sentence_keys and include_sentence_indices are for the "
                "per-sentence layout"
            )
        if self.ray_address is not None:
            self._check_ray_options()
        elif self.ray_workers != 1:
            raise ConfigurationError("ray_workers is for a Ray job (ray_address, --ray)")
        output_directory = os.path.dirname(os.path.abspath(self.output_path))
        if not os.path.isdir(output_directory):
            raise ConfigurationError(f"the output directory does not exist: {output_directory}")
        if self.ray_address is None and os.path.isdir(self.output_path):
            raise ConfigurationError(f"the output path is a directory: {self.output_path}")
        if input_at(self.output_path, [self.input_path]) is not None:
            raise ConfigurationError(
                f"the output file would replace the input file: {self.output_path}"
            )
        check_is_text_input(self.input_path)
        if not self.overwrite and os.path.lexists(self.output_path):
            raise ExistingOutputError(
                f"{self.output_path} exists; --overwrite replaces it (once the new file is "
                "complete), or choose another output file"
            )
        count = check_sentence_file(self.input_path, use_sentence_keys=self.use_sentence_keys)
        return replace(self, num_sentences=count)

    def _check_ray_options(self) -> None:
        """What a Ray job (a Parquet folder, batches on any worker) cannot do."""
        if not self.ray_address:
            raise ConfigurationError("ray_address must be local, auto or a cluster's address")
        if not isinstance(self.ray_workers, int) or self.ray_workers < 1:
            raise ConfigurationError(f"ray_workers must be a positive integer, got {self.ray_workers!r}")
        unsupported = [
            (self.stateful, "stateful (each worker embeds its batches alone)"),
            (self.layout != PER_SENTENCE, "layout (the output is Parquet, one row per sentence)"),
            (self.use_sentence_keys, "use_sentence_keys (rows carry sentence_index and tokens)"),
            (self.include_sentence_indices, "include_sentence_indices (rows carry tokens)"),
            (self.forget_sentences, "forget_sentences (rows carry tokens)"),
        ]
        for given, what in unsupported:
            if given:
                raise ConfigurationError(f"a Ray job takes no {what}")
        if os.path.lexists(self.output_path) and not os.path.isdir(self.output_path):
            raise ConfigurationError(
                f"the output of a Ray job is a folder, and {self.output_path} is a file"
            )

    def index_datasets(self) -> List[str]:
        """The names under which the per-sentence layout's sentence-to-key JSON is written (with
        ``use_sentence_keys`` it would map every sentence to itself)."""
        if self.layout == FLAT:
            return []
        names = [] if self.forget_sentences or self.use_sentence_keys else [SENTENCE_TO_INDEX]
        return names + ([SENTENCE_INDICES] if self.include_sentence_indices else [])

    def batches(self, lines: Iterable[Line]) -> Iterator[List[Line]]:
        """The batches in which this job embeds ``lines`` (`line_batches`)."""
        return line_batches(lines, self.batch_size, self.sort_chunk_batches, self.stateful)

    def output_rows(self, num_sentences: int, num_tokens: int) -> int:
        """The flat layout's rows of ``num_sentences`` lines of ``num_tokens`` tokens."""
        return num_sentences if self.sentence_vectors else num_tokens

    @property
    def chunk_lines(self) -> int:
        """The lines a stateless run sorts by length together (`line_batches`)."""
        return self.batch_size * self.sort_chunk_batches
