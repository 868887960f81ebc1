"""
`weight_copies.kept_copy`: frozen weights' bfloat16 copies kept between calls compute the same
bits as autocast's own per-call conversion, follow the weights when they change, go with the
weights, and never reach a state dict or a pickle. (The LSTM layer's use of it:
tests/modules/test_projected_lstm_inference.py.)
"""
import copy
import gc
import pickle

import torch

from elmo_plugin.modules.character_encoder import CharacterEncoder
from elmo_plugin.modules.execution import weight_copies
from elmo_plugin.modules.execution.weight_copies import kept_copy, number_of_kept_copies

FILTERS = [(1, 4), (2, 8), (3, 16)]


def encoder(seed: int) -> CharacterEncoder:
    torch.manual_seed(seed)
    return CharacterEncoder(FILTERS, char_embedding_dim=4, n_highway=2, projection_dim=8)


def character_ids() -> torch.Tensor:
    torch.manual_seed(7)
    ids = torch.full((5, 12), 261)
    ids[:, :4] = torch.randint(1, 259, (5, 4))
    return ids


def bfloat16(module: torch.nn.Module, ids: torch.Tensor) -> torch.Tensor:
    with torch.autocast("cpu", dtype=torch.bfloat16):
        return module(ids)


def linear_weights(module: CharacterEncoder):
    return [layer.weight for layer in module.highway.layers] + [module.projection.weight]


def test_the_encoders_kept_copies_give_autocasts_own_bits_and_follow_new_weights():
    ids = character_ids()
    trained = encoder(0)  # requires_grad: autocast converts the weights itself on every call
    frozen = encoder(0).requires_grad_(False)
    expected = bfloat16(trained, ids)
    assert expected.dtype == torch.bfloat16
    assert [number_of_kept_copies(w) for w in linear_weights(trained)] == [0, 0, 0]
    first = bfloat16(frozen, ids)
    assert torch.equal(first, expected)
    assert [number_of_kept_copies(w) for w in linear_weights(frozen)] == [1, 1, 1]
    kept = [kept_copy(w, torch.bfloat16) for w in linear_weights(frozen)]
    assert torch.equal(kept[1], frozen.highway.layers[1].weight.bfloat16())
    assert torch.equal(bfloat16(frozen, ids), first)
    assert kept_copy(frozen.highway.layers[1].weight, torch.bfloat16) is kept[1]  # not remade

    # New weights, written in place as load_state_dict does: the copies are made again.
    frozen.load_state_dict(encoder(1).state_dict())
    assert torch.equal(bfloat16(frozen, ids), bfloat16(encoder(1), ids))
    assert kept_copy(frozen.highway.layers[1].weight, torch.bfloat16) is not kept[1]
    assert set(frozen.state_dict()) == {name for name, _ in frozen.named_parameters()}

    # Outside autocast the encoder is float32 and keeps using the float32 weights.
    float32 = frozen(ids)
    assert float32.dtype == torch.float32
    assert torch.equal(float32, encoder(1).requires_grad_(False)(ids))


def test_copies_follow_in_place_writes_and_go_with_their_weight():
    weight = torch.nn.Parameter(torch.randn(3, 4), requires_grad=False)
    kept = kept_copy(weight, torch.bfloat16)
    assert kept_copy(weight, torch.bfloat16) is kept
    assert kept_copy(weight, torch.float16).dtype == torch.float16
    assert number_of_kept_copies(weight) == 2
    with torch.no_grad():
        weight.mul_(2)  # an in-place write moves the version
    again = kept_copy(weight, torch.float16)
    assert torch.equal(again, weight.detach().half())
    assert not again.requires_grad
    before = len(weight_copies._KEPT)
    del weight, kept, again
    gc.collect()
    assert len(weight_copies._KEPT) == before - 1


def test_transposed_copies_are_contiguous_kept_and_apart_from_the_others():
    weight = torch.randn(3, 4)
    transposed = kept_copy(weight, torch.bfloat16, transposed=True)
    assert transposed.shape == (4, 3) and transposed.is_contiguous()
    assert torch.equal(transposed, weight.t().bfloat16())
    assert kept_copy(weight, torch.bfloat16, transposed=True) is transposed
    assert kept_copy(weight, torch.bfloat16).shape == (3, 4)


def test_modules_pickle_and_copy_without_their_copies_and_still_run():
    ids = character_ids()
    frozen = encoder(0).requires_grad_(False)
    expected = bfloat16(frozen, ids)  # copies kept now
    plain = pickle.dumps(encoder(0).requires_grad_(False))
    assert len(pickle.dumps(frozen)) == len(plain)  # nothing of the copies pickled
    for other in (pickle.loads(pickle.dumps(frozen)), copy.deepcopy(frozen)):
        assert [number_of_kept_copies(w) for w in linear_weights(other)] == [0, 0, 0]
        assert torch.equal(bfloat16(other, ids), expected)
