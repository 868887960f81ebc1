"""
The forward written for export (`elmo_plugin.modules.execution.scan_recurrence`) against the
definitions it must equal, so that the exported network cannot drift from the eager one: its
recurrence against `lstm_recurrence.reference_recurrence` (clips binding or absent, rows of
length 0, final states), and the whole biLM against `ElmoBiLm.forward` on every configuration
(one to three layers, skip connections on and off, clips binding and none, tanh, no highway, no
character projection, ELMoForManyLangs' character and word ids).
"""
from typing import List

import pytest
import torch

from elmo_plugin.modules.execution.lstm_layer import rows_per_step
from elmo_plugin.modules.execution.lstm_recurrence import reference_recurrence
from elmo_plugin.modules.execution.scan_recurrence import bilm_layers_masked, masked_recurrence
from tests.helpers import VARIED_BATCH, assert_clips_exercised, make_random_bilm

pytestmark = pytest.mark.usefixtures("single_thread")

# Bitwise equality is not expected (the eager loop fuses the bias into its products, and the
# fast convolutions add it after the max), only float32 rounding, over up to 60 steps here.
ATOL = 1e-5


def clip_binding_bilm(seed: int = 1, **arch) -> "torch.nn.Module":
    """
    A random biLM whose two clips both bind on every LSTM layer (cell 1.0, projection 0.5),
    with the recurrent weights halved: at larger recurrent gains float32 itself drifts 1e-5 to
    1e-4 from float64 over 100 tokens (tests/models/test_onnx_export.py measures this model's
    distance), so that no float32 computation could be held to 1e-5 there.
    """
    arch = {"cell_clip": 1.0, "proj_clip": 0.5, **arch}
    bilm = make_random_bilm(seed=seed, **arch)
    with torch.no_grad():
        for layers in (bilm.lstm.forward_layers, bilm.lstm.backward_layers):
            for layer in layers:
                layer.recurrent_weight.mul_(0.5)
    return bilm


@pytest.mark.parametrize("clips", [(None, None), (1.0, 0.5), (0.2, None), (None, 0.1)])
def test_the_masked_recurrence_is_the_reference_recurrence(clips):
    cell_clip, proj_clip = clips
    generator = torch.Generator().manual_seed(3)
    lengths = [9, 9, 6, 3, 1, 0]  # sorted longest first, as the reference takes them
    batch, steps, cell, projection = len(lengths), max(lengths), 12, 5
    gates = torch.randn(steps, batch, 4 * cell, generator=generator) * 2
    h0 = torch.randn(batch, projection, generator=generator)
    c0 = torch.randn(batch, cell, generator=generator)
    recurrent = torch.randn(projection, 4 * cell, generator=generator)
    projection_weight = torch.randn(cell, projection, generator=generator)
    running = torch.arange(steps).unsqueeze(1) < torch.tensor(lengths).unsqueeze(0)

    outputs, final_h, final_c = masked_recurrence(
        gates, running, h0, c0, recurrent, projection_weight, cell_clip, proj_clip
    )
    packed, expected_h, expected_c = reference_recurrence(
        gates[running], h0, c0, recurrent, projection_weight, rows_per_step(lengths),
        cell_clip, proj_clip,
    )
    torch.testing.assert_close(outputs[running], packed, rtol=0, atol=1e-6)
    assert not outputs[~running].any()
    torch.testing.assert_close(final_h, expected_h, rtol=0, atol=1e-6)
    torch.testing.assert_close(final_c, expected_c, rtol=0, atol=1e-6)
    # The clips are reached, so the comparison would see one applied wrong (the row of length 0
    # keeps its initial state, which is not clipped).
    if cell_clip is not None:
        assert float(final_c[:-1].abs().max()) == pytest.approx(cell_clip)
    if proj_clip is not None:
        assert float(packed.abs().max()) == pytest.approx(proj_clip)


def test_the_comparison_can_fail():
    """A recurrence that forgets the cell clip is caught by the same comparison."""
    generator = torch.Generator().manual_seed(3)
    gates = torch.randn(5, 2, 16, generator=generator) * 3
    h0, c0 = torch.zeros(2, 3), torch.zeros(2, 4)
    recurrent = torch.randn(3, 16, generator=generator)
    projection = torch.randn(4, 3, generator=generator)
    running = torch.ones(5, 2, dtype=torch.bool)
    unclipped, _, _ = masked_recurrence(gates, running, h0, c0, recurrent, projection, None, None)
    packed, _, _ = reference_recurrence(gates.reshape(10, 16), h0, c0, recurrent, projection,
                                        [2] * 5, 0.3, None)
    assert float((unclipped.reshape(10, 3) - packed).abs().max()) > 1e-3


def long_batch() -> List[List[str]]:
    words = ["the", "café", "😀", "밥", "Pneumonoultramicroscopicsilicovolcanoconiosis", "."]
    return VARIED_BATCH + [[words[i % len(words)] for i in range(60)], ["x"] * 17]


CONFIGURATIONS = {
    "tiny": {},
    "one_layer": dict(n_layers=1),
    "three_layers_skip": dict(n_layers=3),
    "three_layers_no_skip": dict(n_layers=3, use_skip_connections=False),
    "no_clips": dict(cell_clip=None, proj_clip=None),
    "tanh_no_highway": dict(activation="tanh", n_highway=0),
    # 124 filters and a projection of 124: no character projection, as bilm-tf leaves it out.
    "no_character_projection": dict(projection_dim=124, use_skip_connections=False),
}


@pytest.mark.parametrize("name", sorted(CONFIGURATIONS))
def test_the_export_forward_computes_the_biLM(name):
    bilm = clip_binding_bilm(**CONFIGURATIONS[name])
    ids = bilm.character_ids.batch_to_ids(long_batch())
    with torch.no_grad():
        expected = bilm(ids)
        layers, mask = bilm_layers_masked(bilm, ids)
    assert torch.equal(mask, expected["mask"])
    assert len(layers) == len(expected["activations"]) == bilm.num_layers
    for ours, theirs in zip(layers, expected["activations"]):
        assert ours.shape == theirs.shape
        assert float((ours - theirs).abs().max()) < ATOL
        assert not ours[~mask].any()
    if bilm.options.cell_clip is not None:
        assert_clips_exercised(bilm, ids, min_effect=1e-2)


def test_elmoformanylangs_ids_and_word_embedding(tmp_path):
    test_elmoformanylangs = pytest.importorskip("tests.model_files.test_elmoformanylangs")
    from elmo_plugin.modules.bilm_loading import load_bilm

    directory = test_elmoformanylangs.make_model_directory(tmp_path / "efml", word_dim=6)
    bilm = load_bilm(directory).eval()
    assert bilm.character_encoder.word_embedding is not None
    ids = bilm.character_ids.batch_to_ids([["我", "们", "好"], [], ["<bos>", "x", "y", "z", "w"]])
    with torch.no_grad():
        expected = bilm(ids)
        layers, mask = bilm_layers_masked(bilm, ids)
    assert torch.equal(mask, expected["mask"])
    for ours, theirs in zip(layers, expected["activations"]):
        assert float((ours - theirs).abs().max()) < ATOL


def test_an_empty_batch_and_empty_sentences():
    bilm = make_random_bilm()
    for shape in [(0, 4, 50), (3, 0, 50), (0, 0, 50)]:
        with torch.no_grad():
            layers, mask = bilm_layers_masked(bilm, torch.zeros(shape, dtype=torch.long))
            expected = bilm(torch.zeros(shape, dtype=torch.long))
        assert mask.shape == expected["mask"].shape == (shape[0], shape[1] + 2)
        for ours, theirs in zip(layers, expected["activations"]):
            assert ours.shape == theirs.shape
            if ours.numel():
                assert float((ours - theirs).abs().max()) < ATOL


def test_the_leading_convolutions_are_the_reference():
    """Cut after the longest token, with the padding window's value added back where a token has
    one: the same as every nn.Conv1d over every window, for short and long tokens (a token of 48
    or more bytes has no window of nothing but padding), and an empty batch."""
    from elmo_plugin.modules.execution.character_convolutions import (
        leading_max_pooled_convolutions,
        reference_max_pooled_convolutions,
    )

    bilm = clip_binding_bilm()
    encoder = bilm.character_encoder
    with torch.no_grad():
        # A padding character whose windows beat most others: the added-back value matters.
        encoder.char_embedding.weight[encoder.padding_id].mul_(4.0)
    for batch in (
        [["a", "bb", "café"]],
        [["a", "Pneumonoultramicroscopicsilicovolcanoconiosis-and-then-some-more"]],
        [["x" * 46, "x" * 47, "x" * 48, "y"]],
        [[]],
    ):
        ids = bilm.character_ids.batch_to_ids(batch).reshape(-1, 50)
        with torch.no_grad():
            ours = leading_max_pooled_convolutions(encoder, ids)
            theirs = reference_max_pooled_convolutions(encoder, ids)
        assert ours.shape == theirs.shape
        if ours.numel():
            assert float((ours - theirs).abs().max()) < 1e-5
    # Without the padding windows' value the short tokens would come out different.
    ids = bilm.character_ids.batch_to_ids([["a", "bb"]]).reshape(-1, 50)
    with torch.no_grad():
        cut = torch.cat([conv(encoder.char_embedding(ids[:, :7]).transpose(1, 2)).amax(-1)
                         for conv in encoder.convolutions], -1)
        assert float((cut - reference_max_pooled_convolutions(encoder, ids)).abs().max()) > 1e-3
