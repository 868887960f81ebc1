"""
The two layouts of ``allennlp elmo``'s HDF5 output (docs/embedding.md): ``per-sentence``
(AllenNLP 0.9's, one dataset per line) and ``flat`` (per output layer one ``(total_tokens, dim)``
dataset, ``offsets`` and ``sentences``), and the root attributes that say which one a file has
(none: per-sentence).
"""
import json
from typing import Dict, List, Optional, Sequence

import h5py
import numpy as np
import torch

PER_SENTENCE = "per-sentence"
FLAT = "flat"
LAYOUTS = (PER_SENTENCE, FLAT)

OFFSETS = "offsets"
SENTENCES = "sentences"

# The per-sentence layout's JSON map of each sentence to its key (AllenNLP 0.9's name), and
# AllenNLP 0.8's name for it, written with ``--include-sentence-indices``.
SENTENCE_TO_INDEX = "sentence_to_index"
SENTENCE_INDICES = "sentence_indices"

LAYOUT_ATTRIBUTE = "elmo_layout"
FORMAT_ATTRIBUTE = "elmo_output_format"
LAYER_DATASETS_ATTRIBUTE = "elmo_layer_datasets"
NUM_SENTENCES_ATTRIBUTE = "elmo_num_sentences"
SENTENCE_VECTORS_ATTRIBUTE = "elmo_sentence_vectors"


def flat_dataset_names(output_format: str, num_layers: int) -> List[str]:
    """The flat layout's embedding datasets for an output format (``all``, ``top``, ``average``)."""
    if output_format == "all":
        return [f"layer_{index}" for index in range(num_layers)]
    return [output_format]


def mark_flat_file(
    out: h5py.Group, output_format: str, dataset_names: Sequence[str], num_sentences: int
) -> None:
    """The root attributes by which readers recognise a flat file written by one process."""
    out.attrs[LAYOUT_ATTRIBUTE] = FLAT
    out.attrs[FORMAT_ATTRIBUTE] = output_format
    out.attrs[LAYER_DATASETS_ATTRIBUTE] = json.dumps(list(dataset_names))
    out.attrs[NUM_SENTENCES_ATTRIBUTE] = num_sentences


def mark_sentence_vectors(out: h5py.Group, sentence_vectors: bool) -> None:
    """The root attribute of a file of sentence vectors (token outputs have none)."""
    if sentence_vectors:
        out.attrs[SENTENCE_VECTORS_ATTRIBUTE] = 1


def storage_dtype(float16: bool) -> np.dtype:
    """float32, or float16 with ``--float16`` (about 3 significant digits: ample for features)."""
    return np.dtype(np.float16 if float16 else np.float32)


def to_storage(array: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """``array`` in the stored type; float32 -> float16 through torch's faster conversion, which
    rounds as numpy's does (docs/implementation.md, "The fast paths, measured")."""
    if array.dtype == dtype:
        return array
    if dtype == np.float16 and array.dtype == np.float32:
        return torch.from_numpy(np.ascontiguousarray(array)).to(torch.float16).numpy()
    return array.astype(dtype)


class FlatReader:
    """What `reader.EmbeddingsFile` and `parquet_reader.ParquetEmbeddings` share: line i's rows
    are ``_offsets[i]`` to ``_offsets[i + 1]`` of each array of ``_layers`` (one per output layer),
    read as one array (stacked when there are several)."""

    path: str
    sentence_vectors: bool
    _num_sentences: int
    _layers: Sequence = ()
    _offsets: Sequence = ()
    _by_text: Optional[Dict[str, int]] = None

    def __enter__(self):
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()

    def close(self) -> None:
        """Nothing is held open."""

    def __len__(self) -> int:
        return self._num_sentences

    def __getitem__(self, index: int) -> np.ndarray:
        """Line ``index``'s vectors (0-based; negative counts from the end)."""
        if not isinstance(index, (int, np.integer)):
            raise TypeError(f"sentences are indexed by line number; got {index!r}")
        if index < 0:
            index += self._num_sentences
        if not 0 <= index < self._num_sentences:
            raise IndexError(f"{self.path} has {self._num_sentences} sentences; no index {index}")
        return self._line(int(index))

    def _line(self, index: int) -> np.ndarray:
        start, end = (int(value) for value in self._offsets[index : index + 2])
        # A sentence vector is one row a line: the line's vector, without a token axis.
        arrays = [layer[start] if self.sentence_vectors else layer[start:end] for layer in self._layers]
        return np.stack(arrays) if len(arrays) > 1 else arrays[0]

    def sentences(self) -> List[str]:
        raise NotImplementedError

    def by_sentence(self, text: str) -> np.ndarray:
        """The vectors of a sentence given by its text (with duplicates, the last such line)."""
        if self._by_text is None:
            self._by_text = {sentence: index for index, sentence in enumerate(self.sentences())}
        if text not in self._by_text:
            raise KeyError(f"{self.path}: no sentence {text!r}")
        return self[self._by_text[text]]
