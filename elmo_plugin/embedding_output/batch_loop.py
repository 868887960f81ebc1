"""
The one loop that writes a job's embedded batches (`write_batches`), and a whole job run by one
process (`write_embeddings`). The embedder comes in as a value (`BatchEmbedder`).
"""
import logging
from typing import Any, Callable, Iterable, Iterator, List, Optional, Protocol, Sequence, Tuple, Union

import h5py
import numpy as np
import torch
from allennlp.common.tqdm import Tqdm

from elmo_plugin.common.atomic_output import atomic_output
from elmo_plugin.common.memory import release_freed_memory
from elmo_plugin.common.termination import raise_if_interrupted
from elmo_plugin.common.write_errors import Hdf5Output, hdf5_for_writing
from elmo_plugin.data.sentence_file import read_sentences, sentence_text
from elmo_plugin.embedding_output.batching import Line
from elmo_plugin.embedding_output.flat_writer import FlatWriter
from elmo_plugin.embedding_output.job import EmbeddingJob
from elmo_plugin.embedding_output.layout import (
    FLAT,
    flat_dataset_names,
    mark_flat_file,
    mark_sentence_vectors,
    storage_dtype,
)
from elmo_plugin.embedding_output.per_sentence_writer import PerSentenceWriter, SentenceIndex
from elmo_plugin.embedding_output.sentence_vectors import token_mean

logger = logging.getLogger(__name__)


class BatchEmbedder(Protocol):
    """What a job needs of the model that computes its vectors."""

    elmo_bilm: torch.nn.Module  # its parameters key a sharded run's shards
    device: torch.device
    precision: str  # what the biLM computes in, as decided for its device
    stateful: bool
    num_layers: int

    def get_output_dim(self) -> int: ...

    def embed_arrays(self, batch: Sequence[Sequence[str]], output_format: str) -> List[np.ndarray]:
        """One float32 array per sentence of ``batch`` (`elmo_plugin.ElmoEmbedder.embed_arrays`)."""


Writer = Union[FlatWriter, PerSentenceWriter]


def layout_writer(
    file: h5py.Group,
    job: EmbeddingJob,
    embedder: BatchEmbedder,
    lines: Optional[Iterable[int]] = None,
    shard: bool = False,
) -> Writer:
    """The writer of ``job``'s layout into ``file``, of ``lines`` (default: all); a ``shard``
    keys datasets by line number and writes no ``sentences`` (assembly takes them from the input)."""
    dtype = storage_dtype(job.float16)
    if job.layout == FLAT:
        write_sentences = not (shard or job.forget_sentences)
        names = flat_dataset_names(job.output_format, embedder.num_layers)
        return FlatWriter(
            file, names, embedder.get_output_dim(), dtype, lines, write_sentences, sentence_vectors=job.sentence_vectors
        )
    return PerSentenceWriter(file, dtype, job.use_sentence_keys and not shard)


# A batch of lines and their arrays, in the same order.
EmbeddedBatch = Tuple[List[Line], List[np.ndarray]]


def embedded_batches(
    job: EmbeddingJob, embedder: BatchEmbedder, lines: Iterable[Line]
) -> Iterator[EmbeddedBatch]:
    """``job``'s batches of ``lines``, each with the arrays ``job`` stores for its sentences:
    their token vectors in its output format, or their mean (`token_mean`) with
    ``sentence_vectors``, computed here by ``embedder``."""
    for batch in job.batches(lines):
        release_freed_memory()  # keeps memory flat however long the input is
        arrays = embedder.embed_arrays([tokens for _, tokens in batch], job.output_format)
        yield batch, [token_mean(array) for array in arrays] if job.sentence_vectors else arrays


def write_batches(
    output: Hdf5Output,
    writer: Writer,
    batches: Iterable[EmbeddedBatch],
    after_batch: Callable[[int], None],
    sentence_index: Optional[SentenceIndex] = None,
) -> None:
    """Writes each sentence's array to ``writer`` (and its text to ``sentence_index``), calling
    ``after_batch(number of sentences)`` after every batch; stops at the first failed write of
    ``output`` and at a swallowed Ctrl-C or SIGTERM."""
    for batch, arrays in batches:
        for (line_index, tokens), array in zip(batch, arrays):
            text = sentence_text(tokens)
            writer.add(line_index, text, array)
            if sentence_index is not None:
                sentence_index.add(line_index, text)
        after_batch(len(batch))
        output.check()
        raise_if_interrupted()
    writer.finish()


def sentence_progress(total: int, shown: bool) -> Any:
    return Tqdm.tqdm(total=total, disable=not shown, unit=" sentences", desc="elmo")


def write_embeddings(job: EmbeddingJob, embedder: BatchEmbedder, progress: bool = True) -> None:
    """Carries out a `checked <EmbeddingJob.checked>` job in this process, under a temporary
    name that becomes ``job.output_path`` only when complete."""
    assert job.num_sentences is not None, "write_embeddings needs a checked job"
    logger.info(
        "Embedding %d sentences from %s into %s (output %s, batches of %d, %s, %s)",
        job.num_sentences, job.input_path, job.output_path, job.output_format, job.batch_size,
        "stateful" if embedder.stateful else "stateless", embedder.device,
    )
    index_datasets = job.index_datasets()
    sentence_index = SentenceIndex() if index_datasets else None
    # hdf5_for_writing: a full disk or a file-size limit becomes one OSError (which
    # atomic_output reports), not HDF5 errors and a crash.
    with atomic_output(job.output_path) as temporary, hdf5_for_writing(temporary) as output:
        with sentence_progress(job.num_sentences, progress) as progress_bar:
            writer = layout_writer(output.file, job, embedder)
            batches = embedded_batches(job, embedder, read_sentences(job.input_path))
            write_batches(output, writer, batches, progress_bar.update, sentence_index)
            if job.layout == FLAT:
                names = flat_dataset_names(job.output_format, embedder.num_layers)
                mark_flat_file(output.file, job.output_format, names, job.num_sentences)
            mark_sentence_vectors(output.file, job.sentence_vectors)
            if sentence_index is not None:
                sentence_index.write(output.file, index_datasets)
    logger.info("Wrote the embeddings of %d sentences to %s", job.num_sentences, job.output_path)
