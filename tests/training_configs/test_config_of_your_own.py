"""
"A config of your own" (task_common.libsonnet's header, docs): the example in the header, as
written there with the repository's path filled in, evaluates from another directory, and
gives the biLM's fields that have defaults their defaults.
"""
import os
import re

import pytest
from allennlp.common import Params

from tests.helpers import REPO_ROOT

TASK_COMMON = REPO_ROOT / "training_configs" / "tasks" / "task_common.libsonnet"


def header_example() -> str:
    header = TASK_COMMON.read_text(encoding="utf-8").split("\nlocal ", 1)[0]
    match = re.search(r"\n//   (\(import .*?\))\n(?!//   )", header, flags=re.S)
    assert match, "no example in task_common.libsonnet's header"
    return "\n".join(line[len("//   "):] if line.startswith("//   ") else line
                     for line in match.group(1).split("\n"))


def test_the_header_example_evaluates_from_any_directory(tmp_path, monkeypatch):
    example = header_example().replace("/path/to/elmo_plugin", str(REPO_ROOT))
    elsewhere = tmp_path / "somewhere" / "else"
    elsewhere.mkdir(parents=True)
    (elsewhere / "my_ner.jsonnet").write_text(example + "\n", encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    params = Params.from_file("somewhere/else/my_ner.jsonnet").as_dict(quiet=True)
    assert params["model"]["text_field_embedder"]["token_embedders"]["elmo"] == {
        "type": "elmo_token_embedder",
        "model": "runs/my_bilm/bilm",
        "do_layer_norm": False,
        "dropout": 0.5,
    }
    assert params["dataset_reader"]["token_indexers"]["elmo"]["max_characters_per_token"] == 50
    assert params["model"]["encoder"]["input_size"] == 100 + 64 + 512
    # The defaults that are paths stay those of the repository, whatever the directory.
    assert params["train_data_path"] == os.path.normpath(
        REPO_ROOT / ".." / "shared" / "data" / "en" / "ner" / "wikiann" / "train.txt"
    )


def test_an_elmo_without_its_size_is_one_error_naming_the_field(tmp_path):
    (tmp_path / "c.jsonnet").write_text(
        f'(import "{REPO_ROOT}/training_configs/tasks/ner_wikiann.libsonnet")'
        '(use_elmo=true, elmo={model: "small"})\n',
        encoding="utf-8",
    )
    with pytest.raises(RuntimeError, match="elmo needs `output_dim`"):
        Params.from_file(str(tmp_path / "c.jsonnet"))
