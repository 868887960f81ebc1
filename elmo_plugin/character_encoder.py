"""
The character-level token encoder of ELMo: byte embedding, convolutions, highway, projection.
"""
import math
from typing import List, Optional, Sequence, Tuple

import torch
from torch import nn

from elmo_plugin.character_ids import NUM_TRAINING_CHARACTER_IDS


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

    def forward(self, inputs: torch.Tensor) -> torch.Tensor:
        x = inputs
        for layer in self.layers:
            transform, gate = layer(x).chunk(2, dim=-1)
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
    """

    def __init__(
        self,
        filters: Sequence[Tuple[int, int]],
        char_embedding_dim: int,
        n_highway: int,
        projection_dim: int,
        activation: str = "relu",
        num_character_ids: int = NUM_TRAINING_CHARACTER_IDS + 1,
    ) -> None:
        super().__init__()
        if activation not in ("relu", "tanh"):
            raise ValueError(f"activation must be 'relu' or 'tanh', got {activation!r}")
        self.filters = [(int(w), int(n)) for w, n in filters]
        self.activation = activation
        self.n_filters = sum(n for _, n in self.filters)
        self.output_dim = projection_dim
        self.char_embedding = nn.Embedding(num_character_ids, char_embedding_dim, padding_idx=0)
        self.convolutions = nn.ModuleList(
            [nn.Conv1d(char_embedding_dim, count, width) for width, count in self.filters]
        )
        self.highway = Highway(self.n_filters, n_highway)
        self.projection: Optional[nn.Linear] = (
            nn.Linear(self.n_filters, projection_dim) if self.n_filters != projection_dim else None
        )
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """bilm-tf's initialisation (elmo-facts §5): bytes U(-1, 1), gate bias -2."""
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
                nn.init.normal_(self.projection.weight, 0.0, math.sqrt(1.0 / self.n_filters))
                self.projection.bias.zero_()

    def forward(self, character_ids: torch.Tensor) -> torch.Tensor:
        """
        ``character_ids``: ``(num_tokens, max_characters_per_token)``, +1-shifted ids.
        Returns ``(num_tokens, output_dim)``.
        """
        # (num_tokens, char_dim, max_chars): Conv1d wants channels first.
        embedded = self.char_embedding(character_ids).transpose(1, 2)
        pooled: List[torch.Tensor] = []
        for conv in self.convolutions:
            # Max over positions, then the activation: bilm-tf's order (the same for monotone
            # activations, and cheaper).
            pooled.append(conv(embedded).max(dim=-1).values)
        token = torch.cat(pooled, dim=-1)
        token = torch.relu(token) if self.activation == "relu" else torch.tanh(token)
        token = self.highway(token)
        if self.projection is not None:
            token = self.projection(token)
        return token
