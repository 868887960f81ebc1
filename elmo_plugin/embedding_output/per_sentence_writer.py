"""
`PerSentenceWriter`: the per-sentence layout's datasets (see `layout`), one per line, in any
order.
"""
import h5py
import numpy as np

from elmo_plugin.embedding_output.layout import to_storage


class PerSentenceWriter:
    """
    Writes each sentence's array as its own dataset of ``file``: keyed by its 0-based line
    number, or by its text with ``use_sentence_keys``. Lines may come in any order (stateless
    runs embed them sorted by length).

    # Parameters

    file : `h5py.File` or `h5py.Group`
        Where the datasets go.
    dtype : `np.dtype`
        The stored type (float32, or float16 with ``--float16``).
    use_sentence_keys : `bool`, optional (default = `False`)
        Key each dataset by its sentence (the caller has checked that the sentences are unique
        and are valid HDF5 names).
    """

    def __init__(self, file: h5py.Group, dtype: np.dtype, use_sentence_keys: bool = False) -> None:
        self._file = file
        self._dtype = dtype
        self._use_sentence_keys = use_sentence_keys
        self.num_sentences = 0

    def add(self, line_index: int, text: str, array: np.ndarray) -> None:
        key = text if self._use_sentence_keys else str(line_index)
        self._file.create_dataset(key, data=to_storage(array, self._dtype))
        self.num_sentences += 1

    def finish(self) -> None:
        """Nothing is buffered: every `add` wrote its dataset."""
