"""
How a sharded ``allennlp elmo`` run cuts its input into pieces, each a run of whole batches of a
single process's run (`batching.line_batches`, so its vectors are bitwise a single run's) written
as one shard file, and shares them among ranks (docs/embedding.md). An input of more than
``piece_tokens`` tokens per rank is cut into pieces of whole chunks of at least that many tokens;
a smaller one into one piece per rank, cut at batch boundaries (possibly inside a chunk: such a
piece lists its lines). Each rank gets a contiguous run of pieces, balanced by tokens.
"""
import hashlib
import itertools
import os
from array import array
from dataclasses import dataclass
from typing import Iterator, List, Optional, Sequence, Tuple

from elmo_plugin.common.text_files import decoded_lines
from elmo_plugin.embedding_output.batching import Line
from elmo_plugin.embedding_output.job import EmbeddingJob

_UTF8_BOM = "\ufeff"


@dataclass(frozen=True)
class Piece:
    """Sentences ``start`` to ``end`` (exclusive) of a single run's order, with ``num_tokens``
    tokens: the lines ``first_line`` to ``end_line`` (whole chunks, from byte ``byte_offset``),
    or, for a piece cut inside a chunk, the ``chosen_lines`` among them."""

    start: int
    end: int
    first_line: int
    end_line: int
    byte_offset: int
    num_tokens: int
    chosen_lines: Optional[Tuple[int, ...]] = None

    @classmethod
    def of_lines(cls, first_line: int, end_line: int, byte_offset: int, num_tokens: int) -> "Piece":
        """The piece of whole chunks that is lines ``first_line`` to ``end_line``."""
        return cls(first_line, end_line, first_line, end_line, byte_offset, num_tokens)

    @property
    def num_sentences(self) -> int:
        return self.end - self.start

    def lines(self) -> Sequence[int]:
        return range(self.first_line, self.end_line) if self.chosen_lines is None else self.chosen_lines

    def describe(self) -> str:
        span = f"lines {self.first_line + 1}-{self.end_line}"
        return span if self.chosen_lines is None else f"{self.num_sentences} of {span}"

    def shard_name(self, fingerprint: str) -> str:
        # The fingerprint: a run with another model or options never overwrites the shards that
        # an earlier output still reads.
        return f"lines-{self.start:011d}-{self.end:011d}.{fingerprint[:16]}.hdf5"


@dataclass(frozen=True)
class Plan:
    """The ``pieces`` of an input (in line order) and their ranks: rank r embeds
    ``pieces[rank_starts[r]:rank_starts[r + 1]]``; ``input_hash`` is the SHA-256 of its bytes."""

    input_hash: str
    num_sentences: int
    num_tokens: int
    pieces: List[Piece]
    rank_starts: List[int]

    def pieces_of(self, rank: int) -> List[Piece]:
        return self.pieces[self.rank_starts[rank] : self.rank_starts[rank + 1]]


def plan_input(job: EmbeddingJob, world_size: int) -> Plan:
    """The pieces of the checked input of ``job`` and their ranks, in one pass over it."""
    chunk_lines = job.chunk_lines
    chunk_offsets: List[int] = []  # the byte offset of each chunk's first line
    whole_chunks: List[Piece] = []
    # Each line's tokens, kept only while the input may be small enough for one piece per rank.
    lengths: Optional[array] = array("l")
    first_line = piece_offset = tokens = position = total_tokens = num_lines = 0
    for line_index, text, size in decoded_lines(job.input_path):
        if line_index % chunk_lines == 0:
            chunk_offsets.append(position)
            if line_index > first_line and tokens >= job.piece_tokens:
                whole_chunks.append(Piece.of_lines(first_line, line_index, piece_offset, tokens))
                first_line, piece_offset, tokens = line_index, position, 0
        count = len(text.split())
        tokens += count
        total_tokens += count
        if lengths is not None:
            lengths.append(count)
            if total_tokens > world_size * job.piece_tokens:
                lengths = None
        position += size
        num_lines = line_index + 1
    if lengths is None:
        pieces = whole_chunks + [Piece.of_lines(first_line, num_lines, piece_offset, tokens)]
    else:
        pieces = _one_piece_per_rank(job, chunk_offsets, lengths, world_size)
    # Rank r takes the pieces that start in its 1/world_size of the tokens.
    before = list(itertools.accumulate((piece.num_tokens for piece in pieces), initial=0))[:-1]
    starts = [next((i for i, t in enumerate(before) if t * world_size >= r * total_tokens), len(pieces))
              for r in range(1, world_size)]
    rank_starts = [0, *starts, len(pieces)]
    with open(job.input_path, "rb") as handle:
        input_hash = hashlib.file_digest(handle, "sha256").hexdigest()
    return Plan(input_hash, num_lines, total_tokens, pieces, rank_starts)


def _one_piece_per_rank(
    job: EmbeddingJob, chunk_offsets: List[int], lengths: array, world_size: int
) -> List[Piece]:
    """Cuts a single run's batches where the tokens so far first reach each rank's share."""
    total_tokens = sum(lengths)
    # The batches a single run makes, from the lines' lengths alone (a range has the length of
    # the tokens it stands for).
    lines = ((line, range(length)) for line, length in enumerate(lengths))
    batches = [[line for line, _ in batch] for batch in job.batches(lines)]  # type: ignore
    pieces: List[Piece] = []
    first_batch = start = tokens_before = 0
    next_cut = 1
    for index, batch in enumerate(batches):
        if index > first_batch and tokens_before * world_size >= next_cut * total_tokens:
            pieces.append(_cut(job, chunk_offsets, lengths, batches[first_batch:index], start))
            start += sum(len(batch) for batch in batches[first_batch:index])
            first_batch = index
            while next_cut < world_size and tokens_before * world_size >= next_cut * total_tokens:
                next_cut += 1
        tokens_before += sum(lengths[line] for line in batch)
    pieces.append(_cut(job, chunk_offsets, lengths, batches[first_batch:], start))
    return pieces


def _cut(job: EmbeddingJob, chunk_offsets: List[int], lengths: array, batches: List[List[int]], start: int) -> Piece:
    """The piece of ``batches`` (their line numbers), which start at sentence ``start``."""
    chosen = sorted(line for batch in batches for line in batch)
    chunk_lines = job.chunk_lines
    first_line = chosen[0] // chunk_lines * chunk_lines
    end_line = min((chosen[-1] // chunk_lines + 1) * chunk_lines, len(lengths))
    end = start + len(chosen)
    tokens = sum(lengths[line] for line in chosen)
    whole = (start, end) == (first_line, end_line)
    return Piece(
        start, end, first_line, end_line, chunk_offsets[first_line // chunk_lines], tokens,
        None if whole else tuple(chosen),
    )


def read_piece(path: str, piece: Piece) -> Iterator[Line]:
    """``(line_index, tokens)`` for the lines of ``piece`` of a checked file, in order."""
    chosen = None if piece.chosen_lines is None else set(piece.chosen_lines)
    with open(path, "rb") as handle:
        handle.seek(piece.byte_offset)
        for line_index in range(piece.first_line, piece.end_line):
            text = handle.readline().decode("utf-8")
            if chosen is not None and line_index not in chosen:
                continue
            if line_index == 0 and text.startswith(_UTF8_BOM):
                text = text[len(_UTF8_BOM) :]
            yield line_index, text.split()


def shards_directory(output_path: str) -> str:
    """Where the shard files of ``output_path`` live: ``OUTPUT.shards`` beside it."""
    return os.fspath(output_path) + ".shards"
