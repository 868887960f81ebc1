"""
`ParquetEmbeddings`: sentence i's vectors from the Parquet folder of ``allennlp elmo --ray``, with
`EmbeddingsFile`'s interface, read into memory when it is opened (pyarrow imported only then).
"""
import json
import os
from typing import List, Optional

import numpy as np
from allennlp.common.checks import ConfigurationError

from elmo_plugin.common.paths import PathLike
from elmo_plugin.embedding_output.layout import FlatReader
from elmo_plugin.embedding_output.ray_engine import METADATA_FILE, SENTENCE_INDEX, TOKENS


class ParquetEmbeddings(FlatReader):
    """
    Read access to an ``allennlp elmo --ray`` output folder: see the module documentation.

    # Parameters

    path : `PathLike`
        The folder (with its ``_elmo_embeddings.json``).
    """

    def __init__(self, path: PathLike) -> None:
        import pyarrow.parquet

        self.path = os.fspath(path)
        metadata_path = os.path.join(self.path, METADATA_FILE)
        if not os.path.isfile(metadata_path):
            raise ConfigurationError(f"{self.path}: not an output of allennlp elmo --ray (no {METADATA_FILE})")
        with open(metadata_path, encoding="utf-8") as handle:
            metadata = json.load(handle)
        self.layout = "parquet"
        self.output_format: Optional[str] = metadata["output_format"]
        self.sentence_vectors = bool(metadata["sentence_vectors"])
        table = pyarrow.parquet.read_table(self.path).sort_by(SENTENCE_INDEX)
        self._num_sentences = table.num_rows
        if self._num_sentences != metadata["num_sentences"]:
            raise ConfigurationError(
                f"{self.path}: {self._num_sentences} rows, but it was written with "
                f"{metadata['num_sentences']} (a Parquet file of the folder is missing or foreign)"
            )
        self._tokens = table.column(TOKENS)
        self._offsets = np.arange(self._num_sentences + 1)  # one row a line: sentence vectors
        self._layers = []
        for name in metadata["columns"]:
            column = table.column(name).combine_chunks()
            if not self.sentence_vectors:
                self._offsets = column.offsets.to_numpy().astype(np.int64)
                column = column.values
            self._layers.append(column.values.to_numpy(zero_copy_only=False).reshape(-1, int(metadata["dim"])))

    def sentences(self) -> List[str]:
        """The text of every line (its tokens joined by single spaces), in order."""
        return [" ".join(tokens) for tokens in self._tokens.to_pylist()]
