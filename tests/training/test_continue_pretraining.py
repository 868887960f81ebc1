"""
Going on pretraining a trained biLM on new text (``allennlp elmo-adapt``, ``bilm_adapt.jsonnet``,
the ``elmo_bilm`` model's ``start_from``, the ``adapted_from_source`` vocabulary and the
``continue_pretraining`` callback), checked against the source model itself: a re-sorted
vocabulary measures exactly the source's perplexity, known words keep their logits, added words
share ``<UNK>``'s probability, a checkpoint's Adagrad sums go on, a biLM without a softmax stays
frozen while its new softmax trains.
"""
import argparse
import json
import shutil
from pathlib import Path
from types import SimpleNamespace
from typing import List

import pytest
import torch
from allennlp.commands import ArgumentParserWithDefaults
from allennlp.data import DatasetReader
from allennlp.data.data_loaders import MultiProcessDataLoader
from allennlp.models.archival import load_archive
from allennlp.training.util import evaluate

from elmo_plugin.commands.elmo_adapt import ElmoAdaptCommand, adaptation_config_text, resume_command
from elmo_plugin.data.vocabulary import DEFAULT_LM_NAMESPACE, UNK_TOKEN, read_bilm_tf_vocabulary
from elmo_plugin.model_files.bilm_tf.checkpoint import read_bilm_tf_checkpoint
from elmo_plugin.model_files.bilm_tf.directory import read_softmax
from elmo_plugin.model_files.catalogue import PUBLISHED_MODELS
from elmo_plugin.models.elmo_language_model import ElmoLanguageModel
from elmo_plugin.models.language_model_source import AdaptedBilmVocabulary, summarize_source
from elmo_plugin.training.callbacks import START_METRICS_FILE, WITHIN_EPOCHS_FILE, ContinuePretrainingCallback
from elmo_plugin.training.config_functions import native_callbacks
from tests.helpers import FIXTURES, REPO_ROOT

pytestmark = pytest.mark.usefixtures("single_thread")

CHECKPOINT = REPO_ROOT / "tests" / "fixtures" / "bilm_tf_checkpoint"
SAMPLE = REPO_ROOT / "elmo_plugin" / "sample_corpus"
SMALL_RUN = ("--batch-size", "16", "--num-samples", "16")


def run_adapt(*arguments) -> int:
    """``allennlp elmo-adapt ARGUMENTS`` parsed by the command's own parser, run in this process."""
    parser = ArgumentParserWithDefaults(prog="allennlp")
    ElmoAdaptCommand().add_subparser(parser.add_subparsers())
    args = parser.parse_args(["elmo-adapt", *(str(argument) for argument in arguments)])
    try:
        args.func(args)
    except SystemExit as exit:
        return int(exit.code or 0)
    return 0


def json_of(path: Path):
    return json.loads(path.read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def adapted_run(tmp_path_factory) -> Path:
    """The checkpoint fixture (a copy, removed afterwards) adapted to the sample corpus, one epoch."""
    root = tmp_path_factory.mktemp("adapted")
    source = root / "checkpoint"
    shutil.copytree(CHECKPOINT, source)
    run = root / "run"
    assert run_adapt(source, SAMPLE / "train.txt", run, "--validation-data", SAMPLE / "heldout.txt", *SMALL_RUN) == 0
    shutil.rmtree(source)
    return run


def test_an_adapted_run_exports_the_biLM_with_its_softmax_and_measured_the_source(adapted_run):
    exported = adapted_run / "bilm"
    assert sorted(path.name for path in exported.iterdir()) == [
        "options.json", "softmax.hdf5", "vocabulary.txt", "weights.hdf5",
    ]
    start = json_of(adapted_run / START_METRICS_FILE)
    best = json_of(adapted_run / "metrics.json")["best_validation_ppl"]
    # One epoch on the sample corpus from a model trained on other text: far better than it was.
    assert best < 0.7 * start["validation_ppl"]
    # The source's words, re-sorted by the sample corpus's counts.
    tokens = read_bilm_tf_vocabulary(str(exported / "vocabulary.txt"))
    assert sorted(tokens) == sorted(read_bilm_tf_vocabulary(str(CHECKPOINT / "vocabulary.txt")))
    assert tokens != read_bilm_tf_vocabulary(str(CHECKPOINT / "vocabulary.txt"))


def source_perplexity(archive_file: Path, data: Path) -> float:
    """What ``allennlp evaluate`` gives the archive on ``data``."""
    archive = load_archive(str(archive_file))
    loader = MultiProcessDataLoader(
        DatasetReader.from_params(archive.config["validation_dataset_reader"].duplicate()), str(data), batch_size=64
    )
    loader.index_with(archive.model.vocab)
    return float(evaluate(archive.model, loader)["ppl"])


def test_a_resorted_vocabulary_measures_exactly_the_source_perplexity(adapted_run, tmp_path):
    # From the export, on other training text: the vocabulary is re-sorted again (other counts),
    # every softmax row must follow its word, and the model before training is the source, on the
    # validation text and on the source domain's text alike.
    source_text = tmp_path / "source_domain.txt"
    source_text.write_text("\n".join((SAMPLE / "train.txt").read_text().splitlines()[:200]) + "\n")
    again = tmp_path / "again"
    assert run_adapt(
        adapted_run / "bilm", SAMPLE / "heldout.txt", again, "--validation-data", SAMPLE / "heldout.txt",
        "--source-validation-data", source_text, "--validate-every", "10", *SMALL_RUN,
    ) == 0
    start = json_of(again / START_METRICS_FILE)
    source = json_of(adapted_run / "metrics.json")["best_validation_ppl"]
    assert read_bilm_tf_vocabulary(str(again / "bilm" / "vocabulary.txt")) != read_bilm_tf_vocabulary(
        str(adapted_run / "bilm" / "vocabulary.txt")
    )
    assert start["validation_ppl"] == pytest.approx(source, rel=1e-5)
    assert start["source_validation_ppl"] == pytest.approx(
        source_perplexity(adapted_run / "model.tar.gz", source_text), rel=1e-5
    )
    # After the epoch: the adapted model on the source domain's text, as evaluate measures it.
    metrics = json_of(again / "metrics.json")
    assert metrics["source_validation_ppl"] == pytest.approx(
        source_perplexity(again / "model.tar.gz", source_text), rel=1e-5
    )
    # 400 sentences in batches of 16: 25 batches, measured at 10 and 20, improving.
    within = [json.loads(line) for line in (again / WITHIN_EPOCHS_FILE).read_text().splitlines()]
    assert [(line["epoch"], line["batch"]) for line in within] == [(0, 10), (0, 20)]
    assert within[0]["validation_ppl"] > within[1]["validation_ppl"] > metrics["validation_ppl"]


def test_a_trained_adapted_model_loads_without_its_source(adapted_run):
    # The source checkpoint was removed after the run: loading reads the archive's own weights.
    archive = load_archive(str(adapted_run / "model.tar.gz"))
    best = torch.load(adapted_run / "best.th", map_location="cpu")
    for name, value in archive.model.state_dict().items():
        torch.testing.assert_close(value, best[name], rtol=0, atol=0)


def adapted_model(corpus: Path, extend_min_count=None) -> ElmoLanguageModel:
    vocab = AdaptedBilmVocabulary.from_source(str(CHECKPOINT), str(corpus), extend_min_count)
    options = json_of(CHECKPOINT / "options.json")
    return ElmoLanguageModel(vocab, options, num_samples=8, start_from=str(CHECKPOINT), check_vocabulary_order=False)


def test_known_words_keep_their_logits_and_added_words_share_unks_probability():
    checkpoint = read_bilm_tf_checkpoint(CHECKPOINT)
    model = adapted_model(SAMPLE / "train.txt", extend_min_count=3)
    tokens = model.vocab.get_index_to_token_vocabulary(DEFAULT_LM_NAMESPACE)
    tokens = [tokens[index] for index in range(len(tokens))]
    source_index = {token: row for row, token in enumerate(checkpoint.vocabulary)}
    added = [index for index, token in enumerate(tokens) if token not in source_index]
    assert len(added) > 50 and len(tokens) == len(source_index) + len(added)
    weight, bias = checkpoint.softmax
    context = torch.randn(5, weight.shape[1], generator=torch.Generator().manual_seed(0))
    source_logits = context @ weight.T + bias
    logits = context @ model.softmax.softmax_weight.detach().T + model.softmax.softmax_bias.detach()
    for index, token in enumerate(tokens):
        if token in source_index:
            torch.testing.assert_close(logits[:, index], source_logits[:, source_index[token]])
    # Together the added words have <UNK>'s probability before normalisation, for every context,
    # and more of it the more often the new corpus has them.
    torch.testing.assert_close(
        torch.logsumexp(logits[:, added], dim=1), source_logits[:, source_index[UNK_TOKEN]], rtol=0, atol=1e-5
    )
    assert all(logits[0, a] > logits[0, b] for a, b in zip(added, added[1:]))


def test_a_checkpoints_adagrad_sums_go_on_row_by_row():
    checkpoint = read_bilm_tf_checkpoint(CHECKPOINT)
    model = adapted_model(SAMPLE / "train.txt", extend_min_count=3)
    optimizer = torch.optim.Adagrad(model.parameters(), lr=0.2, initial_accumulator_value=1.0)
    trainer = SimpleNamespace(
        model=model, optimizer=optimizer, _start_after_epochs_completed=0, _start_after_batches_in_epoch_completed=0
    )
    ContinuePretrainingCallback("unused", validate_at_start=False).on_start(trainer)
    parameters = dict(model.named_parameters())
    for name, sums in checkpoint.adagrad.items():
        if not name.startswith("softmax."):
            torch.testing.assert_close(optimizer.state[parameters[name]]["sum"], sums, rtol=0, atol=0)
    tokens = model.vocab.get_index_to_token_vocabulary(DEFAULT_LM_NAMESPACE)
    source_index = {token: row for row, token in enumerate(checkpoint.vocabulary)}
    weight_sums = optimizer.state[parameters["softmax.softmax_weight"]]["sum"]
    for index in range(len(tokens)):
        row = source_index.get(tokens[index])
        expected = checkpoint.adagrad["softmax.softmax_weight"][row] if row is not None else torch.ones(
            weight_sums.shape[1]
        )
        torch.testing.assert_close(weight_sums[index], expected, rtol=0, atol=0)
    # A resumed run keeps the sums of its own training state.
    fresh = torch.optim.Adagrad(model.parameters(), lr=0.2, initial_accumulator_value=1.0)
    trainer.optimizer, trainer._start_after_epochs_completed = fresh, 1
    ContinuePretrainingCallback("unused", validate_at_start=False).on_start(trainer)
    assert torch.equal(fresh.state[parameters["softmax.softmax_weight"]]["sum"], torch.ones_like(weight_sums))


def bilm_weights(state_file: Path) -> List[torch.Tensor]:
    state = torch.load(state_file, map_location="cpu")
    return [value for name, value in sorted(state.items()) if name.startswith("bilm.")]


def test_a_biLM_without_softmax_stays_frozen_while_its_new_softmax_trains(tmp_path):
    run = tmp_path / "run"
    assert run_adapt(
        FIXTURES, SAMPLE / "train.txt", run, "--validation-data", SAMPLE / "heldout.txt", *SMALL_RUN
    ) == 0
    config = json_of(run / "config.json")
    assert config["trainer"]["num_epochs"] == 2  # one epoch of the softmax alone, then one of all
    assert not (run / START_METRICS_FILE).exists()  # a new softmax: no perplexity worth printing
    # The corpus's own vocabulary (no source one), in the order elmo-vocab writes it.
    assert read_bilm_tf_vocabulary(str(run / "bilm" / "vocabulary.txt")) == read_bilm_tf_vocabulary(
        str(SAMPLE / "vocabulary.txt")
    )
    source = ElmoLanguageModel(
        AdaptedBilmVocabulary.from_source(str(FIXTURES), str(SAMPLE / "train.txt")),
        json_of(FIXTURES / "options.json"), start_from=str(FIXTURES), check_vocabulary_order=False,
    )
    source_weights = [value for name, value in sorted(source.state_dict().items()) if name.startswith("bilm.")]
    # The checkpoints after epochs 1 and 2 (AllenNLP names them by the epochs completed).
    first, second = (bilm_weights(run / f"model_state_e{epochs}_b0.th") for epochs in (1, 2))
    assert all(torch.equal(a, b) for a, b in zip(first, source_weights))
    assert not all(torch.equal(a, b) for a, b in zip(second, source_weights))
    assert softmax_changed(run, source)


def softmax_changed(run: Path, source: ElmoLanguageModel) -> bool:
    weight, _ = read_softmax(run / "bilm" / "softmax.hdf5")
    return not torch.allclose(torch.as_tensor(weight), source.softmax.softmax_weight.detach())


def test_the_config_function_describes_each_kind_of_source():
    _, describe = native_callbacks()["elmo_adaptation_source"]
    checkpoint = describe(json.dumps({"start_from": str(CHECKPOINT)}))
    assert (checkpoint["has_softmax"], checkpoint["has_adagrad"], checkpoint["vocabulary_size"]) == (True, True, 41)
    assert checkpoint["options"]["lstm"]["dim"] == read_bilm_tf_checkpoint(CHECKPOINT).options.lstm_dim
    fixture = summarize_source(str(FIXTURES))
    assert (fixture.has_softmax, fixture.has_adagrad, fixture.vocabulary_size) == (False, False, None)


def test_the_command_line_to_resume_drops_force_and_adds_recover():
    argv = ["elmo-adapt", "original", "my text/*.txt", "out", "--validation-data", "dev.txt", "-f"]
    assert resume_command(argv) == (
        "allennlp elmo-adapt original 'my text/*.txt' out --validation-data dev.txt --recover"
    )


def test_the_call_config_passes_only_what_was_given(tmp_path):
    text = adaptation_config_text("training_configs/bilm_adapt.jsonnet", {"start_from": "original", "num_epochs": 2})
    assert text.endswith('(start_from="original", num_epochs=2)\n')
    assert str(REPO_ROOT / "training_configs" / "bilm_adapt.jsonnet") in text or text.startswith('(import "/')


def test_a_missing_config_or_corpus_is_one_line(tmp_path, capsys):
    arguments = (CHECKPOINT, SAMPLE / "train.txt", tmp_path / "run", "--validation-data", SAMPLE / "heldout.txt")
    assert run_adapt(*arguments, "--config", tmp_path / "nowhere.jsonnet") == 1
    missing = tmp_path / "nowhere.jsonnet"
    assert capsys.readouterr().err.strip() == f"allennlp elmo-adapt: error: --config {missing}: no such file"
    no_corpus = (CHECKPOINT, tmp_path / "none*.txt", tmp_path / "run", "--validation-data", SAMPLE / "heldout.txt")
    assert run_adapt(*no_corpus) == 1
    err = capsys.readouterr().err
    assert err.startswith("allennlp elmo-adapt: error: ") and "none*.txt" in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "run").exists()


def test_extend_vocabulary_alone_takes_words_seen_three_times():
    parser = ArgumentParserWithDefaults(prog="allennlp")
    ElmoAdaptCommand().add_subparser(parser.add_subparsers())
    args: argparse.Namespace = parser.parse_args(
        ["elmo-adapt", "original", "t.txt", "out", "--validation-data", "d.txt", "--extend-vocabulary"]
    )
    assert args.extend_vocabulary == 3 and args.epochs == 1


@pytest.mark.usefixtures("cache_dir")
def test_a_published_model_goes_on_with_its_published_softmax(adapted_run, model_server, tmp_path):
    # The adapted run's export served as "original": the biLM, the softmax and the vocabulary are
    # downloaded, and the starting model is that export, to the last digit of its perplexity.
    original = PUBLISHED_MODELS["original"]
    exported = adapted_run / "bilm"
    for url, name in (
        (original.options_url(model_server.url), "options.json"),
        (original.weights_url(model_server.url), "weights.hdf5"),
        (original.softmax_url(model_server.url), "softmax.hdf5"),
        (original.vocabulary_url(model_server.url), "vocabulary.txt"),
    ):
        model_server.files[model_server.path_of(url)] = (exported / name).read_bytes()
    run = tmp_path / "run"
    assert run_adapt("original", SAMPLE / "heldout.txt", run, "--validation-data", SAMPLE / "heldout.txt",
                     *SMALL_RUN) == 0
    before = json_of(run / START_METRICS_FILE)["validation_ppl"]
    assert before == pytest.approx(json_of(adapted_run / "metrics.json")["best_validation_ppl"], rel=1e-5)
    assert any(path.endswith(original.softmax_file) for path in model_server.gets())
