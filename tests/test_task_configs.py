"""
Every downstream task config (``training_configs/tasks/``, baseline and +ELMo) trains end to end
with ``allennlp train`` on the first sentences of its real data files, with the golden fixture's
tiny biLM standing in for the pretrained one; the +ELMo runs leave the biLM untouched and learn
the layer weights.
"""
import json
from pathlib import Path
from typing import Dict, List

import pytest
import torch
from allennlp.commands.train import train_model_from_file
from allennlp.common.plugins import import_plugins

from elmo_plugin.config_defaults import DEFAULTS
from tests.helpers import FIXTURE_OPTIONS, FIXTURE_WEIGHTS, REPO_ROOT

pytestmark = pytest.mark.usefixtures("single_thread")

TASKS = REPO_ROOT / "training_configs" / "tasks"
CONFIGS = sorted(TASKS.glob("*.jsonnet"))
SHARED_DATA = REPO_ROOT.parent / "shared" / "data"

# Each task's files (relative to ELMO_TASK_DATA) and the metric its test evaluation reports.
TASK_FILES: Dict[str, List[str]] = {
    "ner_wikiann": ["en/ner/wikiann/train.txt", "en/ner/wikiann/dev.txt", "en/ner/wikiann/test.txt"],
    "pos_ewt": [f"en/pos/en_ewt-ud-{split}.conllu" for split in ("train", "dev", "test")],
    "genre_ewt": [f"en/pos/en_ewt-ud-{split}.conllu" for split in ("train", "dev", "test")],
    "srl_up_ewt": ["en/srl/up_ewt/en_ewt-up-dev.conllu", "en/srl/up_ewt/en_ewt-up-test.conllu"],
}
TEST_METRIC = {
    "ner_wikiann": "test_f1-measure-overall",
    "pos_ewt": "test_accuracy",
    "genre_ewt": "test_accuracy",
    "srl_up_ewt": "test_f1-measure-overall",
}


def spread_sentences(path: Path, count: int) -> str:
    """
    ``count`` blank-line-separated blocks (CoNLL and CoNLL-U alike) spread evenly over a file,
    so that a sample has several labels (EWT's genres come in long runs).
    """
    blocks = [b for b in path.read_text(encoding="utf-8").split("\n\n") if b.strip()]
    return "\n\n".join(blocks[:: max(1, len(blocks) // count)][:count]) + "\n\n"


def test_every_task_has_a_baseline_and_an_elmo_config():
    names = {path.stem for path in CONFIGS}
    assert names == set(TASK_FILES) | {f"{task}_elmo" for task in TASK_FILES}


@pytest.mark.parametrize("config", CONFIGS, ids=[path.stem for path in CONFIGS])
def test_task_config_trains_and_tests(config, tmp_path, monkeypatch):
    if not SHARED_DATA.is_dir():
        pytest.skip(f"no shared data at {SHARED_DATA}")
    task = config.stem[: -len("_elmo")] if config.stem.endswith("_elmo") else config.stem
    use_elmo = config.stem.endswith("_elmo")
    data = tmp_path / "data"
    for relative in TASK_FILES[task]:
        target = data / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(spread_sentences(SHARED_DATA / relative, 12), encoding="utf-8")
    env = {
        **DEFAULTS,
        "ELMO_TASK_DATA": str(data),
        "ELMO_OPTIONS_FILE": str(FIXTURE_OPTIONS),
        "ELMO_WEIGHT_FILE": str(FIXTURE_WEIGHTS),
        "ELMO_TASK_ELMO_DIM": "32",  # the fixture biLM: 2 x 16
        "ELMO_TASK_NUM_EPOCHS": "1",
        "ELMO_CUDA_DEVICE": "-1",
    }
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    # What the `allennlp` command does first: load the default plugins (allennlp_models, for
    # crf_tagger and srl) and the ones .allennlp_plugins names.
    import_plugins()
    model = train_model_from_file(str(config), str(tmp_path / "run"), force=True)
    metrics = json.loads((tmp_path / "run" / "metrics.json").read_text())
    assert TEST_METRIC[task] in metrics, sorted(metrics)
    assert 0.0 <= metrics[TEST_METRIC[task]] <= 1.0
    elmo_parameters = {
        name: parameter for name, parameter in model.named_parameters() if "token_embedder_elmo." in name
    }
    if not use_elmo:
        assert not elmo_parameters
        return
    from elmo_plugin.elmo import load_pretrained_bilm

    pretrained = load_pretrained_bilm(str(FIXTURE_OPTIONS), str(FIXTURE_WEIGHTS)).state_dict()
    bilm = {
        name.split("._elmo_lstm.", 1)[1]: parameter
        for name, parameter in elmo_parameters.items()
        if "._elmo_lstm." in name
    }
    assert bilm and set(bilm) == set(pretrained)
    for name, parameter in bilm.items():
        assert not parameter.requires_grad and torch.equal(parameter, pretrained[name]), name
    mixes = [p for name, p in elmo_parameters.items() if name.endswith("scalar_parameters")]
    assert len(mixes) == 1 and mixes[0].requires_grad
    assert not torch.equal(mixes[0], torch.zeros_like(mixes[0])), "the mix did not learn"
