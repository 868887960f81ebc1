"""
"A config of your own" (task_common.libsonnet's header, docs/tasks.md's block marked
``<!-- config-of-your-own -->``): as written there with the repository's path filled in, it
evaluates from another directory with nothing but ``model`` for the biLM (its width is read from
the model), and trains; an ``output_dim`` that is not the model's is one error naming both numbers
and the model, before anything is created on disk.
"""
import json
import os
import re
import shutil
from pathlib import Path

import _jsonnet
import pytest
from allennlp.commands.train import train_model_from_file
from allennlp.common import Params
from allennlp.common.checks import ConfigurationError

from elmo_plugin.modules.bilm import ElmoBiLm
from elmo_plugin.training.config_functions import elmo_output_dim
from tests.helpers import FIXTURE_OPTIONS, FIXTURE_WEIGHTS, FIXTURES, REPO_ROOT

pytestmark = pytest.mark.usefixtures("single_thread")

TASK_COMMON = REPO_ROOT / "training_configs" / "tasks" / "task_common.libsonnet"
NER = REPO_ROOT / "training_configs" / "tasks" / "ner_wikiann.libsonnet"
# The golden fixture's biLM: 2 x projection_dim 16.
FIXTURE_WIDTH = ElmoBiLm.from_files(FIXTURE_OPTIONS, FIXTURE_WEIGHTS).get_output_dim()
WIKIANN = "EU\tB-ORG\nrejects\tO\nGerman\tB-MISC\ncall\tO\n\nPeter\tB-PER\nBlackburn\tI-PER\n\n"


def header_example() -> str:
    header = TASK_COMMON.read_text(encoding="utf-8").split("\nlocal ", 1)[0]
    match = re.search(r"\n//   (\(import .*?\))\n(?!//   )", header, flags=re.S)
    assert match, "no example in task_common.libsonnet's header"
    return "\n".join(line[len("//   "):] if line.startswith("//   ") else line
                     for line in match.group(1).split("\n"))


def readme_block(marker: str) -> str:
    """The fenced block (any language) after ``<!-- marker -->`` in docs/tasks.md."""
    text = (REPO_ROOT / "docs" / "tasks.md").read_text(encoding="utf-8")
    match = re.search(rf"<!-- {marker} -->\s*\n```\w*\n(.*?)\n```", text, flags=re.S)
    assert match, f"no block marked <!-- {marker} --> in docs/tasks.md"
    return match.group(1)


def exported_bilm(directory: Path) -> Path:
    """A biLM directory as ``allennlp elmo-export`` writes one: the golden fixture's files."""
    directory.mkdir(parents=True)
    shutil.copy(FIXTURE_OPTIONS, directory / "options.json")
    shutil.copy(FIXTURE_WEIGHTS, directory / "weights.hdf5")
    return directory


def test_the_fixture_width_is_what_the_options_say():
    options = json.loads(FIXTURE_OPTIONS.read_text())
    assert FIXTURE_WIDTH == 2 * options["lstm"]["projection_dim"] == 32


def test_the_header_example_evaluates_from_any_directory(tmp_path, monkeypatch):
    example = header_example().replace("/path/to/elmo_plugin", str(REPO_ROOT))
    assert "output_dim" not in example
    elsewhere = tmp_path / "somewhere" / "else"
    elsewhere.mkdir(parents=True)
    (elsewhere / "my_ner.jsonnet").write_text(example + "\n", encoding="utf-8")
    exported_bilm(tmp_path / "runs" / "my_bilm" / "bilm")
    monkeypatch.chdir(tmp_path)
    params = Params.from_file("somewhere/else/my_ner.jsonnet").as_dict(quiet=True)
    assert params["model"]["text_field_embedder"]["token_embedders"]["elmo"] == {
        "type": "elmo_token_embedder",
        "model": "runs/my_bilm/bilm",
        "do_layer_norm": False,
        "dropout": 0.5,
    }
    assert params["dataset_reader"]["token_indexers"]["elmo"]["max_characters_per_token"] == 50
    assert params["model"]["encoder"]["input_size"] == 100 + 64 + FIXTURE_WIDTH
    # The defaults that are paths stay those of the repository, whatever the directory.
    assert params["train_data_path"] == os.path.normpath(
        REPO_ROOT / ".." / "shared" / "data" / "en" / "ner" / "wikiann" / "train.txt"
    )


def test_the_readme_block_trains_as_printed(tmp_path, monkeypatch):
    text = readme_block("config-of-your-own")
    assert "output_dim" not in text
    config = tmp_path / "experiments" / "my_ner.jsonnet"
    config.parent.mkdir()
    config.write_text(text.replace("/path/to/elmo_plugin", str(REPO_ROOT)), encoding="utf-8")
    exported_bilm(tmp_path / "runs" / "small" / "bilm")
    data = tmp_path / "data"
    data.mkdir()
    (data / "tiny.txt").write_text(WIKIANN, encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    tiny = str(data / "tiny.txt")
    train_model_from_file(
        str(config),
        "runs/my_ner",
        overrides=json.dumps({
            "train_data_path": tiny, "validation_data_path": tiny, "test_data_path": tiny,
            "trainer.num_epochs": 1,
        }),
    )
    trained = json.loads((tmp_path / "runs" / "my_ner" / "config.json").read_text())
    assert trained["model"]["encoder"]["input_size"] == 100 + 64 + FIXTURE_WIDTH
    assert (tmp_path / "runs" / "my_ner" / "model.tar.gz").is_file()


def test_a_published_model_gives_its_width_without_a_download(tmp_path, cache_dir):
    (tmp_path / "c.jsonnet").write_text(
        f'(import "{NER}")(use_elmo=true, elmo={{model: "small"}})\n', encoding="utf-8"
    )
    params = Params.from_file(str(tmp_path / "c.jsonnet")).as_dict(quiet=True)
    assert params["model"]["encoder"]["input_size"] == 100 + 64 + 256
    assert list(cache_dir.iterdir()) == []


def test_the_width_of_each_kind_of_model_is_the_loaded_bilms(tmp_path):
    from elmo_plugin.elmo_embedder import ElmoEmbedder

    directory = exported_bilm(tmp_path / "bilm")
    archive = FIXTURES.parent / "legacy_elmo_bilm" / "model.tar.gz"
    for arguments in (
        dict(model=str(directory)),
        dict(options_file=str(FIXTURE_OPTIONS), weight_file=str(FIXTURE_WEIGHTS)),
        dict(model=str(archive)),
    ):
        loaded = ElmoEmbedder(**arguments).get_output_dim()
        assert elmo_output_dim(
            arguments.get("model"), arguments.get("options_file"), arguments.get("weight_file"), None
        ) == loaded, arguments
    assert elmo_output_dim(str(archive), None, None, None) == 16  # projection_dim 8


def test_an_output_dim_that_is_not_the_models_is_one_error_naming_both(tmp_path):
    bilm = exported_bilm(tmp_path / "bilm")
    config = tmp_path / "c.jsonnet"
    config.write_text(
        f'(import "{NER}")(use_elmo=true, elmo={{model: "{bilm}", output_dim: 512}})\n',
        encoding="utf-8",
    )
    with pytest.raises(ConfigurationError) as raised:
        train_model_from_file(str(config), str(tmp_path / "run"))
    message = str(raised.value)
    assert message == (
        f"{config}: elmo output_dim is 512, but the biLM (model {bilm}) gives {FIXTURE_WIDTH}: "
        "remove output_dim (the configs read it from the model) or correct it"
    )
    assert not (tmp_path / "run").exists()
    # The model's own width is accepted.
    config.write_text(
        f'(import "{NER}")(use_elmo=true, elmo={{model: "{bilm}", output_dim: {FIXTURE_WIDTH}}})\n',
        encoding="utf-8",
    )
    assert Params.from_file(str(config))["model"]["encoder"]["input_size"] == 164 + FIXTURE_WIDTH


def test_without_the_plugin_the_configs_still_take_an_output_dim(tmp_path):
    # What a jsonnet reader without the plugin's native function (std.native gives null) sees.
    config = tmp_path / "c.jsonnet"
    config.write_text(
        f'(import "{NER}")(use_elmo=true, elmo={{model: "small", output_dim: 256}})\n',
        encoding="utf-8",
    )
    params = json.loads(_jsonnet.evaluate_file(str(config)))
    assert params["model"]["encoder"]["input_size"] == 100 + 64 + 256
    config.write_text(f'(import "{NER}")(use_elmo=true, elmo={{model: "small"}})\n', encoding="utf-8")
    with pytest.raises(RuntimeError, match="elmo needs `output_dim`"):
        _jsonnet.evaluate_file(str(config))
