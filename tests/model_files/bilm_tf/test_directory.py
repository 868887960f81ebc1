"""
`write_bilm_tf_directory`: a byte-exact round trip of the golden fixture's weights, and the
directory written as a set (an earlier export replaced whole, nothing foreign ever removed, no
mixed set after a failure).
"""
import json
import os
from pathlib import Path

import numpy as np
import pytest
from allennlp.common.checks import ConfigurationError

from elmo_plugin.model_files.bilm_tf.directory import write_bilm_tf_directory
from elmo_plugin.modules.bilm import ElmoBiLm
from tests.helpers import FIXTURE_OPTIONS, FIXTURE_WEIGHTS, read_hdf5_datasets

VOCABULARY = ["<S>", "</S>", "<UNK>", "the", "."]


@pytest.fixture(scope="module")
def fixture_bilm() -> ElmoBiLm:
    return ElmoBiLm.from_files(FIXTURE_OPTIONS, FIXTURE_WEIGHTS)


def write(directory: Path, bilm: ElmoBiLm, **kwargs):
    return write_bilm_tf_directory(
        str(directory), bilm.options, bilm.state_dict(), VOCABULARY, **kwargs
    )


def test_round_trip_of_the_golden_fixture_weights(tmp_path, fixture_bilm):
    paths = write(tmp_path / "export", fixture_bilm)
    ours = read_hdf5_datasets(Path(paths["weights"]))
    golden = read_hdf5_datasets(FIXTURE_WEIGHTS)
    assert sorted(ours) == sorted(golden)
    for name, value in golden.items():
        assert ours[name].shape == value.shape, name
        assert ours[name].dtype == value.dtype, name
        assert np.array_equal(ours[name], value), name
    fixture_options = json.loads(FIXTURE_OPTIONS.read_text())
    options = json.loads(Path(paths["options"]).read_text())
    assert options["char_cnn"] == {**fixture_options["char_cnn"], "n_characters": 262}
    assert options["lstm"] == fixture_options["lstm"]
    assert Path(paths["vocabulary"]).read_text(encoding="utf-8") == "\n".join(VOCABULARY) + "\n"
    assert "softmax" not in paths
    assert sorted(os.listdir(tmp_path / "export")) == ["options.json", "vocabulary.txt", "weights.hdf5"]


def test_a_new_export_replaces_an_old_one_whole(tmp_path, fixture_bilm):
    import torch

    out = tmp_path / "export"
    softmax = (torch.ones(5, 16), torch.zeros(5))
    first = write(out, fixture_bilm, softmax=softmax)
    assert (out / "softmax.hdf5").is_file() and "softmax" in first
    # Exported again without the softmax: no stale softmax.hdf5 of the first model stays behind.
    write(out, fixture_bilm)
    assert sorted(os.listdir(out)) == ["options.json", "vocabulary.txt", "weights.hdf5"]
    # No temporary directories left next to it.
    assert sorted(os.listdir(tmp_path)) == ["export"]


def test_a_failed_export_leaves_the_old_one_as_it_was(tmp_path, fixture_bilm, monkeypatch):
    out = tmp_path / "export"
    write(out, fixture_bilm)
    before = {name: (out / name).read_bytes() for name in os.listdir(out)}
    state = dict(fixture_bilm.state_dict())
    del state["lstm.backward_layers.1.bias"]  # the weights file fails half-way through
    with pytest.raises(KeyError):
        write_bilm_tf_directory(str(out), fixture_bilm.options, state, ["<S>", "</S>", "<UNK>"])
    assert {name: (out / name).read_bytes() for name in os.listdir(out)} == before
    assert sorted(os.listdir(tmp_path)) == ["export"]


def test_never_removes_files_that_are_not_an_export(tmp_path, fixture_bilm):
    out = tmp_path / "mine"
    out.mkdir()
    (out / "notes.txt").write_text("keep me")
    with pytest.raises(ConfigurationError, match=r"holds other files than an earlier output \(notes.txt\)"):
        write(out, fixture_bilm)
    assert os.listdir(out) == ["notes.txt"]
    a_file = tmp_path / "a_file"
    a_file.write_text("x")
    with pytest.raises(ConfigurationError, match="exists and is not a directory"):
        write(a_file, fixture_bilm)
    assert a_file.read_text() == "x"
