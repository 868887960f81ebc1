"""
One rank's part of a sharded ``allennlp elmo`` run under ``torchrun`` (docs/embedding.md): rank 0
checks and plans the job (`plan`); each rank embeds its pieces into shard files (`shard_file`);
rank 0 assembles the output from the shards (`assembly`).
"""
import contextlib
import logging
import os
import time
import uuid
from dataclasses import dataclass
from typing import Any, Callable, List, Optional, Tuple

import torch
import torch.distributed as dist
from allennlp.common.checks import ConfigurationError

from elmo_plugin.common.termination import raise_if_interrupted
from elmo_plugin.common.torchrun import TorchrunProcess, join_process_group, leave_process_group
from elmo_plugin.common.write_errors import Hdf5Output
from elmo_plugin.embedding_output.assembly import assemble_output
from elmo_plugin.embedding_output.batch_loop import (
    BatchEmbedder,
    embedded_batches,
    layout_writer,
    sentence_progress,
    write_batches,
)
from elmo_plugin.embedding_output.heartbeats import Heartbeats
from elmo_plugin.embedding_output.job import EmbeddingJob
from elmo_plugin.embedding_output.layout import flat_dataset_names
from elmo_plugin.embedding_output.plan import Piece, Plan, plan_input, read_piece, shards_directory
from elmo_plugin.embedding_output.shard_file import ShardFiles, job_fingerprint, model_digest

logger = logging.getLogger(__name__)


class StoppedWithOtherRank(SystemExit):
    """Ends a rank other than 0 (with status 1) and no message: rank 0 reports the error once."""


# The job's options that change what its shards hold (with the embedder's precision).
_FINGERPRINT_OPTIONS = ("output_format", "layout", "float16", "batch_size", "sort_chunk_batches", "piece_tokens")

# Builds the embedder of a job on a device (`elmo_plugin.ElmoEmbedder.for_job`).
EmbedderFactory = Callable[[EmbeddingJob, torch.device], BatchEmbedder]


@dataclass(frozen=True)
class ShardedResult:
    """What rank 0 reports: sentences in all, how many were reused from an earlier run."""

    num_sentences: int
    reused_sentences: int
    num_ranks: int
    shards_directory: str


def run_sharded(
    process: TorchrunProcess,
    job: EmbeddingJob,
    make_embedder: EmbedderFactory,
    progress: bool = True,
) -> Optional[ShardedResult]:
    """Runs this rank's part of ``job`` (rank 0 checks it) with ``make_embedder(job, this rank's
    device)``. Returns the `ShardedResult` on rank 0, ``None`` elsewhere."""
    device = join_process_group(process, use_gpu=job.cuda_device >= 0)
    try:
        return _ShardedRank(process, device, job, make_embedder, progress).run()
    finally:
        leave_process_group()


@dataclass
class _ShardedRank:
    process: TorchrunProcess
    device: torch.device
    job: EmbeddingJob
    make_embedder: EmbedderFactory
    progress: bool
    heartbeats: Optional[Heartbeats] = None

    @property
    def directory(self) -> str:
        return shards_directory(os.path.abspath(self.job.output_path))

    def run(self) -> Optional[ShardedResult]:
        token: List[Optional[str]] = [uuid.uuid4().hex if self.process.is_first else None]
        dist.broadcast_object_list(token, src=0)
        # Watching each other starts now, before rank 0's possibly long check of the input.
        if os.path.isdir(os.path.dirname(self.directory)):
            os.makedirs(self.directory, exist_ok=True)
            self.heartbeats = Heartbeats(
                self.directory, self.process.rank, self.process.world_size, str(token[0])
            ).start()
        try:
            return self._run()
        except BaseException as error:
            if self.heartbeats is not None:
                self.heartbeats.mark_failed(str(error) or type(error).__name__)
            raise
        finally:
            if self.heartbeats is not None:
                self.heartbeats.stop()

    def _agreed(self, build: Callable[[], Any], first_only: bool) -> Any:
        """``build()`` on rank 0 (``first_only``) or on every rank. Stops every rank if one has a
        `ConfigurationError`: rank 0 raises its own (or the first other rank's), the others stop
        without a message."""
        result, outcome = None, None
        if self.process.is_first or not first_only:
            try:
                result = build()
            except ConfigurationError as error:
                outcome = error
        message = None if outcome is None else str(outcome)
        if first_only:  # only rank 0 has an outcome then
            errors: List[Optional[str]] = [message]
            dist.broadcast_object_list(errors, src=0)
        else:
            errors = [None] * self.process.world_size
            dist.all_gather_object(errors, message)
        failed = [(rank, error) for rank, error in enumerate(errors) if error is not None]
        if not failed:
            return result
        # Every rank knows: no heartbeats are needed any more, and a shards directory that
        # holds nothing else goes too (a mistyped input leaves nothing behind).
        if self.heartbeats is not None:
            self.heartbeats.stop()
            self.heartbeats.remove_own_file()
            with contextlib.suppress(OSError):  # another rank's file is still there, or finished shards
                os.rmdir(self.directory)
            self.heartbeats = None
        if self.process.is_first:
            if outcome is not None:
                raise outcome
            rank, error = failed[0]
            raise ConfigurationError(f"rank {rank}: {error}")
        raise StoppedWithOtherRank(1)

    def _run(self) -> Optional[ShardedResult]:
        shared = [self._agreed(self._prepare, first_only=True)]
        dist.broadcast_object_list(shared, src=0)
        job, plan = shared[0]
        if self.heartbeats is None:
            raise ConfigurationError(
                f"the output directory {os.path.dirname(self.directory)} does not exist on this "
                f"node (rank {self.process.rank}); the output must be on a file system that "
                "every node sees"
            )
        embedder = self._agreed(lambda: self.make_embedder(job, self.device), first_only=False)
        options = {name: getattr(job, name) for name in _FINGERPRINT_OPTIONS}
        options["precision"] = embedder.precision
        if job.sentence_vectors:  # only then: token outputs keep their shards' names
            options["sentence_vectors"] = True
        fingerprint = job_fingerprint(plan.input_hash, model_digest(embedder.elmo_bilm), options)
        names = flat_dataset_names(job.output_format, embedder.num_layers)
        shards = ShardFiles(self.directory, fingerprint, job, names, embedder.get_output_dim())
        pieces = plan.pieces_of(self.process.rank)
        with sentence_progress(plan.num_sentences, self.progress and self.process.is_first) as progress_bar:
            show = lambda own: self._show_progress(progress_bar, own)  # noqa: E731
            done, reused = self._embed_pieces(embedder, shards, pieces, show)
            assert self.heartbeats is not None
            self.heartbeats.set_counts(done, reused)
            logger.info(
                "rank %d: %d sentences in %d shards, %d of them reused from an earlier run",
                self.process.rank, done, len(pieces), reused,
            )
            if not self.process.is_first:
                self.heartbeats.mark_done()
                return None
            # Rank 0: wait for the others (a stopped one is noticed by the heartbeats).
            while not self.heartbeats.all_done():
                show(done)
                self.heartbeats.raise_if_problem()
                raise_if_interrupted()
                time.sleep(0.2)
            show(done)
        reused += sum(int(other.get("reused", 0)) for other in self.heartbeats.others().values())
        shards.check(plan.pieces)
        assemble_output(shards, plan)
        self.heartbeats.stop()
        for stale in shards.stale_files(plan.pieces):
            with contextlib.suppress(OSError):
                os.remove(stale)
        logger.info(
            "Reused %d of %d sentences from an earlier run; embedded %d",
            reused, plan.num_sentences, plan.num_sentences - reused,
        )
        return ShardedResult(plan.num_sentences, reused, self.process.world_size, self.directory)

    def _prepare(self) -> Tuple[EmbeddingJob, Plan]:
        if self.job.stateful:
            raise ConfigurationError(
                "--stateful carries the LSTM state through the whole file in order, which a "
                "sharded run cannot do; run it as one process (without torchrun), or leave out "
                "--stateful"
            )
        job = self.job.checked()
        return job, plan_input(job, self.process.world_size)

    def _show_progress(self, progress_bar, own: int) -> None:
        if not self.process.is_first or self.heartbeats is None:
            return
        others = self.heartbeats.others()
        total = own + sum(int(other.get("sentences", 0)) for other in others.values())
        if total > progress_bar.n:
            progress_bar.update(total - progress_bar.n)

    def _embed_pieces(
        self, embedder: BatchEmbedder, shards: ShardFiles, pieces: List[Piece], show: Callable[[int], None]
    ) -> Tuple[int, int]:
        """Embeds (or reuses) this rank's pieces; returns (sentences, reused sentences)."""
        heartbeats = self.heartbeats
        assert heartbeats is not None
        job = shards.job
        done = reused = 0

        def after_batch(sentences: int) -> None:
            nonlocal done
            done += sentences
            heartbeats.set_counts(done, reused)
            show(done)
            heartbeats.raise_if_problem()

        for piece in pieces:
            if shards.problem(piece) is None:
                done += piece.num_sentences
                reused += piece.num_sentences
                heartbeats.set_counts(done, reused)
                show(done)
                continue

            def fill(output: Hdf5Output, piece: Piece = piece) -> None:
                writer = layout_writer(output.file, job, embedder, piece.lines(), shard=True)
                batches = embedded_batches(job, embedder, read_piece(job.input_path, piece))
                write_batches(output, writer, batches, after_batch)

            shards.write(piece, fill)
        return done, reused
