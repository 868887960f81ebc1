"""
Every downstream task config (``training_configs/tasks/``, baseline and +ELMo) trains end to end
with ``allennlp train`` on sentences (or TSV rows) spread over its real data files, with a tiny
biLM standing in for the pretrained one (the golden fixture's for the English tasks, a random one
with 30 bytes per token for the Korean one); the +ELMo runs leave the biLM untouched and learn the
layer weights.
"""
import json
import re
from pathlib import Path
from typing import Dict, List

import pytest
import torch
from allennlp.commands.train import train_model_from_file
from allennlp.common.plugins import import_plugins

from elmo_plugin.modules.bilm import ElmoBiLm
from tests.helpers import (
    FIXTURE_OPTIONS,
    FIXTURE_WEIGHTS,
    REPO_ROOT,
    SHARED_DATA,
    config_calling,
    make_random_bilm_files,
    requires_shared_data,
)

pytestmark = pytest.mark.usefixtures("single_thread")

TASKS = REPO_ROOT / "training_configs" / "tasks"
# Variants of a task's +ELMo config, each named TASK_elmo_VARIANT and tested on its own.
ELMO_VARIANTS = {"nsmc_sentiment_elmo_pooled": {"pooled": True}}
CONFIGS = sorted(path for path in TASKS.glob("*.jsonnet") if path.stem not in ELMO_VARIANTS)

# Each task's files (relative to the data root) and the metric its test evaluation reports.
TASK_FILES: Dict[str, List[str]] = {
    "ner_wikiann": ["en/ner/wikiann/train.txt", "en/ner/wikiann/dev.txt", "en/ner/wikiann/test.txt"],
    "ner_wnut17": ["en/ner/wnut17/train.txt", "en/ner/wnut17/dev.txt", "en/ner/wnut17/test.txt"],
    "pos_ewt": [f"en/pos/en_ewt-ud-{split}.conllu" for split in ("train", "dev", "test")],
    "genre_ewt": [f"en/pos/en_ewt-ud-{split}.conllu" for split in ("train", "dev", "test")],
    "srl_up_ewt": ["en/srl/up_ewt/en_ewt-up-dev.conllu", "en/srl/up_ewt/en_ewt-up-test.conllu"],
    "nsmc_sentiment": ["ko/sentiment/train.tsv", "ko/sentiment/test.tsv"],
    "klue_ner": ["ko/ner/klue/original/train.tsv", "ko/ner/klue/original/test.tsv"],
}
TEST_METRIC = {
    "ner_wikiann": "test_f1-measure-overall",
    "ner_wnut17": "test_f1-measure-overall",
    "pos_ewt": "test_accuracy",
    "genre_ewt": "test_accuracy",
    "srl_up_ewt": "test_f1-measure-overall",
    "nsmc_sentiment": "test_accuracy",
    "klue_ner": "test_entity_macro_f1",
}
# The tasks on a Korean biLM (30 bytes per token).
KOREAN_TASKS = {"nsmc_sentiment", "klue_ner"}


def spread_sentences(path: Path, count: int) -> str:
    """
    ``count`` blank-line-separated blocks (CoNLL and CoNLL-U alike) spread evenly over a file,
    so that a sample has several labels (EWT's genres come in long runs).
    """
    blocks = [b for b in path.read_text(encoding="utf-8").split("\n\n") if b.strip()]
    return "\n\n".join(blocks[:: max(1, len(blocks) // count)][:count]) + "\n\n"


def spread_tsv_rows(path: Path, count: int) -> str:
    """
    The header and ``count`` rows spread evenly over a TSV file with a ``label`` column; checks
    that the sample has more than one label (a test label unseen in training breaks the model).
    """
    header, *rows = path.read_text(encoding="utf-8").splitlines()
    sample = rows[:: max(1, len(rows) // count)][:count]
    label = header.split("\t").index("label")
    assert len({row.split("\t")[label] for row in sample}) > 1, f"{path}: one label in the sample"
    return "\n".join([header, *sample]) + "\n"


def test_every_task_has_a_baseline_and_an_elmo_config():
    names = {path.stem for path in CONFIGS}
    assert names == set(TASK_FILES) | {f"{task}_elmo" for task in TASK_FILES}
    for variant, arguments in ELMO_VARIANTS.items():
        assert (TASKS / f"{variant}.jsonnet").is_file()
        called = ", ".join(f"{name}={str(value).lower()}" for name, value in arguments.items())
        assert f"(use_elmo=true, {called})" in (TASKS / f"{variant}.jsonnet").read_text()


@requires_shared_data()
def test_pooled_elmo_classifier_averages_the_tokens(tmp_path):
    # The pooled variant: AllenNLP's boe encoder, averaged, is the mean over the unmasked tokens.
    from allennlp.modules.seq2vec_encoders import BagOfEmbeddingsEncoder

    model = check_task_trains_and_tests(
        "nsmc_sentiment", True, tmp_path, **ELMO_VARIANTS["nsmc_sentiment_elmo_pooled"]
    )
    encoder = model._seq2vec_encoder
    assert isinstance(encoder, BagOfEmbeddingsEncoder) and encoder._averaged
    vectors = torch.randn(2, 3, encoder.get_input_dim())
    mask = torch.tensor([[True, True, False], [True, True, True]])
    torch.testing.assert_close(encoder(vectors, mask)[0], vectors[0, :2].mean(dim=0))


@requires_shared_data()
@pytest.mark.parametrize("config", CONFIGS, ids=[path.stem for path in CONFIGS])
def test_task_config_trains_and_tests(config, tmp_path):
    task = config.stem[: -len("_elmo")] if config.stem.endswith("_elmo") else config.stem
    check_task_trains_and_tests(task, config.stem.endswith("_elmo"), tmp_path)


@requires_shared_data()
@pytest.mark.parametrize("task", sorted(KOREAN_TASKS))
def test_elmo_at_the_encoders_output_trains_and_tests(task, tmp_path):
    # The task functions' elmo_at_output: one biLM run, two learned mixes (input and output).
    check_task_trains_and_tests(task, True, tmp_path, elmo_at_output=True)


def check_task_trains_and_tests(task: str, use_elmo: bool, tmp_path: Path, **arguments):
    """
    Trains the task's function (with ``arguments``) for one epoch on 12 sentences of each data
    file, tests it, and checks that a +ELMo model kept the biLM and learned its mixes.
    """
    data = tmp_path / "data"
    for relative in TASK_FILES[task]:
        target = data / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        sample = spread_tsv_rows if relative.endswith("sentiment/train.tsv") or relative.endswith(
            "sentiment/test.tsv"
        ) else spread_sentences
        target.write_text(sample(SHARED_DATA / relative, 12), encoding="utf-8")
    # The Korean configs' biLM: random weights, the fixture's architecture but 30 bytes per token
    # (their indexer's setting).
    korean = make_random_bilm_files(tmp_path / "bilm", max_characters_per_token=30)
    korean_options = json.loads(korean.options_file.read_text())
    assert korean_options["char_cnn"]["max_characters_per_token"] == 30
    if task in KOREAN_TASKS:
        options_file, weight_file = korean.options_file, korean.weight_file
        max_characters = 30
    else:
        options_file, weight_file = FIXTURE_OPTIONS, FIXTURE_WEIGHTS
        max_characters = 50
    output_dim = 2 * json.loads(Path(options_file).read_text())["lstm"]["projection_dim"]
    # The config as a user adapts it: the task's function with other data, biLM and epochs.
    called = config_calling(
        tmp_path / "config.jsonnet",
        TASKS / f"{task}.libsonnet",
        use_elmo=use_elmo,
        data_root=str(data),
        elmo={
            "options_file": str(options_file),
            "weight_file": str(weight_file),
            "output_dim": output_dim,
            "max_characters_per_token": max_characters,
            "do_layer_norm": task in KOREAN_TASKS,
        },
        num_epochs=1,
        **arguments,
    )
    # What the `allennlp` command does first: load the default plugins (allennlp_models, for
    # crf_tagger and srl) and the ones .allennlp_plugins names.
    import_plugins()
    model = train_model_from_file(str(called), str(tmp_path / "run"), force=True)
    metrics = json.loads((tmp_path / "run" / "metrics.json").read_text())
    assert TEST_METRIC[task] in metrics, sorted(metrics)
    assert 0.0 <= metrics[TEST_METRIC[task]] <= 1.0
    elmo_parameters = {
        name: parameter
        for name, parameter in model.named_parameters()
        if "token_embedder_elmo." in name or "text_field_embedder._elmo." in name
    }
    if not use_elmo:
        assert not elmo_parameters
        return model
    # Compared with the biLM files this config loaded.
    pretrained = dict(ElmoBiLm.from_files(options_file, weight_file).named_parameters())
    bilm = {
        name.split("._elmo_lstm.", 1)[1]: parameter
        for name, parameter in elmo_parameters.items()
        if "._elmo_lstm." in name
    }
    assert bilm and set(bilm) == set(pretrained)
    for name, parameter in bilm.items():
        assert not parameter.requires_grad and torch.equal(parameter, pretrained[name]), name
    # Each mix's layer weights: AllenNLP's list "...scalar_parameters.0", ".1", ...
    by_mix: Dict[str, List[torch.Tensor]] = {}
    for name, parameter in elmo_parameters.items():
        if re.search(r"scalar_parameters\.\d+$", name):
            by_mix.setdefault(name.rsplit(".", 1)[0], []).append(parameter)
    mixes = [torch.cat(parameters) for parameters in by_mix.values()]
    assert len(mixes) == (2 if arguments.get("elmo_at_output") else 1)
    for mix in mixes:
        assert mix.requires_grad
        assert not torch.equal(mix, torch.zeros_like(mix)), "a mix did not learn"
    return model
