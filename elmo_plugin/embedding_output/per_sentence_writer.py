"""
`PerSentenceWriter`: the per-sentence layout's datasets, one per line; `SentenceIndex`: its map of
sentences to keys.
"""
import json
from typing import Dict, Sequence, Tuple

import h5py
import numpy as np

from elmo_plugin.embedding_output.layout import to_storage


class PerSentenceWriter:
    """
    Writes each sentence's array, in any order, as its own dataset of ``file``, keyed by its
    0-based line number, or by its text with ``use_sentence_keys`` (sentences the caller checked
    are unique and valid HDF5 names); ``dtype`` is the stored type.
    """

    def __init__(self, file: h5py.Group, dtype: np.dtype, use_sentence_keys: bool = False) -> None:
        self._file = file
        self._dtype = dtype
        self._use_sentence_keys = use_sentence_keys

    def add(self, line_index: int, text: str, array: np.ndarray) -> None:
        key = text if self._use_sentence_keys else str(line_index)
        self._file.create_dataset(key, data=to_storage(array, self._dtype))

    def finish(self) -> None:
        """Nothing is buffered."""


class SentenceIndex:
    """
    The per-sentence layout's map of each sentence to its key, a JSON string under each of
    `EmbeddingJob.index_datasets`: the sentences in order of first appearance, each mapped to its
    last line, as AllenNLP 0.9's dict filled in file order was, whatever order lines come in.
    """

    def __init__(self) -> None:
        self._lines: Dict[str, Tuple[int, int]] = {}

    def add(self, line_index: int, text: str) -> None:
        first, last = self._lines.get(text, (line_index, line_index))
        self._lines[text] = (min(first, line_index), max(last, line_index))

    def write(self, file: h5py.Group, names: Sequence[str]) -> None:
        in_file_order = sorted(self._lines.items(), key=lambda item: item[1][0])
        sentence_to_index = {text: str(last) for text, (_, last) in in_file_order}
        for name in names:
            dataset = file.create_dataset(name, (1,), dtype=h5py.special_dtype(vlen=str))
            dataset[0] = json.dumps(sentence_to_index)
