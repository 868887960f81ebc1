"""
The max-pooled character convolutions of `CharacterEncoder`: ``max over positions (conv(embedded)
+ bias)`` of every filter, computed over only the windows that can differ
(`max_pooled_convolutions`; `leading_max_pooled_convolutions` for an exported graph), beside the
plain definition with ``nn.Conv1d`` over every position (`reference_max_pooled_convolutions`),
which both equal to float rounding (tests compare values and gradients).
"""
import bisect
from typing import List, NamedTuple, Optional, Sequence

import torch
from torch import nn

from elmo_plugin.modules.execution.fast_paths import fast_path
from elmo_plugin.modules.execution.plan import (
    ExecutionPlan,
    fixed_shape,
    products_dtype,
    products_in,
)

# Rows of (token, window position) per matrix multiply in `CharacterEncoder`: bounds the
# (rows, total filters) intermediate to 64 MB at 2048 filters.
CONVOLUTION_ROWS_PER_CHUNK = 8192
# A chunk of tokens (sorted by length) ends before a token more than this many times as long as
# its first (shortest) one, so that no token computes more than about twice the windows it
# needs: every token of a chunk computes its longest token's windows. Lengths below
# `CHUNK_MIN_LENGTH` count as that, so that short tokens do not each get a chunk of their own.
CHUNK_LENGTH_RATIO = 2
CHUNK_MIN_LENGTH = 4


class _MaxOverWindows(torch.autograd.Function):
    """
    ``values.max(dim=1).values`` for ``(tokens, windows, filters)``, with the gradient routed to
    the first maximal window as ``max`` does. ``max`` with indices runs ten times slower than
    ``amax`` on CPU, so the first maximal window is found with ``amax`` too, and only when a
    gradient is needed.
    """

    @staticmethod
    def forward(ctx, values: torch.Tensor) -> torch.Tensor:  # type: ignore[override]
        pooled = values.amax(dim=1)
        if ctx.needs_input_grad[0]:
            num_windows = values.size(1)
            # amax of (num_windows - position) over the maximal windows picks the first of them.
            small = torch.uint8 if num_windows < 256 else torch.int32
            countdown = torch.arange(num_windows, 0, -1, device=values.device, dtype=small)
            is_max = (values == pooled.unsqueeze(1)).to(small)
            first = num_windows - (is_max * countdown.view(1, -1, 1)).amax(dim=1).long()
            ctx.save_for_backward(first)
            ctx.shape = values.shape
        return pooled

    @staticmethod
    def backward(ctx, gradient: torch.Tensor) -> torch.Tensor:  # type: ignore[override]
        (first,) = ctx.saved_tensors
        return gradient.new_zeros(ctx.shape).scatter_(1, first.unsqueeze(1), gradient.unsqueeze(1))


class CharacterConvolutions(NamedTuple):
    """
    What the convolutions read of a `CharacterEncoder`: its character embedding ``(ids,
    char_dim)``, whose row 0 (the mask id) gets no gradient, as the module's ``padding_idx=0``;
    every convolution's kernel ``(count, char_dim, width)`` and bias ``(count,)``; and the id
    that fills a token's row of ids after its end.
    """

    embedding: torch.Tensor
    kernels: Sequence[torch.Tensor]
    biases: Sequence[torch.Tensor]
    padding_id: int

    @property
    def filters(self) -> List[tuple]:
        """``(width, count)`` of each convolution."""
        return [(kernel.size(2), kernel.size(0)) for kernel in self.kernels]

    def embed(self, character_ids: torch.Tensor) -> torch.Tensor:
        return nn.functional.embedding(character_ids, self.embedding, padding_idx=0)

    def padding_starts(self, num_chars: int, device: torch.device) -> torch.Tensor:
        """Each filter column's last valid window start (later ones run off the token's end)."""
        return torch.cat([torch.full((count,), num_chars - width, device=device)
                          for width, count in self.filters])


def _fused_kernel(convolutions: CharacterConvolutions) -> torch.Tensor:
    """
    Every convolution's kernel in one ``(total filters, char_dim * max width)`` matrix,
    narrower kernels padded with zero taps on the right, in ``unfold``'s (dim, tap) order.
    """
    max_width = max(width for width, _ in convolutions.filters)
    return torch.cat(
        [nn.functional.pad(kernel, (0, max_width - kernel.size(2)))
         for kernel in convolutions.kernels]
    ).flatten(1)



def reference_max_pooled_convolutions(
    character_ids: torch.Tensor, convolutions: CharacterConvolutions
) -> torch.Tensor:
    """
    The plain definition: every convolution (``nn.Conv1d``'s) over every position of
    ``character_ids`` ``(num_tokens, max_characters_per_token)``, then the max: ``(num_tokens,
    total filters)``.
    """
    embedded = convolutions.embed(character_ids).transpose(1, 2)
    return torch.cat([nn.functional.conv1d(embedded, kernel, bias).max(dim=-1).values
                      for kernel, bias in zip(convolutions.kernels, convolutions.biases)], -1)


@fast_path(reference_max_pooled_convolutions, gradients=True)
def max_pooled_convolutions(character_ids: torch.Tensor, convolutions: CharacterConvolutions,
                            plan: Optional[ExecutionPlan] = None) -> torch.Tensor:
    """
    `reference_max_pooled_convolutions`' numbers (to float rounding), computed as one matrix
    multiply over only the windows that can differ, its operands rounded to the plan's products
    dtype (`plan.products_in`).

    Why not ``nn.Conv1d``: it runs far below a large matrix multiply's speed on a CPU
    (docs/implementation.md), and most of its windows are wasted. A token's ids end in
    padding (a five-letter word has 7 non-padding ids of 50), and every window that
    lies wholly in the padding has the same value for a given filter. So each token needs
    only its windows that start before its padding, plus that one padding value (if a
    wholly-padding window fits before the end), and the bias can be added after the max
    (rounding is monotone, so this is exact). Tokens are sorted by their non-padding length
    and processed in chunks, so a chunk computes as many window positions as its longest
    token needs. A plan with ``fixed_shape`` computes every window instead
    (`every_window_max_pooled_convolutions`): the lengths are then not read by the host.
    """
    if fixed_shape(plan):
        return every_window_max_pooled_convolutions(character_ids, convolutions, plan)
    num_tokens, num_chars = character_ids.shape
    max_width = max(width for width, _ in convolutions.filters)
    kernel = _fused_kernel(convolutions)
    device_type = character_ids.device.type
    # A context, entered around each product (reusable: it is never nested).
    narrowed = products_in(products_dtype(plan, device_type, kernel.dtype), device_type,
                           kernel.dtype)
    last_start = convolutions.padding_starts(num_chars, character_ids.device)
    # The value of a window made only of padding characters, for every filter.
    padding_row = convolutions.embedding[convolutions.padding_id]
    padding_window = padding_row.unsqueeze(-1).expand(-1, max_width).reshape(-1)
    with narrowed:
        padding_value = kernel @ padding_window

    # Non-padding length of each token: one past its last non-padding id.
    positions = torch.arange(1, num_chars + 1, device=character_ids.device)
    padding_id = convolutions.padding_id
    lengths = torch.where(character_ids != padding_id, positions, 0).max(dim=1).values
    lengths, order = lengths.sort()
    sorted_lengths = lengths.tolist()
    pooled_chunks: List[torch.Tensor] = []
    start = 0
    while start < num_tokens:
        # Tokens of similar lengths only: in a 20-token English sentence (the batch-1
        # benchmark's) the longest of the 18 distinct tokens has 16 non-padding ids and 14
        # have 3 to 8, so one chunk computed 18 x 16 = 288 windows where 113 are needed;
        # two chunks compute 14 x 8 + 4 x 16 = 176.
        longest = CHUNK_LENGTH_RATIO * max(sorted_lengths[start], CHUNK_MIN_LENGTH)
        similar = max(start + 1, bisect.bisect_right(sorted_lengths, longest, lo=start))
        # Grow the chunk while its rows (tokens x its longest token's windows) fit the budget.
        end = min(num_tokens, start + CONVOLUTION_ROWS_PER_CHUNK, similar)
        while end - start > 1 and (end - start) * max(sorted_lengths[end - 1], 1) > (
            CONVOLUTION_ROWS_PER_CHUNK
        ):
            end = start + max(1, CONVOLUTION_ROWS_PER_CHUNK // max(sorted_lengths[end - 1], 1))
        num_windows = max(sorted_lengths[end - 1], 1)
        chunk_ids = character_ids[order[start:end], : num_windows + max_width - 1]
        embedded = convolutions.embed(chunk_ids)  # (tokens, chars, dim)
        # Zeros past the token's end feed only the zero taps of narrower kernels, or windows
        # that are invalid and excluded below.
        embedded = nn.functional.pad(
            embedded, (0, 0, 0, num_windows + max_width - 1 - embedded.size(1))
        )
        windows = embedded.unfold(1, max_width, 1)  # (tokens, windows, dim, max_width)
        with narrowed:
            values = (windows.reshape(-1, kernel.size(1)) @ kernel.t()).view(
                end - start, num_windows, -1
            )
        if num_windows - 1 <= num_chars - max_width:
            pooled = _MaxOverWindows.apply(values)
        else:  # Long tokens: each width has its own last valid window.
            pooled_parts = []
            offset = 0
            for width, count in convolutions.filters:
                valid = min(num_windows, num_chars - width + 1)
                pooled_parts.append(
                    _MaxOverWindows.apply(values[:, :valid, offset : offset + count])
                )
                offset += count
            pooled = torch.cat(pooled_parts, dim=1)
        # Tokens with room for a window of nothing but padding also take its value.
        chunk_lengths = lengths[start:end].unsqueeze(1)
        has_padding_window = chunk_lengths <= last_start.unsqueeze(0)
        pooled = torch.where(has_padding_window, torch.maximum(pooled, padding_value), pooled)
        pooled_chunks.append(pooled)
        start = end
    pooled = torch.cat(pooled_chunks) if pooled_chunks else kernel.new_zeros(0, kernel.size(0))
    restore = torch.empty_like(order)
    restore[order] = torch.arange(num_tokens, device=order.device)
    return pooled[restore] + torch.cat(list(convolutions.biases))


@fast_path(reference_max_pooled_convolutions)
def leading_max_pooled_convolutions(
    character_ids: torch.Tensor, convolutions: CharacterConvolutions
) -> torch.Tensor:
    """
    `reference_max_pooled_convolutions` over only the leading characters that can differ, for
    the graph that ONNX export writes (where `max_pooled_convolutions`' chunks of sorted tokens
    would be a Python loop over data): the ids are cut after the batch's longest token (its
    last non-padding id) plus the widest window less one, and a token with room for a window of
    nothing but padding also takes that window's value, which every such window has. The same
    numbers as the reference, to float rounding: the windows cut off lie wholly in the padding.
    Tokens are mostly far shorter than ``max_characters_per_token`` (a five-letter word has 7
    non-padding ids of 50).
    """
    num_tokens, num_chars = character_ids.shape
    max_width = max(width for width, _ in convolutions.filters)
    positions = torch.arange(1, num_chars + 1, device=character_ids.device)
    lengths = torch.where(character_ids != convolutions.padding_id, positions, 0)
    # One zero row, so that an empty batch has a longest length (0) too.
    lengths = torch.cat([lengths, lengths.new_zeros(1, num_chars)]).amax(dim=1)
    # .item(), not int(): under export a symbol for the graph, not the example's number.
    keep = torch.clamp(lengths.max() + max_width - 1, min=max_width, max=num_chars).item()
    torch._check(keep >= max_width)
    torch._check(keep <= num_chars)
    lengths = lengths[:num_tokens]
    kernels = list(zip(convolutions.kernels, convolutions.biases))
    embedded = convolutions.embed(character_ids[:, :keep]).transpose(1, 2)
    pooled = torch.cat([nn.functional.conv1d(embedded, kernel, bias).amax(dim=-1)
                        for kernel, bias in kernels], dim=-1)
    padding = convolutions.embedding[convolutions.padding_id]
    padding_window = padding.view(1, -1, 1).expand(1, -1, max_width)
    padding_value = torch.cat([nn.functional.conv1d(padding_window, kernel, bias)[:, :, 0]
                               for kernel, bias in kernels], -1)
    last_start = convolutions.padding_starts(num_chars, character_ids.device)
    has_padding_window = lengths.unsqueeze(1) <= last_start.unsqueeze(0)
    return torch.where(has_padding_window, torch.maximum(pooled, padding_value), pooled)


@fast_path(reference_max_pooled_convolutions, gradients=True)
def every_window_max_pooled_convolutions(
    character_ids: torch.Tensor, convolutions: CharacterConvolutions,
    plan: Optional[ExecutionPlan] = None,
) -> torch.Tensor:
    """
    `reference_max_pooled_convolutions`' numbers (to float rounding) as one matrix multiply over
    every window of every token, in the plan's products dtype, with shapes fixed by the input's
    alone: no token's length is read by the host, no sorting, no chunks (a plan's
    ``fixed_shape``: stream training, a step that never waits on the device and that a CUDA
    graph can replay). About five times the windows `max_pooled_convolutions` computes for
    English words, in one large product. A window that runs off the token's end for a filter's
    width is left out of that filter's max (set to minus infinity, so that the max routes no
    gradient to it).
    """
    num_tokens, num_chars = character_ids.shape
    max_width = max(width for width, _ in convolutions.filters)
    kernel = _fused_kernel(convolutions)
    device_type = character_ids.device.type
    narrowed = products_in(products_dtype(plan, device_type, kernel.dtype), device_type,
                           kernel.dtype)
    embedded = convolutions.embed(character_ids)  # (tokens, chars, dim)
    # Zeros past the last character feed only the zero taps of narrower kernels, or windows
    # that are invalid for the filter and excluded below.
    embedded = nn.functional.pad(embedded, (0, 0, 0, max_width - 1))
    windows = embedded.unfold(1, max_width, 1)  # (tokens, chars, dim, max_width)
    with narrowed:
        values = (windows.reshape(-1, kernel.size(1)) @ kernel.t()).view(
            num_tokens, num_chars, kernel.size(0))
    last_start = convolutions.padding_starts(num_chars, character_ids.device)
    starts = torch.arange(num_chars, device=character_ids.device).unsqueeze(1)
    valid = starts <= last_start.unsqueeze(0)  # (windows, filters)
    values = torch.where(valid, values, values.new_tensor(float("-inf")))
    return _MaxOverWindows.apply(values) + torch.cat(list(convolutions.biases))
