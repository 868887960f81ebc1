"""
The batches in which an embedding run feeds its lines to the biLM. Every engine takes its batches
from `line_batches`, which is what makes their vectors bitwise equal.
"""
from typing import Iterable, Iterator, List, Tuple

from allennlp.common.util import lazy_groups_of

# A stateless run reads this many batches at a time and sorts them by length. Larger chunks pad
# less; the chunk's tokens (not its embeddings) are all that is held in memory.
DEFAULT_SORT_CHUNK_BATCHES = 32

# A sentence of the input: its 0-based line number and its tokens.
Line = Tuple[int, List[str]]


def line_batches(
    lines: Iterable[Line], batch_size: int, sort_chunk_batches: int, stateful: bool = False
) -> Iterator[List[Line]]:
    """
    The batches in which ``lines`` (in line order) are embedded: stateful, or with
    ``sort_chunk_batches`` 1, consecutive runs of ``batch_size`` lines in file order; stateless,
    the lines of each chunk of ``batch_size * sort_chunk_batches`` line numbers sorted longest
    first. Chunks go by line number, so that a sharded run's piece (whole batches of a single
    run) is cut into exactly those batches.
    """
    if stateful or sort_chunk_batches <= 1:
        yield from lazy_groups_of(iter(lines), batch_size)
        return
    chunk_lines = batch_size * sort_chunk_batches
    chunk: List[Line] = []
    for line in lines:
        if chunk and line[0] // chunk_lines != chunk[0][0] // chunk_lines:
            yield from _sorted_batches(chunk, batch_size)
            chunk = []
        chunk.append(line)
    yield from _sorted_batches(chunk, batch_size)


def _sorted_batches(chunk: List[Line], batch_size: int) -> Iterator[List[Line]]:
    # Longest first: a batch that does not fit in memory fails at the start of a chunk, not
    # after the rest of it. The sort is stable, so ties keep file order.
    chunk.sort(key=lambda line: -len(line[1]))
    for start in range(0, len(chunk), batch_size):
        yield chunk[start : start + batch_size]
