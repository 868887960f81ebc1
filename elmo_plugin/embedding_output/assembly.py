"""
The output of a sharded run, assembled from its checked shard files with HDF5 virtual datasets
(no vector is copied); it lists its shards (`reader.SHARDS_ATTRIBUTE`) relative to its directory,
so the two can be moved together.
"""
import json
import os
from typing import List, Sequence, Tuple

import h5py
import numpy as np
from allennlp.common.util import lazy_groups_of

from elmo_plugin.common.atomic_output import atomic_output
from elmo_plugin.common.write_errors import hdf5_for_writing
from elmo_plugin.data.sentence_file import read_sentences, sentence_text
from elmo_plugin.embedding_output.layout import (
    FLAT,
    FORMAT_ATTRIBUTE,
    NUM_SENTENCES_ATTRIBUTE,
    OFFSETS,
    SENTENCES,
    mark_flat_file,
    mark_sentence_vectors,
    storage_dtype,
)
from elmo_plugin.embedding_output.per_sentence_writer import SentenceIndex
from elmo_plugin.embedding_output.plan import Plan, read_piece
from elmo_plugin.embedding_output.reader import SHARDS_ATTRIBUTE
from elmo_plugin.embedding_output.shard_file import ShardFiles

# Sentences written to the flat layout's index per append.
_SENTENCE_BLOCK = 65536


def assemble_output(shards: ShardFiles, plan: Plan) -> None:
    """Writes the output of ``shards.job`` (atomically: it appears only complete) from the
    checked ``shards`` of ``plan``."""
    job = shards.job
    output_directory = os.path.dirname(os.path.abspath(job.output_path))
    relative_paths = [os.path.relpath(shards.path(piece), output_directory) for piece in plan.pieces]
    with atomic_output(job.output_path) as temporary, hdf5_for_writing(temporary) as output:
        out = output.file
        if job.layout == FLAT:
            _assemble_flat(out, shards, plan, relative_paths)
            mark_flat_file(out, job.output_format, shards.dataset_names, plan.num_sentences)
        else:
            _assemble_per_sentence(out, shards, plan, relative_paths)
            out.attrs[FORMAT_ATTRIBUTE] = job.output_format
            out.attrs[NUM_SENTENCES_ATTRIBUTE] = plan.num_sentences
        sizes = [os.path.getsize(shards.path(piece)) for piece in plan.pieces]
        out.attrs[SHARDS_ATTRIBUTE] = json.dumps(list(zip(relative_paths, sizes)))
        mark_sentence_vectors(out, job.sentence_vectors)
        output.check()


def _assemble_flat(out: h5py.File, shards: ShardFiles, plan: Plan, relative_paths: Sequence[str]) -> None:
    # The offsets are the shards' own plus the rows before each line: a real dataset (8 bytes a
    # line), written chunk by chunk; the rows are mapped from the shards run by run.
    job, dim, dtype = shards.job, shards.dim, storage_dtype(shards.job.float16)
    offsets = out.create_dataset(OFFSETS, shape=(plan.num_sentences + 1,), dtype=np.int64)
    offsets[0] = 0
    runs = _flat_runs(shards, plan, relative_paths, offsets)
    total_rows = job.output_rows(plan.num_sentences, plan.num_tokens)
    for name in shards.dataset_names:
        layout = h5py.VirtualLayout(shape=(total_rows, dim), dtype=dtype)
        for row, rows, relative, shard_row, shard_rows in runs:
            source = h5py.VirtualSource(relative, name, shape=(shard_rows, dim))
            if rows != shard_rows:
                source = source[shard_row : shard_row + rows]
            layout[row : row + rows] = source
        out.create_virtual_dataset(name, layout, fillvalue=np.nan)
    if not job.forget_sentences:
        sentences = out.create_dataset(
            SENTENCES, shape=(plan.num_sentences,), dtype=h5py.string_dtype()
        )
        texts = (sentence_text(tokens) for _, tokens in read_sentences(job.input_path))
        start = 0
        for block in lazy_groups_of(texts, _SENTENCE_BLOCK):
            sentences[start : start + len(block)] = block
            start += len(block)


def _flat_runs(
    shards: ShardFiles, plan: Plan, relative_paths: Sequence[str], offsets: h5py.Dataset
) -> List[Tuple[int, int, str, int, int]]:
    """
    Writes the output's ``offsets`` and returns its rows as runs of consecutive lines that one
    shard holds: (output row, rows, shard, shard row, the shard's rows). A piece of whole
    chunks is one run; pieces cut inside a chunk share its lines, in turns.
    """
    runs: List[Tuple[int, int, str, int, int]] = []
    row = 0
    pieces = list(zip(plan.pieces, relative_paths))
    while pieces:
        # The pieces that share lines with the first: together they hold whole chunks.
        sharing = [pieces.pop(0)]
        while pieces and pieces[0][0].first_line < sharing[-1][0].end_line:
            sharing.append(pieces.pop(0))
        first_line, end_line = sharing[0][0].first_line, sharing[-1][0].end_line
        lengths, holder, shard_rows = np.zeros((3, end_line - first_line), dtype=np.int64)
        for index, (piece, _) in enumerate(sharing):
            with h5py.File(shards.path(piece), "r") as shard:
                local = shard[OFFSETS][()]
            lines = np.asarray(piece.lines(), dtype=np.int64) - first_line
            lengths[lines] = np.diff(local)
            holder[lines] = index
            shard_rows[lines] = local[:-1]
        ends = row + np.cumsum(lengths)
        offsets[first_line + 1 : end_line + 1] = ends
        bounds = [0, *(np.flatnonzero(np.diff(holder)) + 1).tolist(), len(holder)]
        for first, end in zip(bounds[:-1], bounds[1:]):
            piece, relative = sharing[int(holder[first])]
            start = int(ends[first] - lengths[first])
            rows = int(ends[end - 1]) - start
            if rows:
                piece_rows = shards.job.output_rows(piece.num_sentences, piece.num_tokens)
                runs.append((start, rows, relative, int(shard_rows[first]), piece_rows))
        row = int(ends[-1])
    return runs


def _assemble_per_sentence(out: h5py.File, shards: ShardFiles, plan: Plan, relative_paths: Sequence[str]) -> None:
    job, dtype = shards.job, storage_dtype(shards.job.float16)
    index_datasets = job.index_datasets()
    sentence_index = SentenceIndex() if index_datasets else None
    for piece, relative in zip(plan.pieces, relative_paths):
        with h5py.File(shards.path(piece), "r") as shard:
            for line_index, tokens in read_piece(job.input_path, piece):
                text = sentence_text(tokens)
                key = str(line_index)
                shape = shard[key].shape
                layout = h5py.VirtualLayout(shape=shape, dtype=dtype)
                layout[...] = h5py.VirtualSource(relative, key, shape=shape)
                name = text if job.use_sentence_keys else key
                out.create_virtual_dataset(name, layout, fillvalue=np.nan)
                if sentence_index is not None:
                    sentence_index.add(line_index, text)
    if sentence_index is not None:
        sentence_index.write(out, index_datasets)
