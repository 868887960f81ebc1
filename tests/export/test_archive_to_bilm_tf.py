"""
``allennlp elmo-export`` (`export_to_bilm_tf`): a model trained with
``training_configs/bilm.jsonnet`` exported to the bilm-tf files, checked file by file against the
trained model, and the key property: the exported files give the trained biLM's own vectors in
AllenNLP core's ``_ElmoBiLm``, in our ``ElmoEmbedder`` and in ``allennlp elmo``. Also the
command's errors.
"""
import copy
import json
import os
import shutil
from pathlib import Path
from typing import Dict, List, NamedTuple, Tuple

import h5py
import numpy as np
import pytest
import torch
from allennlp.commands import ArgumentParserWithDefaults
from allennlp.commands.train import train_model_from_file
from allennlp.common import Params
from allennlp.common.checks import ConfigurationError
from allennlp.data import Vocabulary
from allennlp.models import Model
from allennlp.models.archival import load_archive
from allennlp.modules.elmo import _ElmoBiLm

from elmo_plugin.commands.elmo import ElmoCommand
from elmo_plugin.data.character_ids import ElmoCharacterIds
from elmo_plugin.elmo_embedder import ElmoEmbedder
from elmo_plugin.model_files.bilm_tf.weights import bilm_tf_arrays
from elmo_plugin.models.elmo_language_model import ElmoLanguageModel
from elmo_plugin.modules.bilm import ElmoBiLm
from tests.helpers import (
    LONG_TOKEN,
    REPO_ROOT,
    config_calling,
    read_hdf5_datasets,
    run_export,
    write_serialization_directory,
)

pytestmark = pytest.mark.usefixtures("single_thread")

SAMPLE = REPO_ROOT / "elmo_plugin" / "sample_corpus"
ATOL = 1e-5

# Sentences for the parity checks: in- and out-of-vocabulary words, Korean, a token longer
# than 48 bytes, varied lengths (padding) and a one-token sentence.
PARITY_SENTENCES: List[List[str]] = [
    "the farmer opened a letter behind the river .".split(),
    ["unseenword", "아버지가방에들어가신다", LONG_TOKEN, "."],
    ["rivers"],
    "some rivers sleep while the tired horse waits .".split(),
]


class Trained(NamedTuple):
    serialization_dir: Path
    model: ElmoLanguageModel  # what train_model_from_file returned
    options: Dict  # the model options of the training config


def small_training_config(tmp_dir: Path, num_train_lines: int = 200) -> Path:
    """bilm.jsonnet on the first lines of the sample corpus, with a tiny LSTM, for one epoch."""
    lines = (SAMPLE / "train.txt").read_text(encoding="utf-8").splitlines()
    heldout = (SAMPLE / "heldout.txt").read_text(encoding="utf-8").splitlines()
    (tmp_dir / "train.txt").write_text("\n".join(lines[:num_train_lines]) + "\n", encoding="utf-8")
    (tmp_dir / "heldout.txt").write_text("\n".join(heldout[:40]) + "\n", encoding="utf-8")
    return config_calling(
        tmp_dir / "config.jsonnet",
        "bilm.jsonnet",
        train_data_path=str(tmp_dir / "train.txt"),
        validation_data_path=str(tmp_dir / "heldout.txt"),
        lstm_dim=16,
        projection_dim=8,
        batch_size=32,
        num_epochs=1,
        num_samples=16,
    )


@pytest.fixture(scope="module")
def trained(tmp_path_factory) -> Trained:
    root = tmp_path_factory.mktemp("bilm_train")
    model = train_model_from_file(
        str(small_training_config(root)),
        str(root / "run"),
        # Dotted keys: a nested {"trainer": {...}} override would replace the whole trainer.
        overrides=json.dumps({"trainer.callbacks": []}),
    )
    serialization_dir = root / "run"
    config = json.loads((serialization_dir / "config.json").read_text())
    assert config["trainer"]["num_epochs"] == 1
    assert sorted(p.name for p in serialization_dir.glob("metrics_epoch_*.json")) == [
        "metrics_epoch_0.json"
    ]
    return Trained(serialization_dir, model.eval(), config["model"]["options"])


@pytest.fixture(scope="module")
def exports(trained, tmp_path_factory) -> Dict[str, Path]:
    out = tmp_path_factory.mktemp("exports")
    result = {
        "directory": out / "from_directory",
        "archive": out / "from_archive",
        "n261": out / "n261",
    }
    assert run_export(trained.serialization_dir, result["directory"]) == 0
    assert run_export(
        trained.serialization_dir / "model.tar.gz", result["archive"], "--include-softmax"
    ) == 0
    assert run_export(trained.serialization_dir, result["n261"], "--n-characters", "261") == 0
    return result


def expected_layout(options: Dict) -> Dict[str, Tuple[int, ...]]:
    """The bilm-tf weight file's datasets and shapes, from the options alone."""
    char_cnn, lstm = options["char_cnn"], options["lstm"]
    char_dim = char_cnn["embedding"]["dim"]
    n_filters = sum(count for _, count in char_cnn["filters"])
    projection, cell = lstm["projection_dim"], lstm["dim"]
    layout: Dict[str, Tuple[int, ...]] = {"char_embed": (261, char_dim)}
    for i, (width, count) in enumerate(char_cnn["filters"]):
        layout[f"CNN/W_cnn_{i}"] = (1, width, char_dim, count)
        layout[f"CNN/b_cnn_{i}"] = (count,)
    for k in range(char_cnn["n_highway"]):
        for name in ("W_carry", "W_transform"):
            layout[f"CNN_high_{k}/{name}"] = (n_filters, n_filters)
        for name in ("b_carry", "b_transform"):
            layout[f"CNN_high_{k}/{name}"] = (n_filters,)
    layout["CNN_proj/W_proj"] = (n_filters, projection)
    layout["CNN_proj/b_proj"] = (projection,)
    for direction in (0, 1):
        for layer in range(lstm["n_layers"]):
            scope = f"RNN_{direction}/RNN/MultiRNNCell/Cell{layer}/LSTMCell"
            layout[f"{scope}/W_0"] = (projection + projection, 4 * cell)
            layout[f"{scope}/B"] = (4 * cell,)
            layout[f"{scope}/W_P_0"] = (cell, projection)
    return layout


def numpy_of(tensor: torch.Tensor) -> np.ndarray:
    return tensor.detach().cpu().numpy()


@pytest.mark.parametrize("source", ["directory", "archive"])
def test_exported_files(trained, exports, source):
    out = exports[source]
    names = {"options.json", "weights.hdf5", "vocabulary.txt"}
    if source == "archive":  # exported with --include-softmax
        names.add("softmax.hdf5")
    assert set(os.listdir(out)) == names

    options = json.loads((out / "options.json").read_text())
    expected_options = copy.deepcopy(trained.options)
    expected_options["char_cnn"]["n_characters"] = 262
    expected_options["bidirectional"] = True
    assert options == expected_options
    assert options["lstm"]["dim"] == 16 and options["lstm"]["projection_dim"] == 8
    assert options["char_cnn"]["filters"] == [[1, 16], [2, 16], [3, 32], [4, 64]]

    # The archive's model is the trained one (best.th of the single epoch).
    archived = load_archive(str(trained.serialization_dir / "model.tar.gz")).model
    for (name, ours), (_, theirs) in zip(
        trained.model.state_dict().items(), archived.state_dict().items()
    ):
        assert torch.equal(ours, theirs), name

    weights = read_hdf5_datasets(out / "weights.hdf5")
    layout = expected_layout(options)
    assert {name: value.shape for name, value in weights.items()} == layout
    assert all(value.dtype == np.float32 for value in weights.values())
    arrays = bilm_tf_arrays(trained.model.bilm.state_dict(), trained.model.bilm_options)
    for name, value in weights.items():
        assert np.array_equal(value, arrays[name]), name
    # A few datasets against the parameters directly (TensorFlow layouts).
    bilm = trained.model.bilm
    encoder = bilm.character_encoder
    assert np.array_equal(weights["char_embed"], numpy_of(encoder.char_embedding.weight[1:]))
    assert np.array_equal(
        weights["CNN/W_cnn_2"], numpy_of(encoder.convolutions[2].weight.permute(2, 1, 0))[None]
    )
    n_filters = 128
    highway = encoder.highway.layers[0]
    assert np.array_equal(weights["CNN_high_0/W_carry"], numpy_of(highway.weight[n_filters:].t()))
    assert np.array_equal(weights["CNN_high_0/b_transform"], numpy_of(highway.bias[:n_filters]))
    assert np.array_equal(weights["CNN_proj/W_proj"], numpy_of(encoder.projection.weight.t()))
    cell = bilm.lstm.backward_layers[1]
    scope = "RNN_1/RNN/MultiRNNCell/Cell1/LSTMCell"
    assert np.array_equal(weights[f"{scope}/W_0"][:8], numpy_of(cell.input_weight))
    assert np.array_equal(weights[f"{scope}/W_0"][8:], numpy_of(cell.recurrent_weight))
    assert np.array_equal(weights[f"{scope}/B"], numpy_of(cell.bias))
    assert np.array_equal(weights[f"{scope}/W_P_0"], numpy_of(cell.projection_weight))

    assert (out / "vocabulary.txt").read_bytes() == (SAMPLE / "vocabulary.txt").read_bytes()

    if source == "archive":
        softmax = read_hdf5_datasets(out / "softmax.hdf5")
        assert set(softmax) == {"softmax/W", "softmax/b"}
        assert np.array_equal(softmax["softmax/W"], numpy_of(trained.model.softmax.softmax_weight))
        assert np.array_equal(softmax["softmax/b"], numpy_of(trained.model.softmax.softmax_bias))
        assert softmax["softmax/W"].shape == (160, 8)


def test_n_characters_261_changes_only_options(exports):
    default = json.loads((exports["directory"] / "options.json").read_text())
    training = json.loads((exports["n261"] / "options.json").read_text())
    assert training["char_cnn"].pop("n_characters") == 261
    assert default["char_cnn"].pop("n_characters") == 262
    assert training == default
    ours = read_hdf5_datasets(exports["n261"] / "weights.hdf5")
    theirs = read_hdf5_datasets(exports["directory"] / "weights.hdf5")
    assert ours.keys() == theirs.keys()
    assert all(np.array_equal(ours[name], theirs[name]) for name in ours)
    # Both forms load (readers accept 261 and 262).
    a = ElmoEmbedder(exports["n261"] / "options.json", exports["n261"] / "weights.hdf5")
    b = ElmoEmbedder(exports["directory"] / "options.json", exports["directory"] / "weights.hdf5")
    assert np.array_equal(a.embed_sentence(["the", "river"]), b.embed_sentence(["the", "river"]))


def test_exported_files_give_the_trained_vectors_everywhere(trained, exports, tmp_path, capsys):
    """
    The key test: the exported files reproduce the trained model's own biLM activations (every
    layer) in AllenNLP core's ``_ElmoBiLm``, in ``ElmoEmbedder`` and in ``allennlp elmo --all``.
    """
    options_file = exports["directory"] / "options.json"
    weight_file = exports["directory"] / "weights.hdf5"
    ids = ElmoCharacterIds(50).batch_to_ids(PARITY_SENTENCES)
    lengths = [len(sentence) for sentence in PARITY_SENTENCES]
    bilm = copy.deepcopy(trained.model.bilm).eval()
    bilm.stateful = False
    with torch.no_grad():
        truth = bilm(ids)
    # (batch, layers, time + 2, dim), boundaries included; zero at padding.
    truth_layers = torch.stack(truth["activations"], dim=1).numpy()
    assert truth_layers.shape[1] == 3 and truth_layers.shape[-1] == 16
    worst: Dict[str, float] = {}

    def record(name: str, ours: np.ndarray, expected: np.ndarray) -> None:
        assert ours.shape == expected.shape, (name, ours.shape, expected.shape)
        diff = float(np.abs(ours.astype(np.float64) - expected).max())
        worst[name] = max(worst.get(name, 0.0), diff)

    # AllenNLP core, stateless: a fresh instance for the batch, then reset states and run each
    # sentence alone (a stateful run would carry the batch's state into them).
    core = _ElmoBiLm(str(options_file), str(weight_file)).eval()
    with torch.no_grad():
        output = core(ids)
        assert torch.equal(output["mask"].bool(), truth["mask"])
        mask = truth["mask"].numpy()[:, None, :, None]
        core_layers = torch.stack(output["activations"], dim=1).numpy()
        record("_ElmoBiLm batch", core_layers * mask, truth_layers * mask)
        for row, sentence in enumerate(PARITY_SENTENCES):
            core._elmo_lstm.reset_states()
            alone = core(ElmoCharacterIds(50).batch_to_ids([sentence]))
            alone_layers = torch.stack(alone["activations"], dim=1).numpy()[0]
            record("_ElmoBiLm one sentence", alone_layers, truth_layers[row, :, : lengths[row] + 2])

    def truth_tokens(row: int) -> np.ndarray:  # without <S> and </S>
        return truth_layers[row, :, 1 : lengths[row] + 1]

    embedder = ElmoEmbedder(options_file, weight_file)
    for row, vectors in enumerate(embedder.embed_batch(PARITY_SENTENCES)):
        record("ElmoEmbedder", vectors, truth_tokens(row))
    for row, sentence in enumerate(PARITY_SENTENCES):
        record("ElmoEmbedder sentence", embedder.embed_sentence(sentence), truth_tokens(row))

    input_file = tmp_path / "sentences.txt"
    input_file.write_text("".join(" ".join(s) + "\n" for s in PARITY_SENTENCES), encoding="utf-8")
    output_file = tmp_path / "elmo.hdf5"
    parser = ArgumentParserWithDefaults(prog="allennlp")
    ElmoCommand().add_subparser(parser.add_subparsers())
    args = parser.parse_args(
        ["elmo", str(input_file), str(output_file), "--all", "--options-file", str(options_file),
         "--weight-file", str(weight_file), "--batch-size", "3"]
    )
    args.func(args)
    assert "Wrote ELMo embeddings (all)" in capsys.readouterr().out
    with h5py.File(output_file, "r") as handle:
        assert set(handle.keys()) == {"0", "1", "2", "3", "sentence_to_index"}
        for row in range(len(PARITY_SENTENCES)):
            record("allennlp elmo --all", handle[str(row)][...], truth_tokens(row))

    summary = ", ".join(f"{name}: {diff:.3g}" for name, diff in worst.items())
    print(f"export parity, max |diff| over all layers: {summary}")
    for name, diff in worst.items():
        assert diff < ATOL, (name, diff)
    # The trained vectors are not trivially zero/saturated.
    assert float(np.abs(truth_layers).max()) > 0.1


def other_model_directory(directory: Path) -> Path:
    """A serialization directory (and model.tar.gz) of a tiny ``basic_classifier``."""
    directory.mkdir()
    model_params = {
        "type": "basic_classifier",
        "text_field_embedder": {
            "token_embedders": {"tokens": {"type": "embedding", "embedding_dim": 2}}
        },
        "seq2vec_encoder": {"type": "boe", "embedding_dim": 2},
    }
    config = {
        "dataset_reader": {"type": "bilm_corpus"},
        "train_data_path": "unused.txt",
        "model": model_params,
        "data_loader": {"batch_size": 2},
        "trainer": {"optimizer": "adam"},
    }
    vocab = Vocabulary()
    vocab.add_tokens_to_namespace(["a", "b"], "tokens")
    vocab.add_tokens_to_namespace(["pos", "neg"], "labels")
    model = Model.from_params(vocab=vocab, params=Params(copy.deepcopy(model_params)))
    return write_serialization_directory(directory, model, config)


def test_export_errors(tmp_path, capsys):
    missing = tmp_path / "no_such_model"
    with pytest.raises(ConfigurationError, match="an elmo_bilm model archive not found"):
        ElmoBiLm.from_model(archive_file=missing)
    assert run_export(missing, tmp_path / "out") == 1
    assert f"elmo-export: error: no model archive or serialization directory at {missing}" in (
        capsys.readouterr().err
    )

    other = other_model_directory(tmp_path / "classifier")
    for path in (other, other / "model.tar.gz"):
        message = "holds a model of type 'basic_classifier', not an elmo_bilm language model"
        with pytest.raises(ConfigurationError, match=message):
            ElmoBiLm.from_model(archive_file=path)
        assert run_export(path, tmp_path / "out") == 1
        assert message in capsys.readouterr().err

    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(ConfigurationError, match="no config.json and no best.th"):
        ElmoBiLm.from_model(archive_file=empty)
    not_an_archive = tmp_path / "model.tar.gz"
    not_an_archive.write_text("not a tar file")
    assert run_export(not_an_archive, tmp_path / "out") == 1
    assert "neither a model archive" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


def test_include_softmax_of_weights_without_a_softmax_is_one_error_and_writes_nothing(trained, tmp_path, capsys):
    run = tmp_path / "run"
    shutil.copytree(trained.serialization_dir, run, ignore=shutil.ignore_patterns("model.tar.gz", "*_state_*.th"))
    weights = torch.load(run / "best.th")
    torch.save({key: value for key, value in weights.items() if not key.startswith("softmax.")}, run / "best.th")
    assert run_export(run, tmp_path / "out", "--include-softmax") == 1
    assert f"elmo-export: error: {run}: the model's weights have no softmax to export" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()
    assert run_export(run, tmp_path / "out") == 0  # the biLM alone is there
