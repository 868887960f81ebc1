"""
The max-pooled character convolutions of `CharacterEncoder`: the plain definition with
``nn.Conv1d`` over every position (`reference_max_pooled_convolutions`) and its fast paths, over
only the windows that can differ (to float rounding, values and gradients).
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
# A chunk of tokens sorted by length ends before a token more than this many times as long as
# its first (lengths below `CHUNK_MIN_LENGTH` count as that): no token computes much over twice
# the windows it needs.
CHUNK_LENGTH_RATIO = 2
CHUNK_MIN_LENGTH = 4


class _MaxOverWindows(torch.autograd.Function):
    """``values.max(dim=1).values``, the gradient to the first maximal window as ``max``'s (which
    runs ten times slower than ``amax`` on a CPU), found only when a gradient is needed."""

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
    What the convolutions read of a `CharacterEncoder`: the character embedding ``(ids, char_dim)``
    (row 0 gets no gradient), each kernel ``(count, char_dim, width)`` and bias, the padding id.
    """

    embedding: torch.Tensor
    kernels: Sequence[torch.Tensor]
    biases: Sequence[torch.Tensor]
    padding_id: int

    @property
    def filters(self) -> List[tuple]:
        """``(width, count)`` of each convolution."""
        return [(kernel.size(2), kernel.size(0)) for kernel in self.kernels]

    @property
    def max_width(self) -> int:
        return max(kernel.size(2) for kernel in self.kernels)

    def embed(self, character_ids: torch.Tensor) -> torch.Tensor:
        return nn.functional.embedding(character_ids, self.embedding, padding_idx=0)

    def padding_starts(self, num_chars: int, device: torch.device) -> torch.Tensor:
        """Each filter column's last valid window start (later ones run off the token's end)."""
        return torch.cat([torch.full((count,), num_chars - width, device=device)
                          for width, count in self.filters])

    def lengths(self, character_ids: torch.Tensor) -> torch.Tensor:
        """Each position's length if the token ended there (0 at padding): maxed, the token's."""
        positions = torch.arange(1, character_ids.size(1) + 1, device=character_ids.device)
        return torch.where(character_ids != self.padding_id, positions, 0)

    def fused_kernel(self) -> torch.Tensor:
        """All kernels as one ``(total filters, char_dim * max width)`` matrix in ``unfold``'s
        (dim, tap) order, narrower ones padded with zero taps on the right."""
        return torch.cat([nn.functional.pad(kernel, (0, self.max_width - kernel.size(2)))
                          for kernel in self.kernels]).flatten(1)


def _narrowed(plan: Optional[ExecutionPlan], device_type: str, kernel: torch.Tensor):
    """The context in which the products run in the plan's dtype (`plan.products_in`)."""
    return products_in(products_dtype(plan, device_type, kernel.dtype), device_type, kernel.dtype)


def _window_values(convolutions: CharacterConvolutions, character_ids: torch.Tensor,
                   kernel: torch.Tensor, num_windows: int, narrowed) -> torch.Tensor:
    """``(tokens, num_windows, filters)``: the fused kernel over each token's first windows, in one
    product; zeros past the ids feed only zero taps or windows the callers leave out."""
    embedded = convolutions.embed(character_ids)  # (tokens, chars, dim)
    max_width = convolutions.max_width
    embedded = nn.functional.pad(embedded, (0, 0, 0, num_windows + max_width - 1 - embedded.size(1)))
    windows = embedded.unfold(1, max_width, 1)  # (tokens, windows, dim, max_width)
    with narrowed:
        return (windows.reshape(-1, kernel.size(1)) @ kernel.t()).view(embedded.size(0), num_windows, kernel.size(0))


def _without_windows_off_the_end(values: torch.Tensor, convolutions: CharacterConvolutions,
                                 num_chars: int) -> torch.Tensor:
    """``values`` with each window that runs off the ids' end for its filter's width at minus
    infinity, so that the max takes no value and routes no gradient there."""
    last_start = convolutions.padding_starts(num_chars, values.device)
    starts = torch.arange(values.size(1), device=values.device).unsqueeze(1)
    return torch.where(starts <= last_start.unsqueeze(0), values, values.new_tensor(float("-inf")))


def reference_max_pooled_convolutions(
    character_ids: torch.Tensor, convolutions: CharacterConvolutions
) -> torch.Tensor:
    """The plain definition: every convolution (``nn.Conv1d``'s) over every position of
    ``character_ids`` ``(tokens, characters)``, then the max: ``(tokens, total filters)``."""
    embedded = convolutions.embed(character_ids).transpose(1, 2)
    return torch.cat([nn.functional.conv1d(embedded, kernel, bias).max(dim=-1).values
                      for kernel, bias in zip(convolutions.kernels, convolutions.biases)], -1)


@fast_path(reference_max_pooled_convolutions, gradients=True)
def max_pooled_convolutions(character_ids: torch.Tensor, convolutions: CharacterConvolutions,
                            plan: Optional[ExecutionPlan] = None) -> torch.Tensor:
    """
    `reference_max_pooled_convolutions`' numbers (to float rounding) as matrix products in the
    plan's products dtype over only the windows that start before a token's padding, plus the one
    value of an all-padding window where one fits; tokens sorted by length, run in chunks of
    similar lengths (docs/implementation.md, "The fast paths, measured"). A ``fixed_shape`` plan
    takes `every_window_max_pooled_convolutions`.
    """
    if fixed_shape(plan):
        return every_window_max_pooled_convolutions(character_ids, convolutions, plan)
    num_tokens, num_chars = character_ids.shape
    max_width = convolutions.max_width
    kernel = convolutions.fused_kernel()
    narrowed = _narrowed(plan, character_ids.device.type, kernel)  # reusable: never nested
    last_start = convolutions.padding_starts(num_chars, character_ids.device)
    # The value of a window made only of padding characters, for every filter.
    padding_row = convolutions.embedding[convolutions.padding_id]
    padding_window = padding_row.unsqueeze(-1).expand(-1, max_width).reshape(-1)
    with narrowed:
        padding_value = kernel @ padding_window

    lengths, order = convolutions.lengths(character_ids).max(dim=1).values.sort()
    sorted_lengths = lengths.tolist()
    pooled_chunks: List[torch.Tensor] = []
    start = 0
    while start < num_tokens:
        # Tokens of similar lengths only: every token of a chunk computes its longest's windows.
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
        values = _window_values(convolutions, chunk_ids, kernel, num_windows, narrowed)
        if num_windows - 1 > num_chars - max_width:  # long tokens: windows off the end for a width
            values = _without_windows_off_the_end(values, convolutions, num_chars)
        pooled = _MaxOverWindows.apply(values)
        # Tokens with room for a window of nothing but padding also take its value.
        chunk_lengths = lengths[start:end].unsqueeze(1)
        has_padding_window = chunk_lengths <= last_start.unsqueeze(0)
        pooled = torch.where(has_padding_window, torch.maximum(pooled, padding_value), pooled)
        pooled_chunks.append(pooled)
        start = end
    pooled = torch.cat(pooled_chunks) if pooled_chunks else kernel.new_zeros(0, kernel.size(0))
    return pooled[order.argsort()] + torch.cat(list(convolutions.biases))


@fast_path(reference_max_pooled_convolutions)
def leading_max_pooled_convolutions(
    character_ids: torch.Tensor, convolutions: CharacterConvolutions
) -> torch.Tensor:
    """
    `reference_max_pooled_convolutions` over the ids cut after the batch's longest token plus the
    widest window less one (no loop over data: for the ONNX graph); a token with room for a window
    of nothing but padding also takes that window's value (the windows cut off are all such).
    """
    num_tokens, num_chars = character_ids.shape
    max_width = convolutions.max_width
    lengths = convolutions.lengths(character_ids)
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
    """`reference_max_pooled_convolutions`' numbers (to float rounding) as one product over every
    window of every token, in the plan's products dtype, with shapes fixed by the input's alone."""
    num_chars = character_ids.size(1)
    kernel = convolutions.fused_kernel()
    values = _window_values(convolutions, character_ids, kernel, num_chars,
                            _narrowed(plan, character_ids.device.type, kernel))
    values = _without_windows_off_the_end(values, convolutions, num_chars)
    return _MaxOverWindows.apply(values) + torch.cat(list(convolutions.biases))
