"""
Reading a bilm-tf training checkpoint without TensorFlow, against the files bilm-tf's own code
wrote (tests/fixtures/bilm_tf_checkpoint/README.md): the weights ``dump_weights`` wrote from it, and
the variables and Adagrad accumulators as TensorFlow's own checkpoint reader read them.
"""
import json
import shutil

import numpy as np
import pytest
import torch
from allennlp.common.checks import ConfigurationError
from allennlp.data import Vocabulary

from elmo_plugin.data.character_ids import batch_to_ids
from elmo_plugin.data.vocabulary import DEFAULT_LM_NAMESPACE
from elmo_plugin.model_files import parameter_names as names
from elmo_plugin.model_files.bilm_tf import checkpoint as checkpoint_module
from elmo_plugin.model_files.bilm_tf.checkpoint import (
    dump_weights_name,
    is_bilm_tf_checkpoint,
    read_bilm_tf_checkpoint,
)
from elmo_plugin.model_files.bilm_tf.weights import read_bilm_tf_weights
from elmo_plugin.models.elmo_language_model import ElmoLanguageModel
from elmo_plugin.modules.bilm import ElmoBiLm
from tests.helpers import FIXTURES, REPO_ROOT, VARIED_BATCH

pytestmark = pytest.mark.usefixtures("single_thread")

CHECKPOINT_DIR = REPO_ROOT / "tests" / "fixtures" / "bilm_tf_checkpoint"
PREFIX = CHECKPOINT_DIR / "model.ckpt-6"
PROJECTION_DIM = 8  # the fixture's lstm.projection_dim
N_FILTERS = 12  # the fixture's filters, 4 + 8


@pytest.fixture(scope="module")
def loaded():
    return read_bilm_tf_checkpoint(CHECKPOINT_DIR)


@pytest.fixture(scope="module")
def reference():
    with np.load(CHECKPOINT_DIR / "reference.npz") as arrays:
        return {name: arrays[name] for name in arrays.files}


def copy_checkpoint(tmp_path, *, vocabulary: bool = True):
    """The fixture's checkpoint in a directory of its own, to change."""
    directory = tmp_path / "save"
    shutil.copytree(CHECKPOINT_DIR, directory)
    if not vocabulary:
        (directory / "vocabulary.txt").unlink()
    return directory


def activations(bilm: ElmoBiLm):
    bilm.eval()  # no dropout
    with torch.no_grad():
        return bilm(batch_to_ids(VARIED_BATCH))["activations"]


# -- the checkpoint and what bilm-tf made of it -----------------------------------------------


def test_checkpoint_loads_to_the_bilm_of_its_dumped_weights(loaded):
    from_checkpoint = ElmoBiLm(loaded.options)
    from_checkpoint.load_state_dict(loaded.bilm_state)
    from_dump = ElmoBiLm(loaded.options)
    from_dump.load_state_dict(read_bilm_tf_weights(CHECKPOINT_DIR / "weights.hdf5", loaded.options))
    for name, value in from_dump.state_dict().items():
        assert torch.equal(from_checkpoint.state_dict()[name], value), name
    ours, theirs = activations(from_checkpoint), activations(from_dump)
    assert len(ours) == loaded.options.num_output_layers
    for layer, (mine, dumped) in enumerate(zip(ours, theirs)):
        assert torch.equal(mine, dumped), f"layer {layer}"
    # The comparison is of a trained model, not of two random ones that happen to agree.
    assert not torch.equal(ours[-1], activations(ElmoBiLm(loaded.options))[-1])


def test_the_directory_finds_the_checkpoint_its_state_file_names_on_another_machine(loaded):
    # The fixture's `checkpoint` file names the checkpoint by the absolute path of a directory that
    # is gone, as published checkpoints do.
    assert "/tmp/" in (CHECKPOINT_DIR / "checkpoint").read_text()
    assert loaded.description == str(PREFIX)
    assert loaded.global_step == 6
    assert loaded.vocabulary == (CHECKPOINT_DIR / "vocabulary.txt").read_text().split()
    assert loaded.vocabulary[:3] == ["<S>", "</S>", "<UNK>"]


def test_softmax_and_adagrad_accumulators_are_tensorflows(loaded, reference):
    weight, bias = loaded.softmax
    assert weight.dtype == bias.dtype == torch.float32
    assert torch.equal(weight, torch.from_numpy(reference["lm/softmax/W"]))
    assert torch.equal(bias, torch.from_numpy(reference["lm/softmax/b"]))
    adagrad = loaded.adagrad
    assert torch.equal(adagrad["softmax.softmax_weight"], torch.from_numpy(reference["lm/softmax/W/Adagrad"]))
    assert torch.equal(adagrad["softmax.softmax_bias"], torch.from_numpy(reference["lm/softmax/b/Adagrad"]))
    assert loaded.global_step == int(reference["global_step"])

    def both(name: str, tf_name: str, convert=lambda tensor: tensor, part=slice(None)):
        """Our variable and accumulator (``part`` of them) against TensorFlow's, converted as
        the weights are."""
        for ours, key in ((loaded.bilm_state[name], tf_name), (adagrad["bilm." + name], tf_name + "/Adagrad")):
            assert torch.equal(ours[part], convert(torch.from_numpy(reference[key]))), key

    both(names.convolution(1, "weight"), "lm/CNN/W_cnn_1", lambda kernel: kernel[0].permute(2, 1, 0))
    both(names.convolution(1, "bias"), "lm/CNN/b_cnn_1")
    # Our highway layer stacks the transform's rows over the carry's, each transposed.
    both(names.highway(0, "weight"), "lm/CNN_high_0/W_carry", lambda matrix: matrix.t(), slice(N_FILTERS, None))
    both(names.highway(0, "bias"), "lm/CNN_high_0/b_transform", part=slice(0, N_FILTERS))
    both(names.projection("weight"), "lm/CNN_proj/W_proj", lambda matrix: matrix.t())
    # RNN_0 is the forward LM; TensorFlow's kernel stacks the input's rows over the recurrent ones.
    kernel = "lm/RNN_0/rnn/multi_rnn_cell/cell_1/lstm_cell/kernel"
    both(names.lstm("forward", 1, "input_weight"), kernel, lambda matrix: matrix[:PROJECTION_DIM])
    both(names.lstm("forward", 1, "recurrent_weight"), kernel, lambda matrix: matrix[PROJECTION_DIM:])
    # Stored without the forget bias (added at run time): no +1 on the bias, nor on its accumulator.
    both(names.lstm("forward", 1, "bias"), "lm/RNN_0/rnn/multi_rnn_cell/cell_1/lstm_cell/bias")
    both(
        names.lstm("backward", 0, "projection_weight"),
        "lm/RNN_1/rnn/multi_rnn_cell/cell_0/lstm_cell/projection/kernel",
    )
    # The mask id's row, made up: zero in the weights, the initial accumulator value 1.0 in Adagrad's.
    both(names.CHARACTER_EMBEDDING, "lm/char_embed", part=slice(1, None))
    assert torch.equal(loaded.bilm_state[names.CHARACTER_EMBEDDING][0], torch.zeros(4))
    assert torch.equal(adagrad["bilm." + names.CHARACTER_EMBEDDING][0], torch.ones(4))
    char_accumulator = reference["lm/char_embed/Adagrad"]
    # The accumulators were trained: some rows (bytes of the corpus) grew, others (bytes it lacks)
    # still hold 1.0, so the comparisons above tell a trained accumulator from a fresh one.
    assert (char_accumulator > 1).any() and (char_accumulator == 1).all(axis=1).any()
    lstm_bias_accumulator = reference["lm/RNN_0/rnn/multi_rnn_cell/cell_1/lstm_cell/bias/Adagrad"]
    assert (lstm_bias_accumulator > 1).any()


def test_adagrad_has_every_parameter_of_the_language_model(loaded):
    vocab = Vocabulary(non_padded_namespaces=[DEFAULT_LM_NAMESPACE])
    vocab.add_tokens_to_namespace(loaded.vocabulary, DEFAULT_LM_NAMESPACE)
    with open(CHECKPOINT_DIR / "options.json", encoding="utf-8") as handle:
        model = ElmoLanguageModel(vocab, json.load(handle), num_samples=8)
    parameters = dict(model.named_parameters())
    assert set(loaded.adagrad) == set(parameters)
    for name, value in loaded.adagrad.items():
        assert value.shape == parameters[name].shape, name
        assert value.dtype == torch.float32 and value.is_contiguous(), name
    # And the checkpoint loads into it, softmax included.
    model.bilm.load_state_dict(loaded.bilm_state)
    model.softmax.softmax_weight.data.copy_(loaded.softmax[0])
    assert torch.equal(model.softmax.softmax_weight, loaded.softmax[0])


def test_dump_weights_names():
    rnn = "lm/RNN_1/rnn/multi_rnn_cell/cell_0/lstm_cell/"
    assert dump_weights_name(rnn + "kernel") == "RNN_1/RNN/MultiRNNCell/Cell0/LSTMCell/W_0"
    assert dump_weights_name(rnn + "bias:0") == "RNN_1/RNN/MultiRNNCell/Cell0/LSTMCell/B"
    assert dump_weights_name(rnn + "projection/kernel") == "RNN_1/RNN/MultiRNNCell/Cell0/LSTMCell/W_P_0"
    assert dump_weights_name("lm/RNN_0/rnn/lstm_cell/kernel") == "RNN_0/RNN/LSTMCell/W_0"  # one layer
    # TensorFlow 1.2's own names, as older checkpoints have them, are already the dumped ones.
    old = "lm/RNN_0/RNN/MultiRNNCell/Cell1/LSTMCell/W_P_0"
    assert dump_weights_name(old) == old[len("lm/"):]
    assert dump_weights_name("lm/CNN_high_0/W_carry") == "CNN_high_0/W_carry"
    assert dump_weights_name("lm/char_embed") == "char_embed"


def test_a_prefix_a_file_and_the_highest_step_without_a_state_file(tmp_path):
    assert read_bilm_tf_checkpoint(PREFIX).description == str(PREFIX)
    assert read_bilm_tf_checkpoint(str(PREFIX) + ".index").description == str(PREFIX)
    directory = copy_checkpoint(tmp_path)
    (directory / "checkpoint").unlink()
    for suffix in (".index", ".data-00000-of-00001"):
        shutil.copy(directory / f"model.ckpt-6{suffix}", directory / f"model.ckpt-12{suffix}")
    assert read_bilm_tf_checkpoint(directory).description == str(directory / "model.ckpt-12")
    (directory / "checkpoint").write_text('model_checkpoint_path: "model.ckpt-6"\n')
    assert read_bilm_tf_checkpoint(directory).description == str(directory / "model.ckpt-6")


def test_is_bilm_tf_checkpoint(tmp_path):
    assert is_bilm_tf_checkpoint(CHECKPOINT_DIR)
    assert is_bilm_tf_checkpoint(PREFIX)
    assert is_bilm_tf_checkpoint(str(PREFIX) + ".index")
    assert not is_bilm_tf_checkpoint(CHECKPOINT_DIR / "model.ckpt-7")
    assert not is_bilm_tf_checkpoint(FIXTURES)  # options.json and weights, no checkpoint
    assert not is_bilm_tf_checkpoint(tmp_path)


def test_no_vocabulary_and_no_adagrad_slots(tmp_path, monkeypatch):
    directory = copy_checkpoint(tmp_path, vocabulary=False)
    read = checkpoint_module.read_checkpoint
    monkeypatch.setattr(
        checkpoint_module,
        "read_checkpoint",
        lambda prefix: {name: value for name, value in read(prefix).items() if not name.endswith("/Adagrad")},
    )
    loaded = read_bilm_tf_checkpoint(directory)
    assert loaded.vocabulary is None and loaded.adagrad is None
    assert loaded.softmax[0].shape == (41, PROJECTION_DIM)


def test_prediction_options_with_262_characters_read_the_same_checkpoint(tmp_path, loaded):
    options = json.loads((CHECKPOINT_DIR / "options.json").read_text())
    options["char_cnn"]["n_characters"] = 262
    options_file = tmp_path / "options.json"
    options_file.write_text(json.dumps(options))
    again = read_bilm_tf_checkpoint(PREFIX, options_file=options_file)
    assert torch.equal(again.bilm_state[names.CHARACTER_EMBEDDING], loaded.bilm_state[names.CHARACTER_EMBEDDING])


# -- what does not fit -------------------------------------------------------------------------


def one_line_error(*args, **kwargs) -> str:
    with pytest.raises(ConfigurationError) as error:
        read_bilm_tf_checkpoint(*args, **kwargs)
    message = str(error.value)
    assert "\n" not in message
    return message


def test_a_missing_prefix_names_its_index(tmp_path):
    message = one_line_error(tmp_path / "model.ckpt-9")
    assert str(tmp_path / "model.ckpt-9.index") in message
    assert str(tmp_path) in one_line_error(tmp_path)  # a directory without any checkpoint


def test_a_state_file_naming_a_missing_checkpoint(tmp_path):
    directory = copy_checkpoint(tmp_path)
    (directory / "checkpoint").write_text('model_checkpoint_path: "/elsewhere/model.ckpt-99"\n')
    message = one_line_error(directory)
    assert str(directory / "checkpoint") in message and "model.ckpt-99" in message and "model.ckpt-6" in message


def test_a_vocabulary_of_another_length_names_the_file(tmp_path):
    directory = copy_checkpoint(tmp_path)
    vocabulary = directory / "vocabulary.txt"
    vocabulary.write_text("\n".join(vocabulary.read_text().split()[:-1]) + "\n")
    for given in (None, vocabulary):  # found beside the checkpoint, or given
        message = one_line_error(directory, vocabulary_file=given)
        assert str(vocabulary) in message and "40 tokens" in message and "41 rows" in message


def test_options_of_another_model_name_the_variable(tmp_path):
    options = json.loads((CHECKPOINT_DIR / "options.json").read_text())
    options["lstm"]["dim"] = 32
    options_file = tmp_path / "options.json"
    options_file.write_text(json.dumps(options))
    message = one_line_error(PREFIX, options_file=options_file)
    assert str(PREFIX) + ".index" in message and str(options_file) in message
    assert "lm/RNN_0/rnn/multi_rnn_cell/cell_0/lstm_cell/kernel" in message and "(16, 128)" in message

    options = json.loads((CHECKPOINT_DIR / "options.json").read_text())
    options["char_cnn"]["filters"].append([3, 4])
    options_file.write_text(json.dumps(options))
    message = one_line_error(PREFIX, options_file=options_file)
    assert "'CNN/W_cnn_2'" in message and str(PREFIX) + ".index" in message

    options = json.loads((CHECKPOINT_DIR / "options.json").read_text())
    options["char_cnn"]["n_highway"] = 0
    options_file.write_text(json.dumps(options))
    message = one_line_error(PREFIX, options_file=options_file)
    assert "lm/CNN_high_0/W_carry" in message and "not part of the model" in message


@pytest.mark.parametrize(
    "change, expected",
    [
        (lambda options: options.pop("char_cnn"), "no 'char_cnn'"),
        (lambda options: options.update(share_embedding_softmax=True), "'share_embedding_softmax'"),
    ],
)
def test_word_embedding_models_are_not_supported(tmp_path, change, expected):
    options = json.loads((CHECKPOINT_DIR / "options.json").read_text())
    change(options)
    options_file = tmp_path / "options.json"
    options_file.write_text(json.dumps(options))
    message = one_line_error(PREFIX, options_file=options_file)
    assert expected in message and "not supported" in message and str(options_file) in message
