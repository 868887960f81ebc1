"""
Models trained with plain AllenNLP's own ``elmo_token_embedder`` (no plugin; see
`allennlp_reference_models.py`) load with elmo_plugin and predict what they predicted under
AllenNLP, to 1e-5: through ``load_archive``, through ``allennlp predict`` and ``allennlp
evaluate`` on the command line; and the biLM a model fine-tuned goes back to the bilm-tf format
through ``allennlp elmo-export`` and computes under ``allennlp elmo --model`` what it computed in
AllenNLP.

AllenNLP's ELMo LSTM is stateful, the plugin's is not by default (the one documented
difference); the reference is recorded statelessly (see `allennlp_reference_models.py`).
"""
import json
import subprocess
import sys
from pathlib import Path
from typing import Any, Dict, List

import h5py
import numpy as np
import pytest
import torch
from allennlp.models.archival import load_archive
from allennlp.predictors import Predictor

from elmo_plugin.data.character_ids import batch_to_ids
from elmo_plugin.models.task_model_bilm import elmo_bilms
from elmo_plugin.modules.bilm import ElmoBiLm
from tests.compat.conftest import HERE
from tests.helpers import FIXTURE_OPTIONS, FIXTURE_WEIGHTS, REPO_ROOT

pytestmark = pytest.mark.usefixtures("single_thread")

MODELS = ["simple_tagger", "crf_tagger", "projection", "vocab_to_cache", "fine_tuned", "classifier"]
ATOL = 1e-5
BATCH_SIZE = 3  # as allennlp_reference_models.py predicts and evaluates
ELMO_KEY = "text_field_embedder.token_embedder_elmo"


def assert_same_outputs(ours: List[Dict[str, Any]], theirs: List[Dict[str, Any]]) -> None:
    """Every instance's logits (and probabilities) to ATOL, its predicted tags or label exactly."""
    assert len(ours) == len(theirs)
    for mine, reference in zip(ours, theirs):
        # A tagger's outputs (also its tags) run to the longest sentence of their batch.
        length = len(reference["words"]) if "words" in reference else None
        for key in ("logits", "class_probabilities", "probs"):
            if key in reference:
                np.testing.assert_allclose(
                    np.asarray(mine[key], dtype=np.float64)[:length],
                    np.asarray(reference[key], dtype=np.float64)[:length],
                    rtol=0,
                    atol=ATOL,
                    err_msg=key,
                )
        for key in ("tags", "label"):
            if key in reference:
                assert mine[key][:length] == reference[key][:length], key


def archive_of(reference: Dict[str, Any], name: str) -> str:
    return reference["models"][name]["archive"]


def test_the_archives_are_in_allennlps_own_layout(allennlp_reference):
    assert allennlp_reference["plain_allennlp"]
    for name in MODELS:
        keys = allennlp_reference["models"][name]["state_dict_keys"]
        assert any(k.endswith("_elmo._elmo_lstm._token_embedder._char_embedding_weights") for k in keys)
        assert any(k.endswith("_elmo_lstm._elmo_lstm.forward_layer_1.state_linearity.bias") for k in keys)
        assert any(k.endswith("_elmo.scalar_mix_0.scalar_parameters.2") for k in keys)
    assert any(
        k.endswith("_elmo_lstm._word_embedding.weight")
        for k in allennlp_reference["models"]["vocab_to_cache"]["state_dict_keys"]
    )
    assert f"{ELMO_KEY}._projection.weight" in allennlp_reference["models"]["projection"]["state_dict_keys"]


@pytest.mark.parametrize("name", MODELS)
def test_load_archive_predicts_what_allennlp_predicted(allennlp_reference, name):
    archive = load_archive(archive_of(allennlp_reference, name), cuda_device=-1)
    model = archive.model.eval()
    assert any(isinstance(module, ElmoBiLm) for module in model.modules()), "not the plugin's ELMo"
    instances = list(archive.dataset_reader.read(allennlp_reference["models"][name]["data"]))
    predictor = Predictor(model, archive.dataset_reader)
    # In the reference's batches (the layer-normalised mix normalises over a batch).
    outputs = [
        output
        for start in range(0, len(instances), BATCH_SIZE)
        for output in predictor.predict_batch_instance(instances[start : start + BATCH_SIZE])
    ]
    assert_same_outputs(outputs, allennlp_reference["models"][name]["predictions"])


def test_the_fine_tuned_bilm_left_its_file_and_the_frozen_one_did_not(allennlp_reference):
    from_file = ElmoBiLm.from_files(FIXTURE_OPTIONS, FIXTURE_WEIGHTS).state_dict()
    for name, fine_tuned in (("fine_tuned", True), ("simple_tagger", False)):
        model = load_archive(archive_of(allennlp_reference, name), cuda_device=-1).model
        loaded = elmo_bilms(model)[ELMO_KEY].state_dict()
        largest = max(
            float((loaded[key].float() - value.float()).abs().max())
            for key, value in from_file.items()
            if value.is_floating_point()
        )
        if fine_tuned:
            assert largest > 1e-2, name
        else:
            assert largest < 1e-6, name


# ----------------------------------------------------------------- the command line, one process


@pytest.fixture(scope="module")
def command_line(allennlp_reference, tmp_path_factory) -> Dict[str, Any]:
    """
    ``allennlp predict`` and ``allennlp evaluate`` of every archive, then ``allennlp elmo-export``
    of the fine-tuned one and ``allennlp elmo --all --model`` of the export, run by the
    ``allennlp`` entry point in one subprocess from the repository root (where
    ``.allennlp_plugins`` makes AllenNLP import elmo_plugin).
    """
    out = tmp_path_factory.mktemp("allennlp_cli")
    commands: List[List[str]] = []
    for name in MODELS:
        model = allennlp_reference["models"][name]
        commands.append([
            "predict", model["archive"], model["data"], "--output-file", str(out / f"{name}.jsonl"),
            "--use-dataset-reader", "--silent", "--cuda-device", "-1", "--batch-size", str(BATCH_SIZE),
            # The taggers' default predictor (sentence_tagger) loads a spaCy model, which is not
            # installed here; with --use-dataset-reader any predictor runs the model the same way.
            "--predictor", "text_classifier",
        ])
        commands.append([
            "evaluate", model["archive"], model["data"], "--output-file",
            str(out / f"{name}.metrics.json"), "--cuda-device", "-1", "--batch-size", str(BATCH_SIZE),
        ])
    export = out / "fine_tuned_bilm"
    sentences = allennlp_reference["directory"] / "sentences.txt"
    commands.append(["elmo-export", archive_of(allennlp_reference, "fine_tuned"), str(export)])
    commands.append(["elmo", str(sentences), str(out / "vectors.hdf5"), "--all", "--model", str(export)])
    (out / "commands.json").write_text(json.dumps(commands), encoding="utf-8")
    env = {"PYTHONPATH": str(REPO_ROOT), "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    import os

    result = subprocess.run(
        [sys.executable, str(HERE / "run_allennlp_commands.py"), str(out / "commands.json"),
         str(out / "result.json")],
        cwd=REPO_ROOT,
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr[-4000:]
    outcome = json.loads((out / "result.json").read_text(encoding="utf-8"))
    outcome.update(directory=out, export=export, log=result.stderr)
    return outcome


def test_the_command_line_ran_with_the_plugin_and_every_command_succeeded(command_line):
    assert command_line["exit_codes"] == [0] * len(command_line["exit_codes"]), command_line["log"][-4000:]
    assert command_line["elmo_token_embedder"] == (
        "elmo_plugin.modules.token_embedders.elmo_token_embedder.ElmoTokenEmbedder"
    )
    assert Path(command_line["elmo_plugin"]).resolve().is_relative_to(REPO_ROOT)


@pytest.mark.parametrize("name", MODELS)
def test_allennlp_predict_predicts_what_allennlp_predicted(allennlp_reference, command_line, name):
    lines = (command_line["directory"] / f"{name}.jsonl").read_text(encoding="utf-8").splitlines()
    assert_same_outputs([json.loads(line) for line in lines], allennlp_reference["models"][name]["predictions"])


@pytest.mark.parametrize("name", MODELS)
def test_allennlp_evaluate_gives_allennlps_metrics(allennlp_reference, command_line, name):
    metrics = json.loads((command_line["directory"] / f"{name}.metrics.json").read_text(encoding="utf-8"))
    expected = allennlp_reference["models"][name]["metrics"]
    assert expected and set(expected) <= set(metrics)
    for key, value in expected.items():
        assert metrics[key] == pytest.approx(value, abs=ATOL), key


def test_the_exported_fine_tuned_bilm_computes_what_it_computed_in_allennlp(
    allennlp_reference, command_line
):
    assert sorted(p.name for p in command_line["export"].iterdir()) == ["options.json", "weights.hdf5"]
    expected = allennlp_reference["fine_tuned_bilm_layers"]
    with h5py.File(command_line["directory"] / "vectors.hdf5", "r") as handle:
        vectors = [handle[str(index)][...] for index in range(len(expected))]
    for mine, reference in zip(vectors, expected):
        np.testing.assert_allclose(mine, np.asarray(reference), rtol=0, atol=ATOL)
    # And not what the biLM it started from computes: the export is the fine-tuned one.
    sentences = (allennlp_reference["directory"] / "sentences.txt").read_text().splitlines()
    original = ElmoBiLm.from_files(FIXTURE_OPTIONS, FIXTURE_WEIGHTS).eval()
    with torch.no_grad():
        layers = original(batch_to_ids([sentences[0].split()]))["activations"]
    before = torch.stack([layer[0, 1:-1] for layer in layers]).numpy()
    assert np.abs(before - np.asarray(expected[0])).max() > 1e-2
