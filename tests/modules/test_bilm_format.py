"""
The biLM's state-dict format (`elmo_plugin.model_files.bilm_state`): new state dicts record
``format_version``; archives written before (elmo_plugin 0.1) load to the same vectors.
"""
import json

import numpy as np
import pytest
import torch
from allennlp.common.checks import ConfigurationError
from allennlp.models.archival import load_archive

from elmo_plugin.data.character_ids import batch_to_ids
from elmo_plugin.model_files.bilm_state import FORMAT_VERSION
from elmo_plugin.modules.bilm import ElmoBiLm
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
    bilm = ElmoBiLm.from_model(LEGACY / "model.tar.gz")
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


@pytest.mark.parametrize(
    "arch",
    [
        {},
        # cell == projection: a square projection matrix.
        dict(lstm_dim=16, projection_dim=16),
        # projection == 4 * cell: a square recurrent matrix too.
        dict(lstm_dim=4, projection_dim=16),
    ],
)
def test_unversioned_state_dicts_load_as_they_are(arch):
    # elmo_plugin 0.1's layout is the current one without the record of its version.
    bilm = make_random_bilm(seed=4, **arch)
    state = {key: value for key, value in bilm.state_dict().items() if key != "format_version"}
    loaded = make_random_bilm(seed=9, **arch)
    loaded.load_state_dict(state)
    for name, value in bilm.state_dict().items():
        assert torch.equal(loaded.state_dict()[name], value), name
