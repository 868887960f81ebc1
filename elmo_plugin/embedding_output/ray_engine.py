"""
An embedding job on a Ray cluster (``allennlp elmo IN OUT.parquet --ray``; docs/embedding.md):
Ray Data reads the input in chunks of lines, `ElmoRayEmbedder` embeds each chunk in the batches
a single process makes of it, and the rows are written as a Parquet dataset with `METADATA_FILE`
beside them. Ray and pyarrow are imported only inside the functions that run a job.
"""
import json
import logging
import os
from dataclasses import replace
from typing import Any, Callable, Dict, List, Sequence

import numpy as np
from allennlp.common.checks import ConfigurationError

from elmo_plugin.common.atomic_output import atomic_directory
from elmo_plugin.common.text_files import decoded_lines
from elmo_plugin.embedding_output.batch_loop import BatchEmbedder, embedded_batches
from elmo_plugin.embedding_output.job import EmbeddingJob
from elmo_plugin.embedding_output.layout import flat_dataset_names, storage_dtype, to_storage
from elmo_plugin.embedding_output.plan import Piece, read_piece

logger = logging.getLogger(__name__)

RAY_LOCAL = "local"

METADATA_FILE = "_elmo_embeddings.json"
SENTENCE_INDEX = "sentence_index"
TOKENS = "tokens"
TEXT = "text"

EmbedderFactory = Callable[[EmbeddingJob], BatchEmbedder]


def input_chunks(job: EmbeddingJob) -> List[Dict[str, int]]:
    """The input cut into chunks of ``job.chunk_lines`` lines (the lines a single process sorts
    by length together): each chunk's first and end line and byte offset, one Ray row each."""
    chunks: List[Dict[str, int]] = []
    position = 0
    for line_index, _, size in decoded_lines(job.input_path):
        if line_index % job.chunk_lines == 0:
            chunks.append({"first_line": line_index, "end_line": line_index, "byte_offset": position})
        position += size
        chunks[-1]["end_line"] = line_index + 1
    return chunks


def chunk_rows(chunk: Dict[str, Any], input_path: str) -> List[Dict[str, Any]]:
    """Ray Data's reader of one chunk (a row of `input_chunks`) of the (checked) input: its
    lines as rows ``sentence_index``, ``text`` (the tokens joined by single spaces)."""
    piece = Piece.of_lines(int(chunk["first_line"]), int(chunk["end_line"]), int(chunk["byte_offset"]), 0)
    return [{SENTENCE_INDEX: index, TEXT: " ".join(tokens)} for index, tokens in read_piece(input_path, piece)]


class ElmoRayEmbedder:
    """
    Embeds batches of sentences on a Ray worker, for ``Dataset.map_batches``: built once per
    worker, then called with each batch, a dict of columns ``text`` (whitespace-tokenized) or
    ``tokens``, and optionally ``sentence_index``; returns a ``pyarrow.Table`` of those and the
    output columns, one row per sentence in order (docs/embedding.md).

    # Parameters

    job : `EmbeddingJob`
        What to compute (``cuda_device`` >= 0: the worker's own GPU); its paths are not used.
    embedder_factory : `Callable[[EmbeddingJob], BatchEmbedder]`
        Builds the worker's embedder from ``job``: `elmo_plugin.ElmoEmbedder.for_job`.
    """

    def __init__(self, job: EmbeddingJob, embedder_factory: EmbedderFactory) -> None:
        if job.stateful:
            raise ConfigurationError("a Ray job embeds statelessly; stateful is not for Ray")
        # Ray gives each worker its own GPU as device 0 (CUDA_VISIBLE_DEVICES).
        self.job = replace(job, cuda_device=0) if job.cuda_device >= 0 else job
        self.embedder = embedder_factory(self.job)
        self.columns = flat_dataset_names(self.job.output_format, self.embedder.num_layers)
        self.dim = self.embedder.get_output_dim()
        self.dtype = storage_dtype(self.job.float16)

    def __call__(self, batch: Dict[str, Any]) -> Any:
        import pyarrow

        if TOKENS in batch:
            sentences = [[str(token) for token in tokens] for tokens in batch[TOKENS]]
        elif TEXT in batch:
            sentences = [str(text).split() for text in batch[TEXT]]
        else:
            raise ConfigurationError(
                f"a batch needs a {TEXT!r} or a {TOKENS!r} column; got {sorted(batch)}"
            )
        arrays: List[np.ndarray] = [np.empty(0)] * len(sentences)
        for part, part_arrays in embedded_batches(self.job, self.embedder, enumerate(sentences)):
            for (position, _), array in zip(part, part_arrays):
                arrays[position] = array
        columns: Dict[str, Any] = {}
        if SENTENCE_INDEX in batch:
            columns[SENTENCE_INDEX] = pyarrow.array(np.asarray(batch[SENTENCE_INDEX], dtype=np.int64))
        columns[TOKENS] = pyarrow.array(sentences, type=pyarrow.list_(pyarrow.string()))
        several = len(self.columns) > 1
        for layer, name in enumerate(self.columns):
            parts = [array[layer] if several else array for array in arrays]
            columns[name] = self._vectors(pyarrow, parts)
        return pyarrow.table(columns)

    def _vectors(self, pyarrow: Any, parts: Sequence[np.ndarray]) -> Any:
        """One sentence's vectors a row: a fixed-size list of ``dim`` numbers (a sentence
        vector), or a list of them (one per token)."""
        dim = self.dim
        flat = np.concatenate(parts) if parts else np.zeros((0, dim), dtype=np.float32)
        values = to_storage(flat.reshape(-1, dim), self.dtype)
        rows = pyarrow.FixedSizeListArray.from_arrays(pyarrow.array(values.ravel()), dim)
        if self.job.sentence_vectors:
            return rows
        offsets = np.cumsum([0] + [part.shape[0] for part in parts], dtype=np.int64)
        return pyarrow.LargeListArray.from_arrays(pyarrow.array(offsets), rows)


def connect(address: str, workers: int) -> None:
    """``ray.init`` for ``--ray ADDRESS``: ``local`` starts a cluster on this machine (a logical
    CPU for each worker and one for reading); ``auto`` or an address joins one."""
    import ray

    quiet = {"log_to_driver": False, "logging_level": logging.WARNING}
    if address == RAY_LOCAL:
        ray.init(num_cpus=max(os.cpu_count() or 1, workers + 1), include_dashboard=False, **quiet)
    else:  # "auto" or a cluster's address
        ray.init(address=address, **quiet)


def run_ray(
    job: EmbeddingJob, embedder_factory: EmbedderFactory, progress: bool = True
) -> int:
    """
    Carries out a `checked <EmbeddingJob.checked>` job on Ray: the Parquet folder takes the name
    ``job.output_path`` only when every input line is in it exactly once. Returns the number of
    sentences written.
    """
    assert job.num_sentences is not None and job.ray_address is not None, "a checked Ray job"
    import pyarrow.parquet
    import ray

    earlier = _earlier_output(job.output_path)
    connect(job.ray_address, job.ray_workers)
    try:
        context = ray.data.DataContext.get_current()
        context.enable_progress_bars = progress
        chunks = input_chunks(job)
        rows = (
            ray.data.from_items(chunks, override_num_blocks=len(chunks))
            .flat_map(chunk_rows, fn_kwargs={"input_path": job.input_path})
            .map_batches(
                ElmoRayEmbedder,
                fn_constructor_kwargs={"job": job, "embedder_factory": embedder_factory},
                batch_size=job.chunk_lines,
                batch_format="numpy",
                concurrency=job.ray_workers,
                num_cpus=1,
                num_gpus=1 if job.cuda_device >= 0 else None,
                # Ray Data's own defaults restart a dead worker and retry its batch (an error
                # raised in Python is not retried: it ends the job).
            )
        )
        logger.info(
            "Embedding %d sentences from %s into %s on Ray (%s, %d workers, output %s)",
            job.num_sentences, job.input_path, job.output_path, job.ray_address,
            job.ray_workers, job.output_format,
        )
        with atomic_directory(job.output_path, earlier) as temporary:
            try:
                rows.write_parquet(temporary)
            except ray.exceptions.RayError as error:
                raise ConfigurationError(
                    f"the Ray job failed: {_last_line(error)}; {job.output_path} was not written"
                ) from None
            written = pyarrow.parquet.ParquetDataset(temporary)
            _check_every_line_once(job, written.read([SENTENCE_INDEX]).column(SENTENCE_INDEX).to_numpy())
            schema = written.schema
            columns = [name for name in schema.names if name not in (SENTENCE_INDEX, TOKENS)]
            metadata = {
                "output_format": job.output_format,
                "columns": columns,
                "dim": _dim_of(schema.field(columns[0]).type),
                "num_sentences": job.num_sentences,
                "sentence_vectors": job.sentence_vectors,
                "float16": job.float16,
            }
            with open(os.path.join(temporary, METADATA_FILE), "w", encoding="utf-8") as handle:
                json.dump(metadata, handle, indent=1)
    finally:
        ray.shutdown()
    logger.info("Wrote the embeddings of %d sentences to %s", job.num_sentences, job.output_path)
    return job.num_sentences


def _earlier_output(path: str) -> List[str]:
    """The files of an earlier ``--ray`` output at ``path`` (which ``overwrite`` may replace);
    a folder without `METADATA_FILE` is no such output, and nothing of it may be replaced."""
    if not os.path.isdir(path) or not os.path.isfile(os.path.join(path, METADATA_FILE)):
        return [METADATA_FILE]
    return [name for name in os.listdir(path) if name.endswith(".parquet")] + [METADATA_FILE]


def _check_every_line_once(job: EmbeddingJob, indices: np.ndarray) -> None:
    assert job.num_sentences is not None
    counts = np.bincount(indices.astype(np.int64), minlength=job.num_sentences)
    if len(counts) != job.num_sentences or not (counts == 1).all():
        missing = int((counts[: job.num_sentences] == 0).sum())
        repeated = int((counts > 1).sum())
        raise ConfigurationError(
            f"the Ray job wrote {len(indices)} rows for the {job.num_sentences} lines of "
            f"{job.input_path} ({missing} missing, {repeated} repeated); {job.output_path} was "
            "not written"
        )


def _dim_of(vector_type: Any) -> int:
    """The width of an output column's type: a fixed-size list, or a list of them."""
    while not hasattr(vector_type, "list_size"):
        vector_type = vector_type.value_type
    return int(vector_type.list_size)


def _last_line(error: BaseException) -> str:
    lines = [line.strip() for line in str(error).strip().splitlines() if line.strip()]
    return lines[-1] if lines else type(error).__name__
