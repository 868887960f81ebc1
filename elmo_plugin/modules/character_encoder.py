"""
The character-level token encoder of ELMo: byte embedding, convolutions, highway, projection;
optionally with a word embedding beside the characters (ELMoForManyLangs models).
"""
import math
from typing import Any, Optional, Sequence, Tuple

import torch
from torch import nn

from elmo_plugin.data.character_ids import NUM_TRAINING_CHARACTER_IDS, PADDING_CHARACTER
from elmo_plugin.model_files.bilm_tf.options import BilmOptions
from elmo_plugin.modules.execution.character_convolutions import CharacterConvolutions, max_pooled_convolutions
from elmo_plugin.modules.execution.linear import linear
from elmo_plugin.modules.execution.plan import ExecutionPlan

# The +1-shifted id of bilm-tf's padding character, which fills every token's ids after its
# end-of-word marker.
PADDING_ID = PADDING_CHARACTER + 1


class Highway(nn.Module):
    """
    bilm-tf's highway layers, ``g * relu(x W_t + b_t) + (1 - g) * x`` with ``g = sigmoid(x W_carry +
    b_carry)`` (TensorFlow's gate, not AllenNLP's), each one ``Linear(F, 2F)``: transform, then gate.
    """

    def __init__(self, dim: int, num_layers: int) -> None:
        super().__init__()
        self.dim = dim
        self.layers = nn.ModuleList([nn.Linear(dim, 2 * dim) for _ in range(num_layers)])

    def forward(self, inputs: torch.Tensor, execution: Optional[ExecutionPlan] = None) -> torch.Tensor:
        x = inputs
        for layer in self.layers:
            transform, gate = linear(x, layer.weight, layer.bias, execution).chunk(2, dim=-1)
            gate = torch.sigmoid(gate)
            x = gate * torch.relu(transform) + (1.0 - gate) * x
        return x


class CharacterEncoder(nn.Module):
    """
    Encodes each token from its character ids into a ``projection_dim`` vector.

    # Parameters

    filters : `Sequence[Tuple[int, int]]`
        ``(width, count)`` of each convolution.
    char_embedding_dim, n_highway, projection_dim : `int`
        Size of each byte embedding, number of highway layers (0 allowed), output size.
    activation : `str`
        ``"relu"`` or ``"tanh"``, applied after max-pooling each convolution over characters.
    num_character_ids : `int`
        Rows of the embedding matrix: 262 (261 bilm-tf ids + the mask row 0, which stays zero).
    padding_id : `int`, optional (default = bilm-tf's padding id, 261 after the +1 shift)
        The id that fills a token's row after its end-of-word id.
    num_word_ids, word_embedding_dim : `int`, optional (default = `0`)
        A word embedding beside the characters (ELMoForManyLangs' ``cnn_50_100``): each row of ids
        then ends with its word id, and the projection reads ``[word vector; highway output]``.
    project : `bool`, optional
        Force the projection layer on or off; by default it exists when its sizes differ.
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
        self.reset_parameters()

    @classmethod
    def from_options(cls, options: BilmOptions, **own_ids: Any) -> "CharacterEncoder":
        """
        The token encoder that ``options`` describe, with random weights; ``own_ids``: the
        arguments of a model with its own character (and word) ids.
        """
        return cls(
            filters=options.filters,
            char_embedding_dim=options.char_embedding_dim,
            n_highway=options.n_highway,
            projection_dim=options.projection_dim,
            activation=options.activation,
            **own_ids,
        )

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

    def split_word_ids(
        self, token_ids: torch.Tensor
    ) -> Tuple[torch.Tensor, Optional[torch.Tensor]]:
        """``(character ids, word ids or None)`` of ``(num_tokens, ids per token)`` rows."""
        if self.word_embedding is None:
            return token_ids, None
        return token_ids[:, :-1], token_ids[:, -1]

    def convolution_weights(self) -> CharacterConvolutions:
        """What the convolutions compute with: the embedding, kernels, biases, padding id."""
        kernels, biases = zip(*((conv.weight, conv.bias) for conv in self.convolutions))
        return CharacterConvolutions(self.char_embedding.weight, kernels, biases, self.padding_id)

    def forward(self, character_ids: torch.Tensor, execution: Optional[ExecutionPlan] = None
                ) -> torch.Tensor:
        """
        ``(num_tokens, output_dim)`` of ``(num_tokens, max_characters_per_token)`` ids (plus the
        word id); ``execution``: how it runs (`ExecutionPlan`; None: plain PyTorch).
        """
        character_ids, word_ids = self.split_word_ids(character_ids)
        # Max-pooled before the activation: bilm-tf's order (the same for monotone ones, cheaper).
        pooled = max_pooled_convolutions(character_ids, self.convolution_weights(), execution)
        return self.encode_pooled(pooled, word_ids, execution)

    def encode_pooled(self, pooled: torch.Tensor, word_ids: Optional[torch.Tensor] = None,
                      execution: Optional[ExecutionPlan] = None) -> torch.Tensor:
        """Activation, highway and projection of the max-pooled convolutions."""
        token = torch.relu(pooled) if self.activation == "relu" else torch.tanh(pooled)
        token = self.highway(token, execution)
        if self.word_embedding is not None:
            # The word vector comes first: the projection's first word_embedding_dim input
            # columns belong to it (ELMoForManyLangs' ConvTokenEmbedder concatenates so).
            token = torch.cat([self.word_embedding(word_ids), token], dim=-1)
        if self.projection is not None:
            token = linear(token, self.projection.weight, self.projection.bias, execution)
        return token
