"""
`AutocastWeightCopies`: frozen weights' bfloat16 copies kept between calls compute the same bits
as autocast's own per-call conversion, follow the weights when they change, and never reach a
state dict or a pickle. (The LSTM layer's use of it: tests/modules/test_projected_lstm_inference.py.)
"""
import copy
import pickle

import torch

from elmo_plugin.modules.autocast_weight_copies import AutocastWeightCopies
from elmo_plugin.modules.character_encoder import CharacterEncoder

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


def test_the_encoders_kept_copies_give_autocasts_own_bits_and_follow_new_weights():
    ids = character_ids()
    trained = encoder(0)  # requires_grad: autocast converts the weights itself on every call
    frozen = encoder(0).requires_grad_(False)
    expected = bfloat16(trained, ids)
    assert expected.dtype == torch.bfloat16
    assert trained.highway._autocast_weight_copies._kept is None  # nothing kept while training
    first = bfloat16(frozen, ids)
    assert torch.equal(first, expected)
    highway_copies = frozen.highway._autocast_weight_copies._kept[1]
    projection_copies = frozen._autocast_weight_copies._kept[1]
    assert [w.dtype for w in highway_copies + projection_copies] == [torch.bfloat16] * 3
    assert torch.equal(highway_copies[1], frozen.highway.layers[1].weight.bfloat16())
    assert torch.equal(bfloat16(frozen, ids), first)
    assert frozen.highway._autocast_weight_copies._kept[1] is highway_copies  # kept, not remade

    # New weights, written in place as load_state_dict does: the copies are made again.
    frozen.load_state_dict(encoder(1).state_dict())
    assert torch.equal(bfloat16(frozen, ids), bfloat16(encoder(1), ids))
    assert frozen.highway._autocast_weight_copies._kept[1] is not highway_copies
    assert "_autocast_weight_copies" not in str(list(frozen.state_dict()))

    # Outside autocast the encoder is float32 and keeps using the float32 weights.
    float32 = frozen(ids)
    assert float32.dtype == torch.float32
    assert torch.equal(float32, encoder(1).requires_grad_(False)(ids))


def test_copies_are_not_kept_for_weights_that_train_and_never_pickled():
    weight = torch.nn.Parameter(torch.randn(3, 4))
    copies = AutocastWeightCopies()
    (narrow,) = copies.get([weight], torch.bfloat16, frozen=False)
    assert narrow.requires_grad and copies._kept is None  # the gradient reaches the weight
    (kept,) = copies.get([weight], torch.bfloat16, frozen=True)
    assert copies.get([weight], torch.bfloat16, frozen=True)[0] is kept
    assert copies.get([weight], torch.float16, frozen=True)[0].dtype == torch.float16
    with torch.no_grad():
        weight.mul_(2)  # an in-place write moves the version
    (again,) = copies.get([weight], torch.float16, frozen=True)
    assert torch.equal(again, weight.detach().half())
    assert pickle.loads(pickle.dumps(copies))._kept is None
    assert copy.deepcopy(copies)._kept is None


def test_transposed_copies_are_contiguous_kept_and_apart_from_the_others():
    weight = torch.randn(3, 4)
    copies = AutocastWeightCopies()
    (transposed,) = copies.get([weight], torch.bfloat16, frozen=True, transposed=True)
    assert transposed.shape == (4, 3) and transposed.is_contiguous()
    assert torch.equal(transposed, weight.t().bfloat16())
    assert copies.get([weight], torch.bfloat16, frozen=True, transposed=True)[0] is transposed
    (plain,) = copies.get([weight], torch.bfloat16, frozen=True)
    assert plain.shape == (3, 4)
    (trained,) = copies.get([torch.nn.Parameter(weight)], torch.bfloat16, frozen=False,
                            transposed=True)
    assert trained.requires_grad and torch.equal(trained, transposed)


def test_modules_pickled_before_the_copies_existed_still_run():
    from elmo_plugin.modules.projected_lstm import ProjectedLstmLayer

    ids = character_ids()
    old_encoder = encoder(0).requires_grad_(False)
    expected = bfloat16(old_encoder, ids)
    layer = ProjectedLstmLayer(4, 8, 3).requires_grad_(False)
    inputs, mask = torch.randn(2, 5, 4), torch.ones(2, 5, dtype=torch.bool)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        expected_lstm = layer(inputs, mask)[0]
    # What an earlier version pickled: the modules without the attributes.
    del old_encoder.__dict__["_autocast_weight_copies"]
    del old_encoder.highway.__dict__["_autocast_weight_copies"]
    del layer.__dict__["_matmul_weight_copies"]
    del layer.__dict__["_few_rows_weight_copies"]  # used: 2 rows a step
    old_encoder, layer = pickle.loads(pickle.dumps((old_encoder, layer)))
    assert torch.equal(bfloat16(old_encoder, ids), expected)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        assert torch.equal(layer(inputs, mask)[0], expected_lstm)
