"""
What a new user meets first with the training configs, each as one error that says what to do:
a task config without its data (the ``data_root`` argument and the data's public source), an
``_elmo`` config before its biLM was built (the make target), and a config that asks for a GPU
on a machine without one (AllenNLP's own check fails on torch 2.x with "Cannot access
accelerator device"). Each is found before ``allennlp train`` makes its serialization directory
(`elmo_plugin.commands.train_command`), so none leaves a run directory behind.
"""
import json

import pytest
import torch
from allennlp.commands.train import train_model_from_file
from allennlp.common.checks import ConfigurationError

from elmo_plugin.model_files.build_hints import build_target
from elmo_plugin.training.trainer import check_training_device
from tests.helpers import REPO_ROOT, config_calling
from tests.training_configs.test_bilm_configs import write_sample_subset

pytestmark = pytest.mark.usefixtures("single_thread")

TASKS = REPO_ROOT / "training_configs" / "tasks"
WIKIANN = "EU\tB-ORG\nrejects\tO\nGerman\tB-MISC\ncall\tO\n\nPeter\tB-PER\nBlackburn\tI-PER\n\n"


def test_a_task_config_without_its_data_names_data_root_and_the_public_source(tmp_path):
    config = config_calling(
        tmp_path / "config.jsonnet", TASKS / "ner_wikiann.libsonnet",
        use_elmo=False, data_root=str(tmp_path / "no_data"),
    )
    with pytest.raises(ConfigurationError) as raised:
        train_model_from_file(str(config), str(tmp_path / "run"))
    message = str(raised.value)
    assert f"the data file {tmp_path}/no_data/en/ner/wikiann/train.txt does not exist" in message
    assert f"data_root argument (here {tmp_path}/no_data" in message
    assert "github.com/davidsbatista/NER-datasets" in message
    assert "\n" not in message
    # Found before allennlp train made the run directory (elmo_plugin.commands.train_command).
    assert not (tmp_path / "run").exists()


def test_an_elmo_config_without_its_bilm_names_the_make_target(tmp_path):
    data = tmp_path / "data" / "en" / "ner" / "wikiann"
    data.mkdir(parents=True)
    for split in ("train", "dev", "test"):
        (data / f"{split}.txt").write_text(WIKIANN, encoding="utf-8")
    # The default biLM of the +ELMo configs, in a checkout where `make pretrain-small` has not run.
    missing = tmp_path / "checkout" / "build" / "en_small" / "bilm"
    config = tmp_path / "config.jsonnet"
    config.write_text(
        f'local common = import "{TASKS}/task_common.libsonnet";\n'
        f'(import "{TASKS}/ner_wikiann.libsonnet")(use_elmo=true, data_root="{tmp_path}/data",\n'
        f'  elmo=common.english_elmo + {{options_file: "{missing}/options.json",'
        f' weight_file: "{missing}/weights.hdf5"}})\n',
        encoding="utf-8",
    )
    with pytest.raises(ConfigurationError) as raised:
        train_model_from_file(str(config), str(tmp_path / "run"))
    message = str(raised.value)
    assert f"{missing}/options.json" in message
    assert "run `make pretrain-small` in the repository first" in message
    assert not (tmp_path / "run").exists()


def test_build_targets_of_the_makefiles_exports():
    assert build_target("build/en_small/bilm/options.json") == "make pretrain-small"
    assert build_target("/x/repo/build/ko/bilm/weights.hdf5") == "make pretrain-ko"
    assert build_target("/x/repo/build/ko/bilm") == "make pretrain-ko"
    assert build_target("runs/my_bilm/options.json") is None
    assert build_target("https://example.com/build/ko/bilm/options.json") is None


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the machine without a GPU")
def test_a_gpu_config_on_a_machine_without_one_is_one_error_before_training(tmp_path):
    data = write_sample_subset(tmp_path / "data", train_lines=6, heldout_lines=4)
    config = config_calling(tmp_path / "config.jsonnet", "bilm.jsonnet", num_epochs=1, **data)
    with pytest.raises(ConfigurationError) as raised:
        train_model_from_file(
            str(config), str(tmp_path / "run"), overrides=json.dumps({"trainer.cuda_device": 0})
        )
    message = str(raised.value)
    assert message.startswith("trainer.cuda_device is 0, but torch ")
    assert "-o '{\"trainer.cuda_device\": -1}'" in message and "make TORCH=cuda" in message
    assert "already created" not in message
    assert not (tmp_path / "run").exists()  # checked before the run directory was made


def test_a_gpu_index_beyond_the_visible_ones_is_named():
    if torch.cuda.is_available():
        count = torch.cuda.device_count()
        with pytest.raises(ConfigurationError, match=f"only {count} CUDA GPU"):
            check_training_device(count, "run")
        check_training_device(0, "run")  # the first GPU passes
    else:
        with pytest.raises(ConfigurationError, match="trainer.cuda_device is 'cuda:1'"):
            check_training_device("cuda:1", "run")
    check_training_device(-1, "run")
    check_training_device("cpu", "run")
    check_training_device(None, "run")
