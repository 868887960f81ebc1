"""
How a sharded ``allennlp elmo`` run cuts its input into pieces and shares them among ranks.

- The lines are taken in **groups** of ``batch_size * sort_chunk_batches`` lines: the runs of
  lines that a single-process stateless run sorts by length and batches together. A piece
  always starts at a group boundary, so every batch is exactly a single run's batch, and the
  float32 vectors of a sharded run are bitwise those of a single run.
- A **piece** is the shortest run of whole groups with at least ``piece_tokens`` tokens (the
  last one may be shorter): the unit that is written as one shard file, and so the unit of
  reuse after a kill. Pieces depend only on the input and these two numbers, not on the number
  of ranks, so a run resumed with another ``--nproc-per-node`` still reuses them.
- Each rank gets a contiguous run of pieces, balanced by tokens (the cost of embedding is about
  linear in tokens; lines vary in length by orders of magnitude).
"""
import hashlib
import os
from dataclasses import dataclass
from typing import Iterator, List, Sequence, Tuple

from elmo_plugin.common.text_files import decoded_lines

# Default tokens per piece (shard file): 2^20. At --top float16 with 1024 dims that is a 2 GiB
# shard and, on one GPU, a minute or so of work lost at most by a kill; on this machine's CPU
# with the published models, much longer.
DEFAULT_PIECE_TOKENS = 1 << 20

_UTF8_BOM = "\ufeff"


@dataclass(frozen=True)
class Piece:
    """Lines ``first_line`` to ``end_line`` (exclusive) of the input, starting at byte
    ``byte_offset``, with ``num_tokens`` tokens."""

    first_line: int
    end_line: int
    byte_offset: int
    num_tokens: int

    @property
    def num_sentences(self) -> int:
        return self.end_line - self.first_line

    def lines(self) -> Sequence[int]:
        """The piece's line numbers, in order."""
        return range(self.first_line, self.end_line)

    def shard_name(self, fingerprint: str) -> str:
        """
        The piece's shard file name: its lines (padded, so that names sort in line order) and
        the run's fingerprint. With the fingerprint in the name, a run with another model or
        other options never overwrites the shards that an earlier output still reads; they are
        removed only once the new output has replaced it.
        """
        return f"lines-{self.first_line:011d}-{self.end_line:011d}.{fingerprint[:16]}.hdf5"


@dataclass(frozen=True)
class Plan:
    """
    The pieces of an input and their ranks.

    # Parameters

    input_hash : `str`
        SHA-256 of the input's bytes: what the reuse of finished pieces is keyed by.
    num_sentences, num_tokens : `int`
        Of the whole input.
    pieces : `List[Piece]`
        In line order.
    rank_starts : `List[int]`
        Rank r embeds ``pieces[rank_starts[r]:rank_starts[r + 1]]`` (``world_size + 1``
        entries; a rank may get none when there are fewer pieces than ranks).
    """

    input_hash: str
    num_sentences: int
    num_tokens: int
    pieces: List[Piece]
    rank_starts: List[int]

    def pieces_of(self, rank: int) -> List[Piece]:
        return self.pieces[self.rank_starts[rank] : self.rank_starts[rank + 1]]


def file_sha256(path: str, block_bytes: int = 1 << 22) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(block_bytes), b""):
            digest.update(block)
    return digest.hexdigest()


def plan_input(path: str, group_lines: int, piece_tokens: int, world_size: int) -> Plan:
    """
    One pass over a checked input file: its pieces and their ranks (see the module
    documentation), and the hash of its bytes.
    """
    pieces: List[Piece] = []
    first_line = byte_offset = tokens = 0
    position = total_tokens = 0
    num_lines = 0
    for line_index, text, size in decoded_lines(path):
        if line_index % group_lines == 0 and line_index > first_line and tokens >= piece_tokens:
            pieces.append(Piece(first_line, line_index, byte_offset, tokens))
            first_line, byte_offset, tokens = line_index, position, 0
        count = len(text.split())
        tokens += count
        total_tokens += count
        position += size
        num_lines = line_index + 1
    if num_lines > first_line:
        pieces.append(Piece(first_line, num_lines, byte_offset, tokens))
    # Rank r takes the pieces that start in its 1/world_size of the tokens.
    rank_starts = [0] * (world_size + 1)
    rank_starts[world_size] = len(pieces)
    tokens_before = 0
    next_rank = 1
    for index, piece in enumerate(pieces):
        while next_rank < world_size and tokens_before * world_size >= next_rank * total_tokens:
            rank_starts[next_rank] = index
            next_rank += 1
        tokens_before += piece.num_tokens
    while next_rank < world_size:
        rank_starts[next_rank] = len(pieces)
        next_rank += 1
    return Plan(file_sha256(path), num_lines, total_tokens, pieces, rank_starts)


def read_piece(path: str, piece: Piece) -> Iterator[Tuple[int, List[str]]]:
    """``(line_index, tokens)`` for the lines of ``piece`` (of a file already checked)."""
    with open(path, "rb") as handle:
        handle.seek(piece.byte_offset)
        for line_index in range(piece.first_line, piece.end_line):
            text = handle.readline().decode("utf-8")
            if line_index == 0 and text.startswith(_UTF8_BOM):
                text = text[len(_UTF8_BOM) :]
            yield line_index, text.split()


def shards_directory(output_path: str) -> str:
    """Where the shard files of ``output_path`` live: ``OUTPUT.shards`` beside it."""
    return os.fspath(output_path) + ".shards"
