"""
``from allennlp.commands.elmo import ElmoEmbedder`` (AllenNLP 0.9's module, issue 38): the module
path in a fresh interpreter, 0.9's public names, and 0.9's own tests of the module
(allennlp/tests/commands/elmo_test.py at v0.9.0) run against it, with the differences that
docs/legacy.md's table documents.

References: `elmo_plugin.ElmoEmbedder` (itself checked against the biLM and TensorFlow's
vectors), the TensorFlow biLM's top layers of the golden fixture (stateful), 0.9's constants.
"""
import argparse
import json
import logging
import os
import subprocess
import sys

import h5py
import numpy as np
import pytest
import torch
from allennlp.common.checks import ConfigurationError

from elmo_plugin.elmo_embedder import ElmoEmbedder as PluginEmbedder
from elmo_plugin.legacy import allennlp_09, finder
from tests.helpers import (
    FIXTURE_OPTIONS,
    FIXTURE_WEIGHTS,
    REPO_ROOT,
    make_random_bilm_files,
    write_lines,
)
from tests.test_elmo_embedder import golden_sentences_and_top_layers

pytestmark = pytest.mark.usefixtures("single_thread")

# In this process the module is found through the same finder the .pth file installs (a venv
# made before issue 38 has no .pth yet; the fresh-interpreter test below checks the .pth).
finder.install()
import allennlp.commands.elmo as legacy_module  # noqa: E402
from allennlp.commands.elmo import ElmoEmbedder  # noqa: E402

OPTIONS, WEIGHTS = str(FIXTURE_OPTIONS), str(FIXTURE_WEIGHTS)
SENTENCE = "Michael went to the store to buy some eggs ."


@pytest.fixture(scope="module")
def embedder() -> ElmoEmbedder:
    return ElmoEmbedder(OPTIONS, WEIGHTS, -1, stateful=False)


def test_the_module_path_works_in_a_fresh_interpreter_that_never_imports_the_plugin(tmp_path):
    script = f"""
import sys
heavy = {{'torch', 'allennlp', 'elmo_plugin', 'numpy'}}
started_with = sorted({{m.split('.')[0] for m in sys.modules}} & heavy)
from allennlp.commands.elmo import ElmoEmbedder
import allennlp.commands.elmo, numpy
vectors = ElmoEmbedder({OPTIONS!r}, {WEIGHTS!r}).embed_sentence(["a", "b"])
numpy.save({str(tmp_path / "vectors.npy")!r}, vectors)
print(started_with, allennlp.commands.elmo.__name__, allennlp.commands.elmo.__file__)
"""
    result = subprocess.run(
        [sys.executable, "-c", script],
        cwd=tmp_path,
        env=dict(os.environ, PYTHONPATH=str(REPO_ROOT)),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, (
        result.stderr[-3000:] + "\n(no elmo_plugin_allennlp_commands_elmo.pth in this environment? "
        "`make venv` reinstalls the plugin with it)"
    )
    # Start-up imported nothing heavy: the .pth line only appends a finder.
    assert result.stdout.split() == [
        "[]",
        "allennlp.commands.elmo",
        str(REPO_ROOT / "elmo_plugin" / "legacy" / "allennlp_commands_elmo.py"),
    ]
    expected = PluginEmbedder(OPTIONS, WEIGHTS).embed_sentence(["a", "b"])
    vectors = np.load(tmp_path / "vectors.npy")
    assert vectors.shape == (3, 2, 32) and vectors.dtype == np.float32
    np.testing.assert_array_equal(vectors, expected)
    # The stateless default is said once, on one line.
    notices = [line for line in result.stderr.splitlines() if "stateful=True" in line]
    assert len(notices) == 1


def test_the_finder_answers_only_for_that_module_and_loses_to_a_real_file():
    assert finder.find_spec("allennlp.commands.elmo").origin == finder.SHIM_FILE
    assert finder.find_spec("allennlp.commands.train") is None
    assert finder.find_spec("allennlp.commands.elmo2") is None
    # Appended after the path finder (the .pth's, or install()'s where the environment has no
    # .pth): a real allennlp/commands/elmo.py would be found first. Installed once.
    names = [getattr(entry, "__name__", "") for entry in sys.meta_path]
    ours = [
        index for index, name in enumerate(names)
        if name in ("ElmoPluginAllennlpCommandsElmo", "AllennlpCommandsElmoFinder")
    ]
    finder.install()
    assert len(ours) == 1 and len(sys.meta_path) == len(names)
    assert ours[0] > names.index("PathFinder")


def test_the_pth_line_checks_the_name_and_the_plugin_before_importing_anything():
    with open(REPO_ROOT / "elmo_plugin/legacy/elmo_plugin_allennlp_commands_elmo.pth") as pth:
        lines = [line for line in pth if line.startswith("import")]
    assert len(lines) == 1
    name = "ElmoPluginAllennlpCommandsElmo"
    saved = list(sys.meta_path)
    try:
        sys.meta_path[:] = [entry for entry in saved if getattr(entry, "__name__", "") != name]
        exec(lines[0], {})
        exec(lines[0], {})  # site-packages processed twice (this machine's Python does): once
        added = [entry for entry in sys.meta_path if getattr(entry, "__name__", "") == name]
    finally:
        sys.meta_path[:] = saved
    assert len(added) == 1
    pth_finder = added[0]
    assert pth_finder.find_spec("allennlp.commands.train") is None
    assert pth_finder.find_spec("allennlp.commands.elmo").origin == finder.SHIM_FILE


def test_0_9s_public_names_are_there():
    # The names allennlp/commands/elmo.py defined at v0.9.0, and the helpers it imported.
    defined = {"DEFAULT_OPTIONS_FILE", "DEFAULT_WEIGHT_FILE", "DEFAULT_BATCH_SIZE", "Elmo",
               "ElmoEmbedder", "empty_embedding", "elmo_command", "logger"}
    imported = {"ConfigurationError", "Tqdm", "lazy_groups_of", "Subcommand", "batch_to_ids",
                "remove_sentence_boundaries"}
    assert defined | imported <= set(dir(legacy_module))
    # 0.9's literal values.
    assert legacy_module.DEFAULT_OPTIONS_FILE == (
        "https://allennlp.s3.amazonaws.com/models/elmo/2x4096_512_2048cnn_2xhighway/"
        "elmo_2x4096_512_2048cnn_2xhighway_options.json"
    )
    assert legacy_module.DEFAULT_WEIGHT_FILE == (
        "https://allennlp.s3.amazonaws.com/models/elmo/2x4096_512_2048cnn_2xhighway/"
        "elmo_2x4096_512_2048cnn_2xhighway_weights.hdf5"
    )
    assert legacy_module.DEFAULT_BATCH_SIZE == 64
    assert legacy_module.logger.name == "allennlp.commands.elmo"
    empty = legacy_module.empty_embedding()
    assert empty.shape == (3, 0, 1024) and empty.dtype == np.float64
    # One class, whichever name it was imported by.
    assert ElmoEmbedder is allennlp_09.ElmoEmbedder
    assert issubclass(ElmoEmbedder, PluginEmbedder)
    assert legacy_module.Elmo.__name__ == "ElmoCommand"


def test_positional_arguments_and_the_stateless_notice_once(monkeypatch, caplog):
    monkeypatch.setattr(allennlp_09, "_notice_given", False)
    with caplog.at_level(logging.WARNING, logger="allennlp.commands.elmo"):
        first = ElmoEmbedder(OPTIONS, WEIGHTS, -1)
        ElmoEmbedder(OPTIONS, WEIGHTS, -1)
    notices = [record for record in caplog.records if "stateful=True" in record.getMessage()]
    assert len(notices) == 1
    assert not first.stateful and first.cuda_device == -1
    caplog.clear()
    monkeypatch.setattr(allennlp_09, "_notice_given", False)
    with caplog.at_level(logging.WARNING, logger="allennlp.commands.elmo"):
        ElmoEmbedder(OPTIONS, WEIGHTS, stateful=False)  # a choice made: nothing to say
    assert caplog.records == []


def test_no_files_is_0_9s_default_the_published_original(model_server, cache_dir):
    # ELMO_MODELS_URL: a local server plays AllenNLP's bucket, serving the golden fixture as the
    # published "Original". Both 0.9 spellings of the default load it.
    default = ElmoEmbedder(stateful=False)
    spelled_out = ElmoEmbedder(
        legacy_module.DEFAULT_OPTIONS_FILE, legacy_module.DEFAULT_WEIGHT_FILE, stateful=False
    )
    expected = PluginEmbedder(OPTIONS, WEIGHTS).embed_sentence(SENTENCE.split())
    np.testing.assert_array_equal(default.embed_sentence(SENTENCE.split()), expected)
    np.testing.assert_array_equal(spelled_out.embed_sentence(SENTENCE.split()), expected)


def test_the_plugins_model_argument_is_not_overridden_by_0_9s_default_files(tmp_path):
    files = make_random_bilm_files(tmp_path)
    named = ElmoEmbedder(model=str(files.options_file.parent), stateful=False)
    expected = PluginEmbedder(model=str(files.options_file.parent)).embed_sentence(["a", "b"])
    np.testing.assert_array_equal(named.embed_sentence(["a", "b"]), expected)


def test_published_files_at_allennlps_bucket_are_published_models():
    name = allennlp_09.published_model_name
    assert name(legacy_module.DEFAULT_OPTIONS_FILE, legacy_module.DEFAULT_WEIGHT_FILE) == "original"
    flair_small = (  # how flair's ELMoEmbeddings(model="small") names the published Small
        "https://s3-us-west-2.amazonaws.com/allennlp/models/elmo/2x1024_128_2048cnn_1xhighway/"
        "elmo_2x1024_128_2048cnn_1xhighway_"
    )
    assert name(flair_small + "options.json", flair_small + "weights.hdf5") == "small"
    assert name(legacy_module.DEFAULT_OPTIONS_FILE, flair_small + "weights.hdf5") is None
    assert name(OPTIONS, WEIGHTS) is None


def test_stateful_true_gives_0_9s_results_and_the_default_does_not():
    # 0.9's TestElmoEmbedder.test_embeddings_are_as_expected: TensorFlow's vectors need the state
    # carried across batches of 3.
    sentences, expected = golden_sentences_and_top_layers()
    stateful = ElmoEmbedder(OPTIONS, WEIGHTS, -1, stateful=True)
    embeddings = list(stateful.embed_sentences(sentences, 3))
    assert len(embeddings) == len(sentences)
    for tensor, reference in zip(embeddings, expected):
        np.testing.assert_allclose(tensor[2], reference, rtol=0, atol=2e-6)
    stateless = list(ElmoEmbedder(OPTIONS, WEIGHTS, stateful=False).embed_sentences(sentences, 3))
    assert max(np.abs(e[2] - r).max() for e, r in zip(stateless[3:], expected[3:])) > 1e-3


def test_0_9s_empty_sentence_tests(embedder):
    # test_embed_batch_is_empty_sentence asserted (3, 0, 1024) for this 32-wide model (0.9
    # returned empty_embedding() whatever the model); here the model's own width.
    empty = embedder.embed_sentence([])
    assert empty.shape == (3, 0, 32) and empty.dtype == np.float32
    # test_embed_batch_contains_empty_sentence
    embeddings = list(embedder.embed_sentences(["This is a test".split(), []]))
    assert [e.shape for e in embeddings] == [(3, 4, 32), (3, 0, 32)]


def test_batch_to_embeddings_and_embed_batch_return_0_9s_types(embedder):
    batch = [SENTENCE.split(), ["Hello", "!"]]
    activations, mask = embedder.batch_to_embeddings(batch)
    assert isinstance(activations, torch.Tensor) and activations.shape == (2, 3, 10, 32)
    assert mask.shape == (2, 10) and mask.sum(dim=1).tolist() == [10, 2]
    arrays = embedder.embed_batch(batch)
    assert all(isinstance(array, np.ndarray) for array in arrays)
    np.testing.assert_allclose(arrays[1], activations[1, :, :2].numpy(), rtol=0, atol=0)


def test_the_0_9_lstm_states_that_flair_moves_between_devices():
    stateful = ElmoEmbedder(OPTIONS, WEIGHTS, stateful=True)
    assert stateful.elmo_bilm._elmo_lstm._states == ()
    first = stateful.embed_sentence(SENTENCE.split())
    states = stateful.elmo_bilm._elmo_lstm._states
    assert len(states) == 8  # (h, c) for 2 layers in 2 directions
    # What flair's ELMoEmbeddings.__setstate__ does: the same tensors, moved (here: copied).
    stateful.elmo_bilm._elmo_lstm._states = tuple(state.clone() for state in states)
    after_move = stateful.embed_sentence(SENTENCE.split())
    stateful.reset_states()
    stateful.embed_sentence(SENTENCE.split())
    np.testing.assert_array_equal(stateful.embed_sentence(SENTENCE.split()), after_move)
    assert np.abs(after_move - first).max() > 1e-4


# ----------------------------------------------------------------------------------------------
# 0.9's TestElmoCommand, through elmo_command(args) with the namespace 0.9's parser made.


def zero_nine_arguments(input_file, output_file, layers="all", **flags) -> argparse.Namespace:
    arguments = dict(
        input_file=open(input_file, encoding="utf-8"),  # argparse.FileType('r') in 0.9
        output_file=str(output_file), all=layers == "all", top=layers == "top",
        average=layers == "average", vocab_path=None, options_file=OPTIONS, weight_file=WEIGHTS,
        batch_size=64, file_friendly_logging=False, cuda_device=-1, forget_sentences=False,
        use_sentence_keys=False,
    )
    arguments.update(flags)
    return argparse.Namespace(**arguments)


@pytest.mark.parametrize("layers", ["all", "top", "average"])
def test_0_9s_embedding_works(embedder, tmp_path, layers):
    sentences_path = write_lines(tmp_path / "sentences.txt", [SENTENCE])
    args = zero_nine_arguments(sentences_path, tmp_path / "output.hdf5", layers)
    legacy_module.elmo_command(args)
    args.input_file.close()
    layers_of_sentence = embedder.embed_sentence(SENTENCE.split())
    expected = {"all": layers_of_sentence, "top": layers_of_sentence[2],
                "average": layers_of_sentence.mean(axis=0)}[layers]
    with h5py.File(tmp_path / "output.hdf5", "r") as output:
        assert set(output.keys()) == {"0", "sentence_to_index"}
        np.testing.assert_allclose(output["0"][...], expected, rtol=1e-4, atol=1e-6)
        assert json.loads(output["sentence_to_index"][0]) == {SENTENCE: "0"}


@pytest.mark.parametrize(
    "flags, keys",
    [
        ({}, {"0", "1", "2", "3", "sentence_to_index"}),
        ({"forget_sentences": True}, {"0", "1", "2", "3"}),
    ],
)
def test_0_9s_batch_embedding_works(tmp_path, flags, keys):
    sentences = [
        SENTENCE,
        "Joel rolled down the street on his skateboard .",
        "test / this is a first sentence",
        "Take a look , then , at Tuesday 's elections in New York City , New Jersey and Virginia :",
    ]
    sentences_path = write_lines(tmp_path / "in.txt", sentences)
    args = zero_nine_arguments(sentences_path, tmp_path / "out.hdf5", **flags)
    legacy_module.elmo_command(args)
    args.input_file.close()
    with h5py.File(tmp_path / "out.hdf5", "r") as output:
        assert set(output.keys()) == keys
        for index, sentence in enumerate(sentences):
            assert output[str(index)].shape == (3, len(sentence.split()), 32)
        if "sentence_to_index" in keys:
            mapping = json.loads(output["sentence_to_index"][0])
            assert mapping == {sentence: str(i) for i, sentence in enumerate(sentences)}


def test_0_9s_sentence_keys_and_duplicates(tmp_path):
    sentences = [SENTENCE, "Joel rolled down the street on his skateboard ."]
    args = zero_nine_arguments(
        write_lines(tmp_path / "in.txt", sentences), tmp_path / "keys.hdf5", use_sentence_keys=True
    )
    legacy_module.elmo_command(args)
    args.input_file.close()
    with h5py.File(tmp_path / "keys.hdf5", "r") as output:
        assert set(output.keys()) == set(sentences)
    duplicates = write_lines(tmp_path / "dup.txt", [SENTENCE, SENTENCE])
    args = zero_nine_arguments(duplicates, tmp_path / "dup.hdf5")
    legacy_module.elmo_command(args)
    args.input_file.close()
    with h5py.File(tmp_path / "dup.hdf5", "r") as output:
        assert set(output.keys()) == {"0", "1", "sentence_to_index"}


def test_0_9s_empty_lines_raise_configuration_errors(tmp_path):
    sentences_path = write_lines(tmp_path / "in.txt", ["A", "", "", "B"])
    args = zero_nine_arguments(sentences_path, tmp_path / "out.hdf5")
    with pytest.raises(ConfigurationError):
        legacy_module.elmo_command(args)
    args.input_file.close()
    assert not (tmp_path / "out.hdf5").exists()
