"""
The biLM's state-dict format: new state dicts record ``format_version``; archives written before
(elmo_plugin 0.1) load to the same vectors, converted explicitly rather than by guessing from
the shapes of single matrices.
"""
import json

import numpy as np
import pytest
import torch
from allennlp.common.checks import ConfigurationError
from allennlp.models.archival import load_archive

from elmo_plugin.data.character_ids import batch_to_ids
from elmo_plugin.modules.bilm import FORMAT_VERSION, ElmoBiLm
from tests.helpers import REPO_ROOT, make_random_bilm

LEGACY = REPO_ROOT / "tests" / "fixtures" / "legacy_elmo_bilm"


def legacy_case():
    sentences = json.loads((LEGACY / "sentences.json").read_text(encoding="utf-8"))["sentences"]
    expected = np.load(LEGACY / "expected_activations.npz")
    return sentences, expected["activations"], expected["mask"]


def activations(bilm: ElmoBiLm, sentences) -> np.ndarray:
    bilm.eval()
    with torch.no_grad():
        output = bilm(batch_to_ids(sentences, bilm.options.max_characters_per_token))
    return torch.stack(output["activations"], dim=1).numpy()


def test_an_archive_of_elmo_plugin_0_1_gives_the_same_vectors():
    sentences, expected, mask = legacy_case()
    bilm = ElmoBiLm.from_archive(LEGACY / "model.tar.gz")
    assert int(bilm.format_version) == FORMAT_VERSION
    # Same vectors up to float rounding: the fixture was computed on another CPU (vector units
    # change summation order), and a wrong layout would be off by O(1), not 1e-6.
    np.testing.assert_allclose(activations(bilm, sentences), expected, rtol=1e-5, atol=1e-5)
    # Also through AllenNLP's own archive loading (as `allennlp evaluate` and `-r` do).
    model = load_archive(str(LEGACY / "model.tar.gz")).model
    np.testing.assert_allclose(activations(model.bilm, sentences), expected, rtol=1e-5, atol=1e-5)


def test_new_state_dicts_record_the_format_version():
    state = make_random_bilm().state_dict()
    assert int(state["format_version"]) == FORMAT_VERSION
    newer = dict(state, format_version=torch.tensor(FORMAT_VERSION + 1))
    with pytest.raises(ConfigurationError, match="newer than this elmo_plugin reads"):
        make_random_bilm().load_state_dict(newer)


def out_in_layout(state):
    """An unversioned state dict in the (out, in) layout of archives before commit 56023b8."""
    old = {key: value for key, value in state.items() if key != "format_version"}
    for key in old:
        if key.endswith(("input_weight", "recurrent_weight", "projection_weight")):
            old[key] = old[key].t().contiguous()
    return old


def test_unversioned_out_in_matrices_are_converted_even_when_the_projection_is_square():
    # cell == projection: the projection matrix has the same shape in both layouts, the case a
    # matrix-by-matrix guess from shapes would load untransposed without an error.
    bilm = make_random_bilm(seed=4, lstm_dim=16, projection_dim=16)
    assert bilm.lstm.forward_layers[0].projection_weight.shape == (16, 16)
    loaded = make_random_bilm(seed=9, lstm_dim=16, projection_dim=16)
    loaded.load_state_dict(out_in_layout(bilm.state_dict()))
    for name, value in bilm.state_dict().items():
        assert torch.equal(loaded.state_dict()[name], value), name


def test_unversioned_in_out_matrices_load_as_they_are():
    bilm = make_random_bilm(seed=4)
    state = {key: value for key, value in bilm.state_dict().items() if key != "format_version"}
    loaded = make_random_bilm(seed=9)
    loaded.load_state_dict(state)
    for name, value in bilm.state_dict().items():
        assert torch.equal(loaded.state_dict()[name], value), name


def test_an_unversioned_layer_whose_layout_cannot_be_told_is_an_error():
    # projection == 4 * cell: the recurrent matrix is square too.
    bilm = make_random_bilm(lstm_dim=4, projection_dim=16)
    state = {key: value for key, value in bilm.state_dict().items() if key != "format_version"}
    with pytest.raises(ConfigurationError, match="square"):
        make_random_bilm(lstm_dim=4, projection_dim=16).load_state_dict(state)
