"""
The shard files of a sharded run, one a piece (``lines-START-END.FINGERPRINT.hdf5``): each is
written under a temporary name, synced, marked complete last, then renamed, so that a kill at
any moment leaves no file under the name or a complete one. A shard is reused only by a run with
its fingerprint: the same input bytes, model parameters and options that change the vectors.
"""
import contextlib
import hashlib
import json
import os
import socket
from dataclasses import dataclass
from typing import Any, Callable, Dict, Iterator, List, Optional, Sequence

import h5py
import torch
from allennlp.common.checks import ConfigurationError

from elmo_plugin.common.write_errors import Hdf5Output, hdf5_for_writing, is_write_failure
from elmo_plugin.embedding_output.job import EmbeddingJob
from elmo_plugin.embedding_output.layout import FLAT, OFFSETS
from elmo_plugin.embedding_output.plan import Piece

FINGERPRINT_ATTRIBUTE = "elmo_fingerprint"
# Written last, just before the file is closed and renamed.
COMPLETE_ATTRIBUTE = "elmo_complete"
# The piece's start and end (`plan.Piece`): its first and end line, but for a piece cut inside a
# chunk.
FIRST_LINE_ATTRIBUTE = "elmo_first_line"
END_LINE_ATTRIBUTE = "elmo_end_line"

TEMPORARY_SUFFIX = ".tmp"

# Bumped when what a shard holds changes meaning, so that older shards are never reused.
SHARD_FORMAT_VERSION = 1


def model_digest(module: torch.nn.Module) -> str:
    """SHA-256 of a module's parameters and buffers (names, types, shapes and values): the
    model as it computes, however it was named or stored."""
    digest = hashlib.sha256()
    for name, tensor in sorted(module.state_dict().items()):
        data = tensor.detach().cpu().contiguous().reshape(-1)
        digest.update(f"{name}:{data.dtype}:{tuple(data.shape)};".encode())
        digest.update(data.view(torch.uint8).numpy().tobytes() if data.numel() else b"")
    return digest.hexdigest()


def job_fingerprint(input_hash: str, model_hash: str, options: Dict[str, Any]) -> str:
    """The key of a run's shards: the input's hash, the model's digest and ``options`` (those
    that change the vectors)."""
    key = {"version": SHARD_FORMAT_VERSION, "input": input_hash, "model": model_hash, "options": options}
    return hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()


def _fsync(path: str, directory: bool = False) -> None:
    descriptor = os.open(path, os.O_RDONLY | (os.O_DIRECTORY if directory else 0))
    try:
        os.fsync(descriptor)
    finally:
        os.close(descriptor)


@dataclass(frozen=True)
class ShardFiles:
    """The shard files of one run of ``job``: in ``directory``, named with the run's
    ``fingerprint``, holding ``dataset_names`` (flat layout) of ``dim`` numbers a row."""

    directory: str
    fingerprint: str
    job: EmbeddingJob
    dataset_names: List[str]
    dim: int

    def path(self, piece: Piece) -> str:
        return os.path.join(self.directory, piece.shard_name(self.fingerprint))

    def write(self, piece: Piece, fill: Callable[[Hdf5Output], None]) -> None:
        """Writes the shard of ``piece`` (``fill`` writes the datasets into the open file); a
        failed write becomes one `ConfigurationError` naming the shard."""
        path = self.path(piece)
        temporary = os.path.join(
            self.directory,
            f".{os.path.basename(path)}.{socket.gethostname()}.{os.getpid()}{TEMPORARY_SUFFIX}",
        )
        try:
            with hdf5_for_writing(temporary) as output:
                fill(output)
                attributes = output.file.attrs
                attributes[FINGERPRINT_ATTRIBUTE] = self.fingerprint
                attributes[FIRST_LINE_ATTRIBUTE] = piece.start
                attributes[END_LINE_ATTRIBUTE] = piece.end
                attributes[COMPLETE_ATTRIBUTE] = 1
            _fsync(temporary)
            os.replace(temporary, path)
            _fsync(self.directory, directory=True)
        except BaseException as error:
            with contextlib.suppress(OSError):
                os.remove(temporary)
            if is_write_failure(error):
                raise ConfigurationError(
                    f"cannot write the shard {path}: {error.strerror} (its partial file was "
                    "removed; the shards already finished are kept: make room and run the same "
                    "command again to resume)"
                ) from None
            raise

    def problem(self, piece: Piece) -> Optional[str]:
        """Why the shard of ``piece`` is not the finished piece of this run (complete, with the
        fingerprint and the expected shapes), or ``None`` if it is."""
        path, dim = self.path(piece), self.dim
        expected_rows = self.job.output_rows(piece.num_sentences, piece.num_tokens)
        if not os.path.isfile(path):
            return "it is missing"
        try:
            with h5py.File(path, "r") as shard:
                attributes = shard.attrs
                if attributes.get(COMPLETE_ATTRIBUTE) != 1:
                    return "it has no completion mark"
                if attributes.get(FINGERPRINT_ATTRIBUTE) != self.fingerprint:
                    return "it was written for another input, model or options"
                lines = (attributes.get(FIRST_LINE_ATTRIBUTE), attributes.get(END_LINE_ATTRIBUTE))
                if lines != (piece.start, piece.end):
                    return "it holds other lines"
                if self.job.layout == FLAT:
                    for name in self.dataset_names:
                        if name not in shard or shard[name].shape != (expected_rows, dim):
                            return f"its dataset {name!r} is missing or not ({expected_rows}, {dim})"
                    offsets = shard[OFFSETS]
                    rows = int(offsets[-1]) if len(offsets) else -1
                    if offsets.shape != (piece.num_sentences + 1,) or rows != expected_rows:
                        return "its offsets do not match the lines"
                    return None
                rows = 0
                for line in piece.lines():
                    dataset = shard.get(str(line))
                    if dataset is None or dataset.shape[-1] != dim:
                        return f"its dataset for line {line} is missing or has the wrong width"
                    rows += 1 if self.job.sentence_vectors else dataset.shape[-2]
                if rows != expected_rows or len(shard) != piece.num_sentences:
                    return "its datasets do not match the lines"
        except OSError as error:  # not an HDF5 file, truncated ...
            return f"it cannot be read ({error})"
        return None

    def check(self, pieces: Sequence[Piece]) -> None:
        """A `ConfigurationError` naming the first shard of ``pieces`` that is not as it must be."""
        for piece in pieces:
            problem = self.problem(piece)
            if problem is not None:
                raise ConfigurationError(
                    f"the shard {self.path(piece)} ({piece.describe()}) cannot be used: {problem}; "
                    "the output was not written. Run the same command again to recompute it"
                )

    def stale_files(self, pieces: Sequence[Piece]) -> Iterator[str]:
        """The files of ``directory`` but the shards of ``pieces``: earlier runs' shards, and the
        temporary and heartbeat files. Only for the end of a successful run."""
        kept = {piece.shard_name(self.fingerprint) for piece in pieces}
        for name in os.listdir(self.directory):
            is_shard = name.startswith("lines-") and name.endswith(".hdf5")
            is_temporary = name.startswith(".lines-") and name.endswith(TEMPORARY_SUFFIX)
            is_heartbeat = name.startswith(".rank-")
            if (is_shard and name not in kept) or is_temporary or is_heartbeat:
                yield os.path.join(self.directory, name)
