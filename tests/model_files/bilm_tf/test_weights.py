"""
Reading bilm-tf weight files and options: clear errors for files that do not fit, exact round
trips for files that do.
"""
import json

import numpy as np
import pytest
import torch
from allennlp.common.checks import ConfigurationError

from elmo_plugin.data.character_ids import ElmoCharacterIds
from elmo_plugin.model_files.bilm_tf.directory import write_bilm_tf_directory
from elmo_plugin.model_files.bilm_tf.options import BilmOptions
from elmo_plugin.model_files.bilm_tf.weights import bilm_tf_arrays
from elmo_plugin.modules.bilm import ElmoBiLm
from tests.helpers import (
    FIXTURE_OPTIONS,
    FIXTURE_WEIGHTS,
    VARIED_BATCH,
    make_random_bilm_files,
    read_hdf5_datasets,
    write_hdf5_datasets,
)

pytestmark = pytest.mark.usefixtures("single_thread")


def fixture_options() -> dict:
    with open(FIXTURE_OPTIONS, encoding="utf-8") as handle:
        return json.load(handle)


def write_options(path, options: dict) -> None:
    with open(path, "w", encoding="utf-8") as handle:
        json.dump(options, handle, indent=2)


def run(bilm: ElmoBiLm):
    ids = ElmoCharacterIds(bilm.options.max_characters_per_token).batch_to_ids(VARIED_BATCH)
    with torch.no_grad():
        return bilm(ids)["activations"]


# -- weight files that do not fit ------------------------------------------------------------


def test_wrong_projection_dim_names_the_dataset_and_both_shapes(tmp_path):
    options = fixture_options()
    options["lstm"]["projection_dim"] = 8  # the file has 16
    options_file = tmp_path / "options.json"
    write_options(options_file, options)
    with pytest.raises(ConfigurationError) as error:
        ElmoBiLm.from_files(options_file, FIXTURE_WEIGHTS)
    message = str(error.value)
    assert "CNN_proj/W_proj" in message
    assert "(124, 16)" in message and "(124, 8)" in message
    assert str(FIXTURE_WEIGHTS) in message and str(options_file) in message


def test_wrong_lstm_dim_names_the_lstm_dataset(tmp_path):
    options = fixture_options()
    options["lstm"]["dim"] = 32  # the file has 64
    options_file = tmp_path / "options.json"
    write_options(options_file, options)
    with pytest.raises(ConfigurationError) as error:
        ElmoBiLm.from_files(options_file, FIXTURE_WEIGHTS)
    message = str(error.value)
    assert "RNN_0/RNN/MultiRNNCell/Cell0/LSTMCell/W_0" in message
    assert "(32, 256)" in message and "(32, 128)" in message


def test_missing_weight_file_names_the_path(tmp_path):
    missing = tmp_path / "no_such_weights.hdf5"
    with pytest.raises(ConfigurationError) as error:
        ElmoBiLm.from_files(FIXTURE_OPTIONS, missing)
    assert str(missing) in str(error.value)


def test_non_hdf5_weight_file(tmp_path):
    bogus = tmp_path / "weights.hdf5"
    bogus.write_text("this is not an HDF5 file\n" * 10)
    with pytest.raises(ConfigurationError) as error:
        ElmoBiLm.from_files(FIXTURE_OPTIONS, bogus)
    assert str(bogus) in str(error.value)


def test_more_lstm_layers_in_the_file_than_in_the_options(tmp_path):
    options = fixture_options()
    options["lstm"]["n_layers"] = 1  # the file has 2
    options_file = tmp_path / "options.json"
    write_options(options_file, options)
    with pytest.raises(ConfigurationError) as error:
        ElmoBiLm.from_files(options_file, FIXTURE_WEIGHTS)
    assert "Cell1" in str(error.value)


def test_more_highway_layers_in_the_file_than_in_the_options(tmp_path):
    options = fixture_options()
    options["char_cnn"]["n_highway"] = 1  # the file has 2
    options_file = tmp_path / "options.json"
    write_options(options_file, options)
    with pytest.raises(ConfigurationError) as error:
        ElmoBiLm.from_files(options_file, FIXTURE_WEIGHTS)
    assert "CNN_high_1" in str(error.value)


def test_fewer_lstm_layers_in_the_file_than_in_the_options(tmp_path):
    options = fixture_options()
    options["lstm"]["n_layers"] = 3  # the file has 2
    options_file = tmp_path / "options.json"
    write_options(options_file, options)
    with pytest.raises(ConfigurationError) as error:
        ElmoBiLm.from_files(options_file, FIXTURE_WEIGHTS)
    assert "Cell2" in str(error.value)


def test_missing_dataset_is_named(tmp_path):
    arrays = read_hdf5_datasets(FIXTURE_WEIGHTS)
    del arrays["CNN/b_cnn_3"]
    weight_file = tmp_path / "weights.hdf5"
    write_hdf5_datasets(weight_file, arrays)
    with pytest.raises(ConfigurationError) as error:
        ElmoBiLm.from_files(FIXTURE_OPTIONS, weight_file)
    assert "CNN/b_cnn_3" in str(error.value)


# -- round trips -------------------------------------------------------------------------------


def test_fixture_weights_round_trip_exactly(tmp_path):
    bilm = ElmoBiLm.from_files(FIXTURE_OPTIONS, FIXTURE_WEIGHTS)
    original = read_hdf5_datasets(FIXTURE_WEIGHTS)
    arrays = bilm_tf_arrays(bilm.state_dict(), bilm.options)
    assert set(arrays) == set(original)
    for name, value in original.items():
        assert arrays[name].dtype == np.float32, name
        assert arrays[name].shape == value.shape, name
        assert np.array_equal(arrays[name], value), name

    # Written to disk and read back: the same datasets, and a biLM with identical outputs.
    written_files = write_bilm_tf_directory(str(tmp_path / "out"), bilm.options, bilm.state_dict())
    weight_file = written_files["weights"]
    written = read_hdf5_datasets(weight_file)
    assert set(written) == set(original)
    for name, value in original.items():
        assert np.array_equal(written[name], value), name
    reloaded = ElmoBiLm.from_files(FIXTURE_OPTIONS, weight_file)
    for a, b in zip(run(bilm), run(reloaded)):
        assert torch.equal(a, b)


def test_random_weights_round_trip_and_char_embedding_mask_row(tmp_path):
    files = make_random_bilm_files(tmp_path, n_layers=1, n_highway=0, seed=5)
    bilm = ElmoBiLm.from_files(files.options_file, files.weight_file)
    # Row 0 (the mask id) is zero; rows 1.. are the file's char_embed.
    embedding = bilm.character_encoder.char_embedding.weight
    assert not embedding[0].any()
    stored = read_hdf5_datasets(files.weight_file)
    assert np.array_equal(embedding[1:].detach().numpy(), stored["char_embed"])
    for name, value in bilm_tf_arrays(bilm.state_dict(), bilm.options).items():
        assert np.array_equal(value, stored[name]), name


# -- options.json --------------------------------------------------------------------------------


def test_invalid_json_options_names_file_and_line(tmp_path):
    options_file = tmp_path / "options.json"
    options_file.write_text('{\n  "lstm": {\n    "dim": 64,\n    oops\n  }\n}\n')
    with pytest.raises(ConfigurationError) as error:
        BilmOptions.from_file(options_file)
    assert f"{options_file}:4" in str(error.value)
    with pytest.raises(ConfigurationError):
        ElmoBiLm.from_files(options_file, FIXTURE_WEIGHTS)


def test_missing_options_file_names_the_path(tmp_path):
    with pytest.raises(ConfigurationError) as error:
        ElmoBiLm.from_files(tmp_path / "nope.json", FIXTURE_WEIGHTS)
    assert "nope.json" in str(error.value)


def test_options_missing_projection_dim_names_the_key(tmp_path):
    options = fixture_options()
    del options["lstm"]["projection_dim"]
    options_file = tmp_path / "options.json"
    write_options(options_file, options)
    with pytest.raises(ConfigurationError) as error:
        ElmoBiLm.from_files(options_file, FIXTURE_WEIGHTS)
    assert "lstm.projection_dim" in str(error.value)
    assert str(options_file) in str(error.value)


def test_options_round_trip_keeps_the_training_recipe(tmp_path):
    options = fixture_options()
    options["n_train_tokens"] = 768648884
    options["unroll_steps"] = 20
    parsed = BilmOptions.from_dict(options)
    assert parsed.projection_dim == 16 and parsed.lstm_dim == 64 and parsed.n_layers == 2
    assert parsed.filters == [(1, 4), (2, 8), (3, 16), (4, 32), (5, 64)]
    assert parsed.n_filters == 124 and parsed.cell_clip == 3 and parsed.use_skip_connections
    path = tmp_path / "options.json"
    parsed.to_file(path)
    again = BilmOptions.from_file(path)
    assert again == parsed
    assert again.extra["n_train_tokens"] == 768648884


@pytest.mark.parametrize("bad", [260, 263])
def test_options_reject_other_n_characters(tmp_path, bad):
    options = fixture_options()
    options["char_cnn"]["n_characters"] = bad
    with pytest.raises(ConfigurationError) as error:
        BilmOptions.from_dict(options)
    assert "n_characters" in str(error.value)


def test_n_characters_261_and_262_give_identical_outputs(tmp_path):
    outputs = []
    for n_characters in (261, 262):
        options = fixture_options()
        options["char_cnn"]["n_characters"] = n_characters
        options_file = tmp_path / f"options_{n_characters}.json"
        write_options(options_file, options)
        bilm = ElmoBiLm.from_files(options_file, FIXTURE_WEIGHTS)
        assert bilm.character_encoder.char_embedding.num_embeddings == 262
        outputs.append(run(bilm))
    for a, b in zip(*outputs):
        assert torch.equal(a, b)
    # ...and both equal the fixture's own options (262).
    for a, b in zip(outputs[0], run(ElmoBiLm.from_files(FIXTURE_OPTIONS, FIXTURE_WEIGHTS))):
        assert torch.equal(a, b)


def test_weights_are_frozen_by_default_and_trainable_on_request(tmp_path):
    frozen = ElmoBiLm.from_files(FIXTURE_OPTIONS, FIXTURE_WEIGHTS)
    assert not any(p.requires_grad for p in frozen.parameters())
    trainable = ElmoBiLm.from_files(FIXTURE_OPTIONS, FIXTURE_WEIGHTS, requires_grad=True)
    assert all(p.requires_grad for p in trainable.parameters())

