"""
The forward written for export (`elmo_plugin.export.scan_forward`) against the biLM it must
equal, so that the exported network cannot drift from the eager one: the whole biLM against
`ElmoBiLm.forward` on every configuration (one to three layers, skip connections on and off,
clips binding and none, tanh, no highway, no character projection, ELMoForManyLangs' character
and word ids). Its recurrence and convolutions against their plain definitions:
tests/modules/test_fast_paths.py.
"""
from typing import List

import pytest
import torch

from elmo_plugin.export.scan_forward import bilm_layers_masked
from elmo_plugin.modules.bilm import ElmoBiLm
from tests.helpers import VARIED_BATCH, assert_clips_exercised, make_random_bilm

pytestmark = pytest.mark.usefixtures("single_thread")

# Bitwise equality is not expected (the eager loop fuses the bias into its products, and the
# fast convolutions add it after the max), only float32 rounding, over up to 60 steps here.
ATOL = 1e-5


def clip_binding_bilm(seed: int = 1, **arch) -> "torch.nn.Module":
    """
    A random biLM whose two clips both bind on every LSTM layer (cell 1.0, projection 0.5),
    with the recurrent weights halved: at larger recurrent gains float32 itself drifts 1e-5 to
    1e-4 from float64 over 100 tokens (tests/export/test_onnx_export.py measures this model's
    distance), so that no float32 computation could be held to 1e-5 there.
    """
    arch = {"cell_clip": 1.0, "proj_clip": 0.5, **arch}
    bilm = make_random_bilm(seed=seed, **arch)
    with torch.no_grad():
        for layers in (bilm.lstm.forward_layers, bilm.lstm.backward_layers):
            for layer in layers:
                layer.recurrent_weight.mul_(0.5)
    return bilm


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

    directory = test_elmoformanylangs.make_model_directory(tmp_path / "efml", word_dim=6)
    bilm = ElmoBiLm.from_model(directory).eval()
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
