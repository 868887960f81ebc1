"""
The character encoder with its fused convolution against the encoder with the plain definition
(``nn.Conv1d`` over every position, then max-pooling), values and gradients, in float64 so that
any difference beyond rounding is a bug rather than noise.
"""
import pytest
import torch

from elmo_plugin.data.character_ids import ElmoCharacterIds
from elmo_plugin.modules import character_encoder
from elmo_plugin.modules.character_encoder import CharacterEncoder
from elmo_plugin.modules.execution import character_convolutions


def plain_forward(encoder: CharacterEncoder, ids: torch.Tensor) -> torch.Tensor:
    """The encoder with its convolutions computed by the plain definition (``nn.Conv1d``)."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(
            character_encoder,
            "max_pooled_convolutions",
            lambda ids, convolutions, plan: character_convolutions.reference_max_pooled_convolutions(
                ids, convolutions
            ),
        )
        return encoder(ids)

KOREAN_LONG = "대한민국의아름다운강산"  # 11 syllables: 33 bytes, cut at 30 or 28


def encoder_ids(max_characters: int) -> torch.Tensor:
    tokens = ["the", ".", "a" * 3, "y" * (max_characters - 2), "z" * (max_characters + 10),
              KOREAN_LONG, "영화", "cat", "caterpillars"]
    # Tokens whose last window of some width is the first all-padding one (non-padding length
    # max_characters - width), and one longer: the boundary of "has a padding window".
    tokens += ["x" * (max_characters - width - 2) for width in range(1, 9)]
    ids = torch.tensor([ElmoCharacterIds(max_characters).token_to_ids(t) for t in tokens])
    specials = ElmoCharacterIds(max_characters)
    boundaries = torch.tensor(
        [specials.beginning_of_sentence_ids, specials.end_of_sentence_ids]
    )
    # A masked (all-zero) row too: the encoder must not assume a padding tail.
    return torch.cat([ids, boundaries, torch.zeros(1, max_characters, dtype=torch.long)])


@pytest.mark.parametrize(
    "max_characters, filters, activation, n_highway",
    [
        (50, [[1, 4], [2, 8], [3, 16], [4, 32], [5, 64]], "relu", 2),
        (30, [[1, 4], [2, 4], [3, 8], [4, 8], [5, 16], [6, 16], [7, 32]], "tanh", 0),
    ],
)
def test_the_encoder_equals_its_plain_definition_and_each_token_alone(
    max_characters, filters, activation, n_highway
):
    """The whole encoder (convolutions, activation, highway, projection): values and gradients;
    each convolution's fast path against its reference alone: tests/modules/test_fast_paths.py."""
    torch.manual_seed(0)
    encoder = CharacterEncoder(filters, 4, n_highway, 16, activation).double()
    with torch.no_grad():  # Larger byte vectors than the initialisation, padding row included.
        encoder.char_embedding.weight.normal_()
        encoder.char_embedding.weight[0].zero_()
    ids = encoder_ids(max_characters)
    fused = encoder(ids)
    reference = plain_forward(encoder, ids)
    assert torch.allclose(fused, reference, atol=1e-12, rtol=0)
    weights = torch.randn_like(fused)
    fused_gradients = torch.autograd.grad((fused * weights).sum(), list(encoder.parameters()))
    reference_gradients = torch.autograd.grad(
        (reference * weights).sum(), list(encoder.parameters())
    )
    for (name, _), ours, theirs in zip(
        encoder.named_parameters(), fused_gradients, reference_gradients
    ):
        assert torch.allclose(ours, theirs, atol=1e-10, rtol=0), name
    # Every token alone gives the same vector as in the batch.
    alone = torch.cat([encoder(ids[k : k + 1]) for k in range(ids.size(0))])
    assert torch.allclose(alone, fused, atol=1e-12, rtol=0)


def test_no_tokens_gives_an_empty_batch():
    encoder = CharacterEncoder([[1, 4], [2, 8]], 4, 1, 16)
    assert encoder(torch.zeros(0, 50, dtype=torch.long)).shape == (0, 16)
