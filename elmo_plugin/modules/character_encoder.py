"""
The character-level token encoder of ELMo: byte embedding, convolutions, highway, projection;
optionally with a word embedding beside the characters (ELMoForManyLangs models).
"""
import bisect
import math
from typing import List, Optional, Sequence, Tuple

import torch
from torch import nn

from elmo_plugin.data.character_ids import NUM_TRAINING_CHARACTER_IDS, PADDING_CHARACTER
from elmo_plugin.modules import small_batch_linear
from elmo_plugin.modules.autocast_weight_copies import (
    AutocastWeightCopies,
    frozen_autocast_weights,
    keep_copies_after_unpickling,
)

# The +1-shifted id of bilm-tf's padding character, which fills every token's ids after its
# end-of-word marker.
PADDING_ID = PADDING_CHARACTER + 1
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


class Highway(nn.Module):
    """
    bilm-tf's highway layers: ``g * relu(x W_t + b_t) + (1 - g) * x`` with
    ``g = sigmoid(x W_carry + b_carry)``.

    Each layer is one ``Linear(F, 2F)``: rows ``[:F]`` are the transform, rows ``[F:]`` the gate
    ("carry" in bilm-tf's names), so a layer costs one matrix multiply. AllenNLP's own ``Highway``
    uses the opposite gate convention and negates the gate weights when loading; we keep
    TensorFlow's so that the stored weights are used unchanged.
    """

    def __init__(self, dim: int, num_layers: int) -> None:
        super().__init__()
        self.dim = dim
        self.layers = nn.ModuleList([nn.Linear(dim, 2 * dim) for _ in range(num_layers)])
        # The layers' weights in autocast's dtype for frozen inference (Original's two layers:
        # 64 MB of float32 converted on every bfloat16 call otherwise); not in the state dict.
        self._autocast_weight_copies = AutocastWeightCopies()

    def __setstate__(self, state: dict) -> None:
        super().__setstate__(state)
        keep_copies_after_unpickling(self, "_autocast_weight_copies")

    def forward(self, inputs: torch.Tensor) -> torch.Tensor:
        weights = frozen_autocast_weights(
            [layer.weight for layer in self.layers], self._autocast_weight_copies, inputs
        )
        x = inputs
        for index, layer in enumerate(self.layers):
            if weights is None:
                product = small_batch_linear.linear(x, layer)
            else:
                product = nn.functional.linear(x, weights[index], layer.bias)
            transform, gate = product.chunk(2, dim=-1)
            gate = torch.sigmoid(gate)
            x = gate * torch.relu(transform) + (1.0 - gate) * x
        return x


class CharacterEncoder(nn.Module):
    """
    Encodes each token from its character ids into a ``projection_dim`` vector.

    # Parameters

    filters : `Sequence[Tuple[int, int]]`
        ``(width, count)`` of each convolution.
    char_embedding_dim : `int`
        Size of each byte embedding.
    n_highway : `int`
        Number of highway layers (0 allowed).
    projection_dim : `int`
        Output size. As in bilm-tf, there is no projection layer when it equals the total number
        of filters.
    activation : `str`
        ``"relu"`` or ``"tanh"``, applied after max-pooling each convolution over characters.
    num_character_ids : `int`
        Rows of the embedding matrix: 262 (261 bilm-tf ids + the mask row 0, which stays zero).
    padding_id : `int`, optional (default = bilm-tf's padding id, 261 after the +1 shift)
        The id that fills a token's row after its end-of-word id. Only used to skip windows made
        of nothing but padding; any other scheme of ids (ELMoForManyLangs') names its own.
    num_word_ids : `int`, optional (default = `0`)
        With ``word_embedding_dim``: rows of a word embedding (the mask row 0 included). Then each
        token's row of ids carries its word id in the last column, after the character ids, and
        the projection reads ``[word vector; highway output]`` (ELMoForManyLangs' ``cnn_50_100``
        models). 0: characters only, as in bilm-tf.
    word_embedding_dim : `int`, optional (default = `0`)
        Size of each word vector.
    project : `bool`, optional
        Force the projection layer on (True) or off (False). By default it exists when its input
        and output sizes differ, as in bilm-tf; ELMoForManyLangs always has one.
    """

    def __init__(
        self,
        filters: Sequence[Tuple[int, int]],
        char_embedding_dim: int,
        n_highway: int,
        projection_dim: int,
        activation: str = "relu",
        num_character_ids: int = NUM_TRAINING_CHARACTER_IDS + 1,
        padding_id: int = PADDING_ID,
        num_word_ids: int = 0,
        word_embedding_dim: int = 0,
        project: Optional[bool] = None,
    ) -> None:
        super().__init__()
        if activation not in ("relu", "tanh"):
            raise ValueError(f"activation must be 'relu' or 'tanh', got {activation!r}")
        self.filters = [(int(w), int(n)) for w, n in filters]
        self.activation = activation
        self.n_filters = sum(n for _, n in self.filters)
        self.output_dim = projection_dim
        self.padding_id = padding_id
        self.char_embedding = nn.Embedding(num_character_ids, char_embedding_dim, padding_idx=0)
        self.word_embedding: Optional[nn.Embedding] = (
            nn.Embedding(num_word_ids, word_embedding_dim, padding_idx=0)
            if num_word_ids > 0 and word_embedding_dim > 0
            else None
        )
        projection_input_dim = self.n_filters + (word_embedding_dim if self.word_embedding else 0)
        if project is None:
            project = projection_input_dim != projection_dim
        elif not project and projection_input_dim != projection_dim:
            raise ValueError(
                f"project=False needs the token vector ({projection_input_dim}) to be as wide "
                f"as projection_dim ({projection_dim})"
            )
        self.convolutions = nn.ModuleList(
            [nn.Conv1d(char_embedding_dim, count, width) for width, count in self.filters]
        )
        self.highway = Highway(self.n_filters, n_highway)
        self.projection: Optional[nn.Linear] = (
            nn.Linear(projection_input_dim, projection_dim) if project else None
        )
        # The projection's weight in autocast's dtype for frozen inference; not in the state dict.
        self._autocast_weight_copies = AutocastWeightCopies()
        self.reset_parameters()

    def __setstate__(self, state: dict) -> None:
        super().__setstate__(state)
        keep_copies_after_unpickling(self, "_autocast_weight_copies")

    def reset_parameters(self) -> None:
        """bilm-tf's initialisation: bytes U(-1, 1), gate bias -2."""
        with torch.no_grad():
            nn.init.uniform_(self.char_embedding.weight, -1.0, 1.0)
            self.char_embedding.weight[0].zero_()
            char_dim = self.char_embedding.embedding_dim
            for (width, _), conv in zip(self.filters, self.convolutions):
                if self.activation == "relu":
                    nn.init.normal_(conv.weight, 0.0, math.sqrt(1.0 / (width * char_dim)))
                else:
                    nn.init.uniform_(conv.weight, -0.05, 0.05)
                conv.bias.zero_()
            for layer in self.highway.layers:
                nn.init.normal_(layer.weight, 0.0, math.sqrt(1.0 / self.n_filters))
                layer.bias[: self.n_filters].zero_()
                layer.bias[self.n_filters :].fill_(-2.0)
            if self.projection is not None:
                nn.init.normal_(
                    self.projection.weight, 0.0, math.sqrt(1.0 / self.projection.in_features)
                )
                self.projection.bias.zero_()
            if self.word_embedding is not None:
                nn.init.uniform_(self.word_embedding.weight, -0.25, 0.25)
                self.word_embedding.weight[0].zero_()

    def _fused_kernel(self) -> torch.Tensor:
        """
        Every convolution's kernel in one ``(total filters, char_dim * max width)`` matrix,
        narrower kernels padded with zero taps on the right, in ``unfold``'s (dim, tap) order.
        """
        max_width = max(width for width, _ in self.filters)
        return torch.cat(
            [
                nn.functional.pad(conv.weight, (0, max_width - width))
                for (width, _), conv in zip(self.filters, self.convolutions)
            ]
        ).flatten(1)

    def _max_pooled_convolutions(self, character_ids: torch.Tensor) -> torch.Tensor:
        """
        ``max over positions (conv(embedded) + bias)`` of every filter: ``(num_tokens, total
        filters)``, the same numbers as running each ``nn.Conv1d`` and max-pooling (to float
        rounding), computed as one matrix multiply over only the windows that can differ.

        Why not ``nn.Conv1d``: on CPU it ran at 33-60 GFLOP/s for Small's widest filter, against
        160 for a large matrix multiply, and most of its windows are wasted. A token's ids end in
        padding (a five-letter word has 7 non-padding ids of 50), and every window that
        lies wholly in the padding has the same value for a given filter. So each token needs
        only its windows that start before its padding, plus that one padding value (if a
        wholly-padding window fits before the end), and the bias can be added after the max
        (rounding is monotone, so this is exact). Tokens are sorted by their non-padding length
        and processed in chunks, so a chunk computes as many window positions as its longest
        token needs.
        """
        num_tokens, num_chars = character_ids.shape
        max_width = max(width for width, _ in self.filters)
        kernel = self._fused_kernel()
        # Each column's last valid window start (positions num_chars - width + 1 onwards run off
        # the end of the token).
        last_start = torch.cat(
            [
                torch.full((count,), num_chars - width, device=character_ids.device)
                for width, count in self.filters
            ]
        )
        # The value of a window made only of padding characters, for every filter.
        padding_row = self.char_embedding.weight[self.padding_id]
        padding_window = padding_row.unsqueeze(-1).expand(-1, max_width).reshape(-1)
        padding_value = kernel @ padding_window

        # Non-padding length of each token: one past its last non-padding id.
        positions = torch.arange(1, num_chars + 1, device=character_ids.device)
        lengths = torch.where(character_ids != self.padding_id, positions, 0).max(dim=1).values
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
            embedded = self.char_embedding(chunk_ids)  # (tokens, chars, dim)
            # Zeros past the token's end feed only the zero taps of narrower kernels, or windows
            # that are invalid and excluded below.
            embedded = nn.functional.pad(
                embedded, (0, 0, 0, num_windows + max_width - 1 - embedded.size(1))
            )
            windows = embedded.unfold(1, max_width, 1)  # (tokens, windows, dim, max_width)
            values = (windows.reshape(-1, kernel.size(1)) @ kernel.t()).view(
                end - start, num_windows, -1
            )
            if num_windows - 1 <= num_chars - max_width:
                pooled = _MaxOverWindows.apply(values)
            else:  # Long tokens: each width has its own last valid window.
                pooled_parts = []
                offset = 0
                for width, count in self.filters:
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
        bias = torch.cat([conv.bias for conv in self.convolutions])
        return pooled[restore] + bias

    def _split_word_ids(
        self, token_ids: torch.Tensor
    ) -> Tuple[torch.Tensor, Optional[torch.Tensor]]:
        """``(character ids, word ids or None)`` of ``(num_tokens, ids per token)`` rows."""
        if self.word_embedding is None:
            return token_ids, None
        return token_ids[:, :-1], token_ids[:, -1]

    def forward(self, character_ids: torch.Tensor) -> torch.Tensor:
        """
        ``character_ids``: ``(num_tokens, max_characters_per_token)``, +1-shifted ids (with a
        word embedding, one more column: the word id). Returns ``(num_tokens, output_dim)``.
        """
        character_ids, word_ids = self._split_word_ids(character_ids)
        # Max over positions, then the activation: bilm-tf's order (the same for monotone
        # activations, and cheaper).
        return self._encode_pooled(self._max_pooled_convolutions(character_ids), word_ids)

    def reference_forward(self, character_ids: torch.Tensor) -> torch.Tensor:
        """`forward` with ``nn.Conv1d`` over every position: the plain definition, for tests."""
        character_ids, word_ids = self._split_word_ids(character_ids)
        embedded = self.char_embedding(character_ids).transpose(1, 2)
        pooled = torch.cat([conv(embedded).max(dim=-1).values for conv in self.convolutions], -1)
        return self._encode_pooled(pooled, word_ids)

    def _encode_pooled(
        self, pooled: torch.Tensor, word_ids: Optional[torch.Tensor] = None
    ) -> torch.Tensor:
        """Activation, highway and projection of the max-pooled convolutions."""
        token = torch.relu(pooled) if self.activation == "relu" else torch.tanh(pooled)
        token = self.highway(token)
        if self.word_embedding is not None:
            # The word vector comes first: the projection's first word_embedding_dim input
            # columns belong to it (ELMoForManyLangs' ConvTokenEmbedder concatenates so).
            token = torch.cat([self.word_embedding(word_ids), token], dim=-1)
        if self.projection is not None:
            weights = frozen_autocast_weights(
                [self.projection.weight], self._autocast_weight_copies, token
            )
            if weights is None:
                token = self.projection(token)
            else:
                token = nn.functional.linear(token, weights[0], self.projection.bias)
        return token
