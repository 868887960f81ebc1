"""
TF-Hub ELMo modules converted to the bilm-tf layout (`elmo_plugin.model_files.tf_hub`,
``allennlp elmo-export HUB_DIR OUT``), without TensorFlow.

Two kinds of module, both written by TensorFlow (`tf_hub_module_builder.py`) with the real
modules' variable names:

- in the default run, the small modules of ``tests/fixtures/tf_hub_elmo`` (a random biLM with a
  tanh CNN and 20 characters per token, so that what the graph says is read, not assumed; its
  README says how they were made): converted, they must give back the bilm-tf files they were
  built from;
- where TensorFlow is installed (importable here, or a Python that has it: ``$ELMO_PLUGIN_TF_PYTHON``
  or ``build/tf-venv/bin/python``), modules built now from the golden fixture
  (``tests/fixtures/elmo_allennlp``): converted, they must equal the fixture, and the built-in
  checkpoint reader must read what TensorFlow's own reader reads. Skipped, saying so, elsewhere.
"""
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Dict, List, Optional

import numpy as np
import pytest
import torch
from allennlp.common import Params
from allennlp.common.checks import ConfigurationError
from allennlp.modules.token_embedders import TokenEmbedder

from elmo_plugin.elmo_embedder import ElmoEmbedder
from elmo_plugin.model_files.bilm_tf.options import BilmOptions
from elmo_plugin.model_files.bilm_tf.weights import read_bilm_tf_weights
from elmo_plugin.model_files.resolve import describe_model_forms
from elmo_plugin.model_files.tf_hub.checkpoint import (
    TENSORFLOW_EXTRA,
    TensorFlowCheckpoint,
    UnsupportedCheckpointError,
    read_checkpoint,
)
from elmo_plugin.model_files.tf_hub.elmo_module import is_tf_hub_module, read_tf_hub_module
from elmo_plugin.model_files.tf_hub.saved_model_graph import saved_model_nodes
from elmo_plugin.modules.bilm import ElmoBiLm
from tests.helpers import (
    FIXTURE_OPTIONS,
    FIXTURE_WEIGHTS,
    REPO_ROOT,
    VARIED_BATCH,
    make_random_bilm_files,
    read_hdf5_datasets,
    run_export,
)

SMALL = REPO_ROOT / "tests" / "fixtures" / "tf_hub_elmo"
SMALL_MODULES = {"tf1-hub": SMALL / "tf1_hub_module", "tf2": SMALL / "tf2_saved_model"}
BUILDER = REPO_ROOT / "tests" / "model_files" / "tf_hub_module_builder.py"
TF_PYTHON_VARIABLE = "ELMO_PLUGIN_TF_PYTHON"
INSTALL_HINT = "python3 -m venv build/tf-venv && build/tf-venv/bin/pip install tensorflow-cpu==2.21.0 h5py"


# The small fixture's biLM: everything bilm-tf lets a module choose differs from the defaults
# that a converter would assume (tanh, 20 bytes a token), except what no module stores.
SMALL_ARCHITECTURE = dict(
    filters=[[1, 2], [2, 2], [3, 4]], char_embedding_dim=2, n_highway=1, max_characters_per_token=20,
    activation="tanh", lstm_dim=8, projection_dim=4, n_layers=2,
)


def write_small_source(directory: Path = SMALL) -> None:
    """The small fixture's ``options.json`` and ``weights.hdf5`` (the README's first step)."""
    import tempfile

    with tempfile.TemporaryDirectory() as temporary:
        files = make_random_bilm_files(Path(temporary), seed=0, **SMALL_ARCHITECTURE)
        shutil.copy(files.options_file, directory / "options.json")
        shutil.copy(files.weight_file, directory / "weights.hdf5")


def options_of(path: Path) -> Dict:
    return BilmOptions.from_file(path).to_dict()


def assert_same_state(state: Dict[str, torch.Tensor], expected: Dict[str, torch.Tensor]) -> None:
    assert set(state) == set(expected)
    for name, value in expected.items():
        if isinstance(value, torch.Tensor):
            assert torch.equal(state[name], value), name
        else:
            assert state[name] == value, name


# --- the small modules of the fixture: no TensorFlow needed --------------------------------------


def test_the_small_fixture_is_what_its_readme_makes(tmp_path):
    write_small_source(tmp_path)
    assert options_of(tmp_path / "options.json") == options_of(SMALL / "options.json")
    made, kept = read_hdf5_datasets(tmp_path / "weights.hdf5"), read_hdf5_datasets(SMALL / "weights.hdf5")
    assert sorted(made) == sorted(kept) and all(np.array_equal(made[name], kept[name]) for name in kept)


@pytest.mark.parametrize("kind", sorted(SMALL_MODULES))
def test_a_module_converts_to_the_files_it_was_built_from(kind):
    module = read_tf_hub_module(SMALL_MODULES[kind])
    source = BilmOptions.from_file(SMALL / "options.json")
    assert module.options.to_dict() == source.to_dict()
    assert_same_state(module.state, read_bilm_tf_weights(SMALL / "weights.hdf5", source))
    assert "tensorflow" not in sys.modules  # read by the plugin's own reader


def test_the_graph_gives_the_activation_and_the_characters_per_token(tmp_path):
    # The fixture's CNN is tanh over 20 bytes a token, not bilm-tf's relu over 50: read, not
    # assumed, from a TF1 graph and from a TensorFlow 2 function's graph.
    for module in SMALL_MODULES.values():
        notes = read_tf_hub_module(module).notes
        assert not [note for note in notes if note.startswith(("activation", "max_characters_per_token"))]
    names = {node.name: node for node in saved_model_nodes(str(SMALL_MODULES["tf1-hub"]))}
    assert names["bilm/CNN/MaxPool_2"].op == "MaxPool" and names["bilm/CNN/Tanh_2"].op == "Tanh"
    assert names["bilm/CNN/MaxPool_2"].int_list("ksize") == [1, 1, 20 - 3 + 1, 1]
    # A graph without them: bilm-tf's values, and a note saying so.
    module = tmp_path / "module"
    shutil.copytree(SMALL_MODULES["tf1-hub"], module)
    (module / "saved_model.pb").write_bytes(b"")  # a SavedModel with no graph at all
    converted = read_tf_hub_module(module)
    assert (converted.options.activation, converted.options.max_characters_per_token) == ("relu", 50)
    assert any(note.startswith("activation relu: not found in the module's graph") for note in converted.notes)
    # What no module stores is said, as is the layer mix the bilm-tf format has no place for.
    assert any("use_skip_connections true: stored nowhere" in note for note in converted.notes)
    assert any("layer mix" in note and "[0.3333, 0.3333, 0.3333]" in note for note in converted.notes)


def test_the_object_graph_names_a_tensorflow_2_checkpoint():
    checkpoint = TensorFlowCheckpoint(str(SMALL_MODULES["tf2"] / "variables" / "variables"))
    assert all(key.endswith("/.ATTRIBUTES/VARIABLE_VALUE") for key in checkpoint.variable_names().values())
    names = set(checkpoint.variable_names())
    graph_mode = set(read_checkpoint(str(SMALL_MODULES["tf1-hub"] / "variables" / "variables")))
    assert names == graph_mode
    assert "bilm/RNN_1/RNN/MultiRNNCell/Cell1/rnn/lstm_cell/projection/kernel" in names


def test_elmo_export_writes_the_bilm_tf_files(tmp_path, capsys):
    output = tmp_path / "bilm"
    assert run_export(SMALL_MODULES["tf1-hub"], output) == 0
    printed = capsys.readouterr().out
    assert "note: cell_clip 3, proj_clip 3, use_skip_connections true" in printed
    assert f"wrote weights: {output / 'weights.hdf5'}" in printed
    assert options_of(output / "options.json") == options_of(SMALL / "options.json")
    written, source = read_hdf5_datasets(output / "weights.hdf5"), read_hdf5_datasets(SMALL / "weights.hdf5")
    assert sorted(written) == sorted(source)
    for name in source:
        assert np.array_equal(written[name], source[name]), name
    # The exported files embed as the source files do.
    ours = ElmoEmbedder(model=str(output)).embed_batch(VARIED_BATCH)
    theirs = ElmoEmbedder(
        options_file=str(SMALL / "options.json"), weight_file=str(SMALL / "weights.hdf5")
    ).embed_batch(VARIED_BATCH)
    for mine, expected in zip(ours, theirs):
        np.testing.assert_array_equal(mine, expected)


@pytest.mark.parametrize("kind", sorted(SMALL_MODULES))
def test_a_module_is_a_model_wherever_a_model_is_taken(tmp_path, kind):
    # Read directly, a module embeds as the directory it converts to.
    assert run_export(SMALL_MODULES[kind], tmp_path / "bilm") == 0
    converted = str(tmp_path / "bilm")
    expected = ElmoEmbedder(model=converted).embed_batch(VARIED_BATCH)
    for mine, theirs in zip(ElmoEmbedder(model=str(SMALL_MODULES[kind])).embed_batch(VARIED_BATCH), expected):
        np.testing.assert_array_equal(mine, theirs)
    assert_same_state(
        ElmoBiLm.from_model(SMALL_MODULES[kind]).state_dict(), ElmoBiLm.from_model(converted).state_dict()
    )
    embedder = TokenEmbedder.from_params(Params({"type": "elmo_token_embedder", "model": str(SMALL_MODULES[kind])}))
    assert embedder.get_output_dim() == 2 * SMALL_ARCHITECTURE["projection_dim"]
    assert "TF-Hub" in describe_model_forms()


@pytest.mark.slow
def test_elmo_export_goes_on_to_onnx(tmp_path, capsys):
    pytest.importorskip("onnx", reason="--format onnx needs onnx and onnxscript (requirements/dev.txt)")
    assert run_export(SMALL_MODULES["tf1-hub"], tmp_path / "onnx", "--format", "onnx", "--top") == 0
    assert "note: cell_clip 3" in capsys.readouterr().out
    assert (tmp_path / "onnx" / "elmo.onnx").is_file()
    assert options_of(tmp_path / "onnx" / "options.json") == options_of(SMALL / "options.json")
    assert sorted(path.name for path in tmp_path.iterdir()) == ["onnx"]  # no converted files left


def test_elmo_export_refuses_options_that_a_module_cannot_have(tmp_path, capsys):
    assert run_export(SMALL_MODULES["tf1-hub"], tmp_path / "out", "--include-softmax") == 2
    assert "a TF-Hub module holds one biLM and no softmax" in capsys.readouterr().err
    assert run_export(SMALL_MODULES["tf1-hub"], tmp_path / "out", "--top") == 2
    assert "choose the outputs of --format onnx" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


def damaged_copy(tmp_path: Path) -> Path:
    module = tmp_path / "module"
    shutil.copytree(SMALL_MODULES["tf1-hub"], module)
    return module


def test_a_damaged_module_is_one_line_naming_the_file(tmp_path, capsys):
    module = damaged_copy(tmp_path)
    data = module / "variables" / "variables.data-00000-of-00001"
    data.write_bytes(data.read_bytes()[:1000])
    assert run_export(module, tmp_path / "out") == 1
    error = capsys.readouterr().err.strip()
    assert error.count("\n") == 0 and str(data) in error and "is it complete?" in error

    index = module / "variables" / "variables.index"
    index.write_bytes(index.read_bytes()[:-10])
    with pytest.raises(ConfigurationError, match=f"{index}: not a TensorFlow checkpoint index"):
        read_tf_hub_module(module)

    (module / "saved_model.pb").unlink()
    assert not is_tf_hub_module(module)
    with pytest.raises(ConfigurationError, match="is not a TF-Hub module or SavedModel: it needs saved_model.pb"):
        read_tf_hub_module(module)
    assert not (tmp_path / "out").exists()


def test_a_module_that_is_not_a_character_bilm_is_refused(tmp_path, monkeypatch):
    variables = read_checkpoint(str(SMALL_MODULES["tf1-hub"] / "variables" / "variables"))
    words = {name.replace("char_embed", "embedding"): value for name, value in variables.items()}
    monkeypatch.setattr("elmo_plugin.model_files.tf_hub.elmo_module.read_checkpoint", lambda *_, **__: words)
    with pytest.raises(ConfigurationError, match="no variable named .../char_embed: not an ELMo module"):
        read_tf_hub_module(SMALL_MODULES["tf1-hub"])
    extra = dict(variables, **{"bilm/softmax/W": np.zeros((3, 4), np.float32)})
    monkeypatch.setattr("elmo_plugin.model_files.tf_hub.elmo_module.read_checkpoint", lambda *_, **__: extra)
    with pytest.raises(ConfigurationError, match="bilm/softmax/W are not part of a bilm-tf biLM"):
        read_tf_hub_module(SMALL_MODULES["tf1-hub"])


def test_what_only_tensorflow_reads_names_the_extra_where_it_is_absent(monkeypatch):
    def unsupported(self, key):
        raise UnsupportedCheckpointError(f"{self.index_path}: variable {key!r} is partitioned into slices")

    monkeypatch.setattr(TensorFlowCheckpoint, "read", unsupported)
    monkeypatch.setitem(sys.modules, "tensorflow", None)  # import tensorflow: ImportError
    prefix = str(SMALL_MODULES["tf1-hub"] / "variables" / "variables")
    with pytest.raises(ConfigurationError) as error:
        read_checkpoint(prefix)
    message = str(error.value)
    assert "is partitioned into slices, which only TensorFlow reads" in message
    assert message.endswith(f"TensorFlow is not installed: {TENSORFLOW_EXTRA}") and "\n" not in message
    with pytest.raises(UnsupportedCheckpointError):
        read_checkpoint(prefix, reader="builtin")
    with pytest.raises(ConfigurationError, match="reading it with TensorFlow was asked for, and TensorFlow is not"):
        read_checkpoint(prefix, reader="tensorflow")


class _RefuseTensorFlow:
    """An import hook that fails the test when anything imports TensorFlow."""

    def __init__(self) -> None:
        self.attempts: List[str] = []

    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] == "tensorflow":
            self.attempts.append(name)
            raise ImportError("tensorflow is refused by the test")
        return None


def test_converting_never_imports_tensorflow(monkeypatch, tmp_path):
    # Where TensorFlow is installed too: nothing on the way tries to import it.
    hook = _RefuseTensorFlow()
    monkeypatch.setattr(sys, "meta_path", [hook, *sys.meta_path])
    for name in [name for name in sys.modules if name.split(".")[0] == "tensorflow"]:
        monkeypatch.delitem(sys.modules, name)
    for module in SMALL_MODULES.values():
        read_tf_hub_module(module)
    assert run_export(SMALL_MODULES["tf1-hub"], tmp_path / "bilm") == 0
    assert hook.attempts == []


# --- modules built now from the golden fixture, where TensorFlow is installed ---------------------


def tensorflow_python() -> Optional[str]:
    """A Python that imports TensorFlow: this one, ``$ELMO_PLUGIN_TF_PYTHON``, or build/tf-venv's."""
    candidates = [
        sys.executable, os.environ.get(TF_PYTHON_VARIABLE), str(REPO_ROOT / "build" / "tf-venv" / "bin" / "python")
    ]
    for python in candidates:
        if python and os.path.isfile(python):
            found = subprocess.run(
                [python, "-c", "import tensorflow, h5py"], capture_output=True, timeout=300,
                env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"),
            )
            if found.returncode == 0:
                return python
    return None


@pytest.fixture(scope="module")
def tf_python() -> str:
    python = tensorflow_python()
    if python is None:
        pytest.skip(
            f"TensorFlow is not installed (not importable here, no ${TF_PYTHON_VARIABLE}, no "
            f"build/tf-venv): the modules cannot be built. To run this test: {INSTALL_HINT}"
        )
    return python


def build_module(python: str, output: Path, kind: str) -> Path:
    subprocess.run(
        [python, str(BUILDER), str(FIXTURE_OPTIONS), str(FIXTURE_WEIGHTS), str(output), "--format", kind,
         "--dump-variables", str(output) + ".npz"],
        check=True, capture_output=True, timeout=600, env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"),
    )
    return output


@pytest.mark.parametrize("kind", ["tf1-hub", "tf2"])
def test_a_module_built_from_the_golden_fixture_converts_to_the_fixture(tf_python, tmp_path, kind):
    module = build_module(tf_python, tmp_path / "module", kind)
    # The built-in reader reads every variable as TensorFlow's own reader does.
    theirs = np.load(str(module) + ".npz")
    checkpoint = TensorFlowCheckpoint(str(module / "variables" / "variables"))
    for name, key in checkpoint.variable_names().items():
        ours = checkpoint.read(key)
        assert ours.dtype == theirs[key].dtype and np.array_equal(ours, theirs[key]), name
    assert len(checkpoint.variable_names()) == len(theirs.files)

    output = tmp_path / "bilm"
    assert run_export(module, output) == 0
    assert options_of(output / "options.json") == options_of(FIXTURE_OPTIONS)
    written, fixture = read_hdf5_datasets(output / "weights.hdf5"), read_hdf5_datasets(FIXTURE_WEIGHTS)
    assert sorted(written) == sorted(fixture)
    for name in fixture:
        assert np.array_equal(written[name], fixture[name]), name


def test_tensorflow_reads_the_checkpoint_where_it_is_importable(tf_python, tmp_path):
    if tf_python != sys.executable:
        pytest.skip("TensorFlow is installed in another Python, not importable in this one")
    module = build_module(tf_python, tmp_path / "module", "tf1-hub")
    prefix = str(module / "variables" / "variables")
    builtin, tensorflow = read_checkpoint(prefix, reader="builtin"), read_checkpoint(prefix, reader="tensorflow")
    assert sorted(builtin) == sorted(tensorflow)
    for name in builtin:
        assert np.array_equal(builtin[name], tensorflow[name]), name
