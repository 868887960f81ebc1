"""
`EmbeddingsFile`: sentence i's vectors from an ``allennlp elmo`` output of either layout, written
by one process or assembled from shards (docs/embedding.md). HDF5 reads a region whose shard is
missing or truncated as NaN without an error, so opening a sharded output checks its shards.
"""
import json
import os
from typing import Dict, List, Optional, Union

import h5py
import numpy as np
from allennlp.common.checks import ConfigurationError

from elmo_plugin.common.paths import PathLike
from elmo_plugin.embedding_output.layout import (
    FLAT,
    FORMAT_ATTRIBUTE,
    LAYER_DATASETS_ATTRIBUTE,
    LAYOUT_ATTRIBUTE,
    NUM_SENTENCES_ATTRIBUTE,
    OFFSETS,
    PER_SENTENCE,
    SENTENCE_INDICES,
    SENTENCE_TO_INDEX,
    SENTENCE_VECTORS_ATTRIBUTE,
    SENTENCES,
    FlatReader,
)

# The root attribute of an assembled output: JSON list of [shard path relative to the output's
# directory, size in bytes], written by `elmo_plugin.embedding_output.assembly`.
SHARDS_ATTRIBUTE = "elmo_shards"

# The per-sentence layout's JSON maps: not sentences.
_INDEX_DATASETS = (SENTENCE_TO_INDEX, SENTENCE_INDICES)


class MissingShardError(ConfigurationError):
    """A shard of an assembled output is missing or not the file it was (reading it would give
    NaN); the message names the output and the shard, and says what to do."""


def _text(value: Union[str, bytes]) -> str:
    return value.decode("utf-8") if isinstance(value, bytes) else value


def check_listed_shards(path: str, file: h5py.File) -> None:
    """Checks that the shards an assembled output lists (`SHARDS_ATTRIBUTE`) exist with the size
    they had at assembly."""
    directory = os.path.dirname(os.path.abspath(path))
    for relative, size in json.loads(_text(file.attrs.get(SHARDS_ATTRIBUTE, "[]"))):
        shard = os.path.join(directory, relative)
        if not os.path.isfile(shard):
            raise MissingShardError(
                f"{path}: its shard {shard} is missing; the vectors stored there cannot be read "
                "(HDF5 would return NaN). Restore the shard or rerun the command that wrote "
                f"{path} with --overwrite, which recomputes only what is missing"
            )
        actual = os.path.getsize(shard)
        if actual != size:
            raise MissingShardError(
                f"{path}: its shard {shard} has {actual} bytes, not the {size} it had when "
                f"{path} was assembled (truncated or replaced); rerun the command that wrote "
                f"{path} with --overwrite"
            )


def check_virtual_sources(path: str, dataset: h5py.Dataset) -> None:
    """For a virtual dataset, that every source file exists (relative names are relative to the
    directory of ``path``, as HDF5 resolves them)."""
    directory = os.path.dirname(os.path.abspath(path))
    for source in dataset.virtual_sources() if dataset.is_virtual else []:
        shard = os.path.join(directory, source.file_name)
        if source.file_name != "." and not os.path.isfile(shard):  # "." is a source in this file
            raise MissingShardError(
                f"{path}: dataset {dataset.name} reads from {shard}, which is missing (HDF5 "
                "would return NaN); restore it or rerun the command that wrote the file with "
                "--overwrite"
            )


class EmbeddingsFile(FlatReader):
    """
    Read access to an ``allennlp elmo`` output file: see the module documentation.

    # Parameters

    path : `PathLike`
        The HDF5 file. Opening it checks its shards, if it has any.
    """

    def __init__(self, path: PathLike) -> None:
        self.path = os.fspath(path)
        if not os.path.isfile(self.path):
            raise ConfigurationError(f"{self.path}: no such file")
        self._file = h5py.File(self.path, "r")
        try:
            check_listed_shards(self.path, self._file)
            attributes = self._file.attrs
            self.layout = _text(attributes.get(LAYOUT_ATTRIBUTE, PER_SENTENCE))
            output_format = attributes.get(FORMAT_ATTRIBUTE)
            self.output_format: Optional[str] = None if output_format is None else _text(output_format)
            self.sentence_vectors = bool(attributes.get(SENTENCE_VECTORS_ATTRIBUTE, 0))
            if self.layout == FLAT:
                names = json.loads(_text(attributes[LAYER_DATASETS_ATTRIBUTE]))
                self._layers = [self._file[name] for name in names]
                for dataset in self._layers:
                    check_virtual_sources(self.path, dataset)
                self._offsets = self._file[OFFSETS]
                self._num_sentences = len(self._offsets) - 1
            else:
                count = attributes.get(NUM_SENTENCES_ATTRIBUTE)
                if count is None:
                    count = sum(1 for key in self._file.keys() if key not in _INDEX_DATASETS)
                self._num_sentences = int(count)
        except BaseException:
            self._file.close()
            raise

    def close(self) -> None:
        self._file.close()

    def _line(self, index: int) -> np.ndarray:
        if self.layout == FLAT:
            return super()._line(index)
        key = str(index)
        if key not in self._file:
            raise KeyError(
                f"{self.path} has no dataset {key!r} (written with --use-sentence-keys? then use "
                "by_sentence)"
            )
        return self._read(self._file[key])

    def _read(self, dataset: h5py.Dataset) -> np.ndarray:
        check_virtual_sources(self.path, dataset)
        return dataset[()]

    def sentences(self) -> List[str]:
        """The text of every line, in order (per-sentence layout: ``""`` for the earlier lines of a
        repeated sentence, which ``sentence_to_index`` maps to its last line only)."""
        if self.layout == FLAT:
            return [_text(value) for value in self._sentence_index()[()]]
        texts = [""] * self._num_sentences
        for text, key in self._sentence_to_index().items():
            texts[int(key)] = text
        return texts

    def _sentence_index(self) -> h5py.Dataset:
        for name in [SENTENCES] if self.layout == FLAT else _INDEX_DATASETS:
            if name in self._file:
                return self._file[name]
        raise ConfigurationError(f"{self.path} has no sentence index (written with --forget-sentences)")

    def _sentence_to_index(self) -> Dict[str, str]:
        return json.loads(_text(self._sentence_index()[0]))

    def by_sentence(self, text: str) -> np.ndarray:
        """The vectors of a sentence given by its text (tokens joined by single spaces): the
        dataset of that name (``--use-sentence-keys``), else the (last) line the index maps it to."""
        if self.layout == FLAT:
            return super().by_sentence(text)
        if text in self._file and text not in _INDEX_DATASETS:
            return self._read(self._file[text])
        key = self._sentence_to_index().get(text)
        if key is None:
            raise KeyError(f"{self.path}: no sentence {text!r}")
        return self._read(self._file[key])


def read_embeddings(path: PathLike, index: int) -> np.ndarray:
    """
    Line ``index``'s vectors from an ``allennlp elmo`` output (opens and checks it each call; use
    `EmbeddingsFile` to read many).

    # Parameters

    path : `PathLike`
        The HDF5 output file of either layout, or the Parquet folder of ``allennlp elmo --ray``.
    index : `int`
        The 0-based line of the input file.
    """
    if os.path.isdir(path):
        # Imported here: the Parquet reader is the Ray engine's sibling, and needs pyarrow.
        from elmo_plugin.embedding_output.parquet_reader import ParquetEmbeddings

        with ParquetEmbeddings(path) as parquet:
            return parquet[index]
    with EmbeddingsFile(path) as embeddings:
        return embeddings[index]
