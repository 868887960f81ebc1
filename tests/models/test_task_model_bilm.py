"""
``allennlp elmo-export`` of a task model (trained here with the plugin) that has two ELMo
embedders, both fine-tuned: ``--embedder`` picks one, a missing or wrong name is an error
listing those there are, and ``allennlp elmo --model`` of the export gives the layers that the
task model's biLM computes. (Archives trained with AllenNLP's own embedder are exported in
tests/compat/test_allennlp_archives.py.)
"""
from pathlib import Path
from typing import List

import h5py
import numpy as np
import pytest
import torch
from allennlp.commands.train import train_model
from allennlp.common import Params
from allennlp.models.archival import load_archive

from elmo_plugin.data.character_ids import batch_to_ids
from elmo_plugin.models.task_model_bilm import elmo_bilms
from elmo_plugin.modules.bilm import ElmoBiLm
from tests.helpers import FIXTURE_OPTIONS, FIXTURE_WEIGHTS, make_random_bilm_files, run_elmo, run_export

pytestmark = pytest.mark.usefixtures("single_thread")

SENTENCES: List[List[str]] = [
    ["the", "dog", "runs", "."],
    ["a", "big", "cat", "sleeps", "quickly", "."],
    ["small", "house"],
    ["the", "cat", "."],
]
TAGS = {"the": "DET", "a": "DET", "dog": "N", "cat": "N", "house": "N", "runs": "V", "sleeps": "V",
        "big": "A", "small": "A", "quickly": "R", ".": "P"}
NAMES = ["text_field_embedder.token_embedder_elmo", "text_field_embedder.token_embedder_second"]


SECOND_BILM = "second_bilm"


@pytest.fixture(scope="module")
def two_elmo_archive(tmp_path_factory) -> Path:
    """A simple_tagger with two fine-tuned ELMo embedders: the fixture biLM and a random one
    (whose files are in the directory ``SECOND_BILM`` beside the ``run``)."""
    root = tmp_path_factory.mktemp("two_elmo")
    data = root / "train.txt"
    data.write_text(
        "".join(" ".join(f"{w}###{TAGS[w]}" for w in s) + "\n" for s in SENTENCES), encoding="utf-8"
    )
    second = make_random_bilm_files(root / SECOND_BILM, seed=5)

    def elmo(options, weights):
        return {"type": "elmo_token_embedder", "options_file": str(options),
                "weight_file": str(weights), "requires_grad": True, "dropout": 0.0}

    config = {
        "dataset_reader": {"type": "sequence_tagging", "token_indexers": {
            "elmo": {"type": "elmo_characters"}, "second": {"type": "elmo_characters"}}},
        "train_data_path": str(data),
        "model": {
            "type": "simple_tagger",
            "text_field_embedder": {"token_embedders": {
                "elmo": elmo(FIXTURE_OPTIONS, FIXTURE_WEIGHTS),
                "second": elmo(second.options_file, second.weight_file)}},
            "encoder": {"type": "pass_through", "input_dim": 64},
        },
        "data_loader": {"batch_size": 2},
        "trainer": {"num_epochs": 1, "optimizer": {"type": "adam", "lr": 0.05}, "cuda_device": -1},
    }
    train_model(Params(config), str(root / "run"))
    return root / "run" / "model.tar.gz"


def test_several_embedders_and_no_name_is_an_error_listing_them(two_elmo_archive, tmp_path, capsys):
    assert run_export(two_elmo_archive, tmp_path / "out") == 1
    error = capsys.readouterr().err
    assert error.count("\n") == 1
    assert "holds 2 ELMo biLMs; name the one to export with --embedder: " in error
    assert f"{NAMES[0]} (or elmo), {NAMES[1]} (or second)" in error
    assert not (tmp_path / "out").exists()


def test_a_wrong_name_is_an_error_listing_the_names(two_elmo_archive, tmp_path, capsys):
    assert run_export(two_elmo_archive, tmp_path / "out", "--embedder", "third") == 1
    error = capsys.readouterr().err
    assert f"has no ELMo embedder named 'third'; it has: {NAMES[0]} (or elmo), {NAMES[1]} (or second)" in error


@pytest.mark.parametrize("name", ["second", NAMES[1]])
def test_the_named_fine_tuned_bilm_round_trips_through_allennlp_elmo(
    two_elmo_archive, tmp_path, capsys, name
):
    out = tmp_path / "export"
    assert run_export(two_elmo_archive, out, "--embedder", name) == 0
    assert sorted(p.name for p in out.iterdir()) == ["options.json", "weights.hdf5"]
    sentences = tmp_path / "sentences.txt"
    sentences.write_text("".join(" ".join(s) + "\n" for s in SENTENCES), encoding="utf-8")
    vectors = tmp_path / "vectors.hdf5"
    assert run_elmo(sentences, vectors, "--all", "--model", out, model_files=False) == 0
    capsys.readouterr()

    bilm = elmo_bilms(load_archive(str(two_elmo_archive), cuda_device=-1).model)[NAMES[1]].eval()
    with h5py.File(vectors, "r") as handle:
        for index, sentence in enumerate(SENTENCES):
            with torch.no_grad():
                layers = bilm(batch_to_ids([sentence]))["activations"]
            expected = torch.stack([layer[0, 1:-1] for layer in layers]).numpy()
            np.testing.assert_allclose(handle[str(index)][...], expected, rtol=0, atol=1e-5)
    # Fine-tuning moved it away from the files it started from: the export is the tuned biLM.
    files = two_elmo_archive.parent.parent / SECOND_BILM / "bilm"  # see make_random_bilm_files
    started = ElmoBiLm.from_files(files / "options.json", files / "weights.hdf5").eval()
    with torch.no_grad():
        layers = started(batch_to_ids([SENTENCES[1]]))["activations"]
    with h5py.File(vectors, "r") as handle:
        exported = handle["1"][...]
    assert np.abs(torch.stack([layer[0, 1:-1] for layer in layers]).numpy() - exported).max() > 1e-2


def test_the_first_embedder_is_the_fixture_biLM_fine_tuned(two_elmo_archive):
    bilms = elmo_bilms(load_archive(str(two_elmo_archive), cuda_device=-1).model)
    assert list(bilms) == NAMES
    from_file = ElmoBiLm.from_files(FIXTURE_OPTIONS, FIXTURE_WEIGHTS).state_dict()
    tuned = bilms[NAMES[0]].state_dict()
    assert max(float((tuned[k] - v).abs().max()) for k, v in from_file.items() if v.is_floating_point()) > 1e-2


def test_task_model_only_options_are_refused_for_a_language_model_and_back(two_elmo_archive, tmp_path, capsys):
    from tests.helpers import REPO_ROOT

    legacy = REPO_ROOT / "tests" / "fixtures" / "legacy_elmo_bilm" / "model.tar.gz"
    assert run_export(legacy, tmp_path / "a", "--embedder", "elmo") == 1
    assert "--embedder names the ELMo embedder of a task model" in capsys.readouterr().err
    assert run_export(two_elmo_archive, tmp_path / "b", "--include-softmax", "--embedder", "elmo") == 1
    assert "has no language-model softmax" in capsys.readouterr().err
