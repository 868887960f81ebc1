"""
`FlatWriter`: the flat layout (see `layout`): per output layer one ``(total_tokens, dim)``
dataset, ``offsets`` and ``sentences``, written in large appends.
"""
import itertools
from typing import Dict, Iterable, List, Optional, Sequence, Tuple

import h5py
import numpy as np

from elmo_plugin.embedding_output.layout import OFFSETS, SENTENCES, to_storage

# Rows buffered before an append: about 64 MB at 1024 float32 dims. Appends this large cost the
# same per row however long the file already is, and the buffer bounds the memory.
DEFAULT_FLUSH_ROWS = 16384

# Target bytes of one HDF5 chunk of an embedding dataset: small enough that reading one sentence
# reads little more than its rows, large enough that the chunk index stays small.
CHUNK_BYTES = 1 << 20


class FlatWriter:
    """
    Appends sentences to the flat layout's datasets ``dataset_names`` (one per output layer; with
    several, each added array is ``(num_layers, num_tokens, dim)``), which it creates in ``file``
    with ``dim`` numbers a row of ``dtype``. Lines may be added in any order; each is written, in
    the order of ``lines`` (default: 0, 1, 2 ...), once all before it have come, in appends of
    ``flush_rows`` rows, its text too with ``write_sentences``. With ``sentence_vectors`` each
    added array is one row.
    """

    def __init__(
        self,
        file: h5py.Group,
        dataset_names: Sequence[str],
        dim: int,
        dtype: np.dtype,
        lines: Optional[Iterable[int]] = None,
        write_sentences: bool = True,
        flush_rows: int = DEFAULT_FLUSH_ROWS,
        sentence_vectors: bool = False,
    ) -> None:
        self._sentence_vectors = sentence_vectors
        self._names = list(dataset_names)
        self._lines = iter(lines) if lines is not None else itertools.count()
        self._next_line = next(self._lines, None)
        self._flush_rows = flush_rows
        self._pending: Dict[int, Tuple[str, np.ndarray]] = {}
        self._buffer: List[np.ndarray] = []
        self._texts: List[str] = []
        self._buffered_rows = 0
        self.num_rows = 0
        self.num_sentences = 0
        chunk_rows = max(1, CHUNK_BYTES // (dim * dtype.itemsize))
        self._datasets = [
            file.create_dataset(
                name, shape=(0, dim), maxshape=(None, dim), dtype=dtype, chunks=(chunk_rows, dim)
            )
            for name in self._names
        ]
        self._offsets = file.create_dataset(
            OFFSETS, data=np.zeros(1, dtype=np.int64), maxshape=(None,), chunks=(65536,)
        )
        self._sentences = None
        if write_sentences:
            self._sentences = file.create_dataset(
                SENTENCES, shape=(0,), maxshape=(None,), dtype=h5py.string_dtype(), chunks=(4096,)
            )

    def add(self, line_index: int, text: str, array: np.ndarray) -> None:
        if self._sentence_vectors:
            array = array[..., np.newaxis, :]  # one row
        self._pending[line_index] = (text, array)
        while self._next_line in self._pending:
            text, array = self._pending.pop(self._next_line)
            self._buffer.append(array)
            self._texts.append(text)
            self._buffered_rows += array.shape[-2]
            self._next_line = next(self._lines, None)
        if self._buffered_rows >= self._flush_rows:
            self._flush()

    def _flush(self) -> None:
        if not self._buffer:
            return
        lengths = np.array([array.shape[-2] for array in self._buffer], dtype=np.int64)
        start, rows = self.num_rows, int(lengths.sum())
        several = len(self._names) > 1
        for layer, dataset in enumerate(self._datasets):
            parts = [array[layer] if several else array for array in self._buffer]
            dataset.resize(start + rows, axis=0)
            # Converted before HDF5 sees it: HDF5's own float32 -> float16 conversion is slow.
            dataset[start : start + rows] = to_storage(np.concatenate(parts, axis=0), dataset.dtype)
        first = self.num_sentences
        self._offsets.resize(first + len(lengths) + 1, axis=0)
        self._offsets[first + 1 :] = start + np.cumsum(lengths)
        if self._sentences is not None:
            self._sentences.resize(first + len(self._texts), axis=0)
            self._sentences[first:] = self._texts
        self.num_rows += rows
        self.num_sentences += len(lengths)
        self._buffer, self._texts, self._buffered_rows = [], [], 0

    def finish(self) -> None:
        """Writes what is buffered. Every line from ``first_line`` on must have been added."""
        if self._pending:
            missing = self._next_line
            raise RuntimeError(f"FlatWriter: line {missing} was never added (internal error)")
        self._flush()
