"""
The training configs in ``training_configs/``: every one parses, builds its vocabulary, readers,
data loaders, model and trainer components, and takes one optimizer step on the sample corpus;
``bilm.jsonnet`` trains, resumes after an interruption like an uninterrupted run, and trains in
stream batching.
"""
import json
import math
import os
from pathlib import Path
from typing import Dict

import pytest
import torch
from allennlp.commands.train import train_model_from_file
from allennlp.common import Params
from allennlp.data import DataLoader, DatasetReader, Vocabulary
from allennlp.models import Model
from allennlp.training import GradientDescentTrainer, Trainer

from elmo_plugin.export.archive_to_bilm_tf import export_to_bilm_tf
from elmo_plugin.models.elmo_language_model import ElmoLanguageModel
from elmo_plugin.training.corpus_schedule import CountBatchesPerEpochCallback, LinearDecayOverCorpus
from tests.helpers import CONFIG_DIR, REPO_ROOT, config_calling

pytestmark = pytest.mark.usefixtures("single_thread")

# The pretraining configs; bilm_adapt.jsonnet, which goes on from a trained model, has its own tests
# (tests/training/test_continue_pretraining.py).
ADAPTATION_CONFIG = "bilm_adapt"
CONFIGS = sorted(path for path in CONFIG_DIR.glob("*.jsonnet") if path.stem != ADAPTATION_CONFIG)
SAMPLE = REPO_ROOT / "elmo_plugin" / "sample_corpus"


def write_sample_subset(directory: Path, train_lines: int, heldout_lines: int) -> Dict[str, str]:
    """
    The first lines of the sample corpus; returns the data arguments of a config's function
    (``train_data_path``, ``validation_data_path``, ``vocabulary_file``) pointing at them.
    """
    directory.mkdir(parents=True, exist_ok=True)
    for name, count in (("train.txt", train_lines), ("heldout.txt", heldout_lines)):
        lines = (SAMPLE / name).read_text(encoding="utf-8").splitlines()[:count]
        (directory / name).write_text("\n".join(lines) + "\n", encoding="utf-8")
    return {
        "train_data_path": str(directory / "train.txt"),
        "validation_data_path": str(directory / "heldout.txt"),
        "vocabulary_file": str(SAMPLE / "vocabulary.txt"),
    }


def test_the_expected_configs_are_there():
    names = [path.stem for path in CONFIGS]
    assert "bilm" in names and "bilm_small" in names
    assert (CONFIG_DIR / f"{ADAPTATION_CONFIG}.jsonnet").is_file()
    assert set(names) <= {"bilm", "bilm_small", "bilm_original", "bilm_ko", "bilm_ko_small"}, names


def test_the_default_config_finds_its_data_from_any_directory(tmp_path, monkeypatch):
    # No environment variables and no arguments: paths are relative to the config file, so
    # `allennlp train /path/to/training_configs/bilm.jsonnet` works from any directory.
    monkeypatch.chdir(tmp_path)
    for name in [key for key in os.environ if key.startswith("ELMO_")]:
        monkeypatch.delenv(name)
    params = Params.from_file(str(CONFIG_DIR / "bilm.jsonnet")).as_dict(quiet=True)
    for path in (
        params["train_data_path"],
        params["validation_data_path"],
        params["vocabulary"]["vocabulary_file"],
    ):
        assert Path(path).is_absolute() and Path(path).is_file(), path
        assert Path(path).resolve().parent == SAMPLE.resolve()


@pytest.mark.parametrize("config", CONFIGS, ids=[path.stem for path in CONFIGS])
def test_config_builds_and_takes_one_training_step(config, tmp_path):
    data = write_sample_subset(tmp_path / "data", train_lines=6, heldout_lines=4)
    called = config_calling(tmp_path / "config.jsonnet", config, **data)
    params = Params.from_file(str(called))
    assert params["train_data_path"] == data["train_data_path"]
    assert params["vocabulary"]["vocabulary_file"] == data["vocabulary_file"]
    stream = params["dataset_reader"]["mode"] == "stream"
    if stream:
        # Big stream configs (bilm_original: 128 rows x 20 steps of a 4096-cell LSTM) are far
        # too heavy for a CPU smoke test: 2 rows x 5 steps exercise the same code.
        overrides = {
            "dataset_reader.batch_size": 2,
            "dataset_reader.unroll_steps": 5,
            "data_loader.batch_size": 2,
        }
        params = Params.from_file(str(called), params_overrides=json.dumps(overrides))
        assert params["data_loader"]["type"] == "bilm_stream"  # the reader's order, as tensors
    config_dict = params.duplicate().as_dict(quiet=True)

    vocab = Vocabulary.from_params(params.pop("vocabulary"))
    assert vocab.get_vocab_size("lm_targets") == 160
    reader = DatasetReader.from_params(params.pop("dataset_reader"))
    validation_reader = DatasetReader.from_params(params.pop("validation_dataset_reader"))
    assert validation_reader.mode == "sentences"
    model = Model.from_params(vocab=vocab, params=params.pop("model"))
    assert isinstance(model, ElmoLanguageModel)
    assert model._mixed_precision is False  # the configs' default
    loader = DataLoader.from_params(
        params=params.pop("data_loader"), reader=reader, data_path=data["train_data_path"]
    )
    loader.index_with(vocab)
    validation_loader = DataLoader.from_params(
        params=params.pop("validation_data_loader"),
        reader=validation_reader,
        data_path=data["validation_data_path"],
    )
    validation_loader.index_with(vocab)
    trainer_params = params.pop("trainer")
    trainer_dict = trainer_params.as_dict(quiet=True)
    # bilm-tf's recipe, except the CPU-sized configs, which use Adam (see bilm_small.jsonnet
    # and BENCHMARKS.md).
    small = config.stem.endswith("_small")
    # The Adagrad configs choose sparse softmax gradients and Adagrad's row by row form
    # (tests/training/test_optimizers.py: exactly the dense update); Adam's configs stay dense.
    sparse = not small
    assert config_dict["model"]["sparse_softmax_gradients"] is sparse
    expected_optimizer = (
        {"type": "adam", "lr": 0.002}
        if small
        else {"type": "dense_sparse_adagrad", "lr": 0.2, "initial_accumulator_value": 1.0}
    )
    assert trainer_dict["optimizer"] == expected_optimizer
    assert trainer_dict["grad_norm"] == 10.0 and trainer_dict["validation_metric"] == "-ppl"
    # The trainer and everything it builds from the config: optimizer, checkpointer, callbacks.
    trainer = Trainer.from_params(
        params=trainer_params,
        model=model,
        serialization_dir=str(tmp_path / "run"),
        data_loader=loader,
        validation_data_loader=validation_loader,
    )
    expected_class = torch.optim.Adam if small else torch.optim.Adagrad
    assert isinstance(trainer.optimizer, expected_class)
    if small:
        # Linear decay to zero over the updates of the corpus trained on, counted when
        # training starts (tests/training/test_corpus_schedule.py trains through it).
        korean = config.stem == "bilm_ko_small"
        epochs = 3 if korean else 2
        assert config_dict["trainer"]["num_epochs"] == epochs
        scheduler = trainer._learning_rate_scheduler
        assert isinstance(scheduler, LinearDecayOverCorpus) and scheduler.num_steps_per_epoch is None
        assert {"type": "count_batches_per_epoch"} in config_dict["trainer"]["callbacks"]
        CountBatchesPerEpochCallback(str(tmp_path)).on_start(trainer)
        assert scheduler.num_steps_per_epoch == 1  # 6 sentences in batches of 64
        assert scheduler.total_steps == epochs
        scheduler.step_batch(epochs // 2) if epochs % 2 == 0 else scheduler.step_batch(1)
        done = epochs // 2 if epochs % 2 == 0 else 1
        assert trainer.optimizer.param_groups[0]["lr"] == pytest.approx(0.002 * (1 - done / epochs))
        scheduler.step_batch(0)

    batch = next(iter(loader))
    if stream:
        # The Korean configs use the course's 30 bytes per token.
        max_characters = 30 if config.stem.startswith("bilm_ko") else 50
        assert batch["forward_tokens"]["elmo_characters"]["elmo_tokens"].shape == (
            2,
            5,
            max_characters,
        )
    else:
        assert batch["tokens"]["elmo_characters"]["elmo_tokens"].shape[0] == 6
    before = {name: p.detach().clone() for name, p in model.named_parameters()}
    model.train()
    trainer.optimizer.zero_grad()
    output = model(**batch)
    loss = output["loss"]
    assert math.isfinite(float(loss.detach())) and float(loss.detach()) > 0
    loss.backward()
    # The gradient reaches the character encoder, both directions' LSTMs and the softmax (sparse
    # unless the 160-word vocabulary is smaller than the negatives: then the softmax is full).
    sparse_softmax = sparse and config_dict["model"]["num_samples"] < 160
    for name in (
        "bilm.character_encoder.char_embedding.weight",
        "bilm.lstm.forward_layers.0.input_weight",
        "bilm.lstm.backward_layers.1.recurrent_weight",
        "softmax.softmax_weight",
    ):
        grad = dict(model.named_parameters())[name].grad
        assert grad is not None and grad.is_sparse == (sparse_softmax and name.startswith("softmax"))
        grad = grad.to_dense()
        assert float(grad.abs().sum()) > 0, name
        assert torch.isfinite(grad).all(), name
    trainer.rescale_gradients()
    trainer.optimizer.step()
    changed = [name for name, p in model.named_parameters() if not torch.equal(p, before[name])]
    assert "bilm.lstm.backward_layers.1.recurrent_weight" in changed
    assert len(changed) >= len(before) // 2

    model.eval()
    with torch.no_grad():
        model.get_metrics(reset=True)
        model(**next(iter(validation_loader)))
        metrics = model.get_metrics(reset=True)
    # Perplexity of a nearly untrained model: somewhere around the vocabulary size.
    assert 1.0 < metrics["ppl"] < 10_000, metrics

    options = config_dict["model"]["options"]
    if config.stem == "bilm_original":
        # The published "Original" ELMo: 93.6M parameters without the softmax.
        assert options["lstm"]["dim"] == 4096 and options["lstm"]["projection_dim"] == 512
        assert options["char_cnn"]["filters"] == [
            [1, 32], [2, 32], [3, 64], [4, 128], [5, 256], [6, 512], [7, 1024]
        ]
        assert options["char_cnn"]["n_highway"] == 2
        assert config_dict["model"]["num_samples"] == 8192
        num_parameters = sum(p.numel() for p in model.bilm.parameters())
        assert abs(num_parameters - 93.6e6) < 0.1e6, num_parameters


# -- bilm.jsonnet: resume, stream batching --------------------------------------------------------

TINY_BILM = {"lstm_dim": 16, "projection_dim": 8, "batch_size": 16, "num_epochs": 2, "unroll_steps": 10}


def train_bilm(
    serialization_dir: Path, arguments: Dict, overrides: Dict, recover: bool = False
) -> Model:
    """Trains ``bilm.jsonnet`` called with ``arguments`` (a config of a user's own)."""
    config = config_calling(serialization_dir.parent / f"{serialization_dir.name}.jsonnet",
                            "bilm.jsonnet", **arguments)
    return train_model_from_file(
        str(config),
        str(serialization_dir),
        overrides=json.dumps({"trainer.callbacks": [], **overrides}),
        recover=recover,
    )


def stable_metrics(path: Path) -> Dict:
    """A metrics file without the entries that depend on the clock or memory."""
    metrics = json.loads(path.read_text())
    return {
        key: value
        for key, value in metrics.items()
        if "duration" not in key and "memory" not in key
    }


def max_state_difference(a: Path, b: Path) -> float:
    state_a, state_b = torch.load(a), torch.load(b)
    assert state_a.keys() == state_b.keys()
    return max(float((state_a[k].double() - state_b[k].double()).abs().max()) for k in state_a)


def state_distance(a: Path, b: Path) -> float:
    """Euclidean distance between two model states over all parameters."""
    state_a, state_b = torch.load(a), torch.load(b)
    return math.sqrt(
        sum(float(((state_a[k].double() - state_b[k].double()) ** 2).sum()) for k in state_a)
    )


def adagrad_state(path: Path) -> Dict[int, Dict[str, torch.Tensor]]:
    return torch.load(path, weights_only=False)["optimizer"]["state"]


def optimizer_state_difference(a: Path, b: Path) -> float:
    state_a, state_b = adagrad_state(a), adagrad_state(b)
    assert state_a.keys() == state_b.keys()
    return max(
        float((state_a[k]["sum"].double() - state_b[k]["sum"].double()).abs().max())
        for k in state_a
    )


@pytest.mark.parametrize("randomness", ["deterministic", "dropout_and_sampling"])
def test_resume_after_an_interrupted_epoch(randomness, tmp_path, monkeypatch):
    """
    Interrupt a 2-epoch run at the start of epoch 1, resume it with ``recover=True`` and compare
    with an uninterrupted run (same seeds: AllenNLP's default random/numpy/pytorch seeds).

    What AllenNLP 2.10 guarantees: the model, optimizer and metric tracker come back from the
    epoch-0 checkpoint, and the skipped epoch is *replayed through the training data loader* so
    that the reader's passes and the training batch sampler's Python RNG advance as in the
    uninterrupted run. What it does not replay:

    - the torch RNG: the replayed epoch runs no forward passes, so the resumed epoch's dropout
      masks and sampled-softmax negatives differ from the uninterrupted run's;
    - validation: the config's validation loader uses a ``bucket`` sampler, whose padding noise
      draws from Python's ``random`` once per instance (even with ``shuffle: false`` and
      ``padding_noise: 0``), so after the skipped validation the training sampler's Python RNG
      is off and epoch 1 sees different batches.

    With dropout 0, a full softmax (``num_samples`` >= vocabulary) and a plain validation loader
    (no sampler) nothing of that is left and the resumed run is bit-identical to the
    uninterrupted one. With the config as it is, the resumed run only ends close to it.
    """
    arguments = {
        **write_sample_subset(tmp_path / "data", train_lines=64, heldout_lines=16),
        **TINY_BILM,
        "batching": "sentences",
    }
    if randomness == "deterministic":
        arguments["num_samples"] = 1000  # >= 160 words: full softmax, no draws
        overrides = {
            "model.options.dropout": 0.0,
            "validation_data_loader": {"batch_size": 64, "shuffle": False},
        }
    else:
        arguments["num_samples"] = 16
        overrides = {}

    uninterrupted = tmp_path / "uninterrupted"
    train_bilm(uninterrupted, arguments, overrides)

    resumed = tmp_path / "resumed"
    # The trainer that the configs get: the plugin's "gradient_descent".
    trainer_class = Trainer.resolve_class_name("gradient_descent")[0]
    assert issubclass(trainer_class, GradientDescentTrainer)
    original_train_epoch = trainer_class._train_epoch

    def interrupt_at_epoch_1(self, epoch):
        if epoch == 1:
            raise KeyboardInterrupt  # like Ctrl-C once epoch 0 is checkpointed
        return original_train_epoch(self, epoch)

    with monkeypatch.context() as patch:
        patch.setattr(trainer_class, "_train_epoch", interrupt_at_epoch_1)
        with pytest.raises(KeyboardInterrupt):
            train_bilm(resumed, arguments, overrides)
    assert not (resumed / "metrics_epoch_1.json").exists()
    assert (resumed / "model_state_e1_b0.th").exists() and (resumed / "best.th").exists()
    epoch_0_metrics = (resumed / "metrics_epoch_0.json").read_bytes()
    epoch_0_state = (resumed / "model_state_e1_b0.th").read_bytes()

    model = train_bilm(resumed, arguments, overrides, recover=True)

    # Training went on from epoch 1: epoch 0 was not redone, epoch 1 was.
    assert (resumed / "metrics_epoch_0.json").read_bytes() == epoch_0_metrics
    assert (resumed / "model_state_e1_b0.th").read_bytes() == epoch_0_state
    final_metrics = json.loads((resumed / "metrics.json").read_text())
    assert final_metrics["epoch"] == 1
    assert (resumed / "model_state_e2_b0.th").exists()
    assert json.loads((resumed / "metrics_epoch_1.json").read_text())["epoch"] == 1

    # Epoch 0 is the same in both runs (same seeds, same data order).
    assert stable_metrics(resumed / "metrics_epoch_0.json") == stable_metrics(
        uninterrupted / "metrics_epoch_0.json"
    )
    assert max_state_difference(
        resumed / "model_state_e1_b0.th", uninterrupted / "model_state_e1_b0.th"
    ) == 0.0
    # The final states.
    weights_diff = max_state_difference(
        resumed / "model_state_e2_b0.th", uninterrupted / "model_state_e2_b0.th"
    )
    optimizer_diff = optimizer_state_difference(
        resumed / "training_state_e2_b0.th", uninterrupted / "training_state_e2_b0.th"
    )
    resumed_epoch_1 = stable_metrics(resumed / "metrics_epoch_1.json")
    uninterrupted_epoch_1 = stable_metrics(uninterrupted / "metrics_epoch_1.json")
    print(
        f"[{randomness}] resumed vs uninterrupted: max |weight diff| {weights_diff:.3g}, "
        f"max |Adagrad sum diff| {optimizer_diff:.3g}, validation ppl "
        f"{resumed_epoch_1['validation_ppl']:.4f} vs {uninterrupted_epoch_1['validation_ppl']:.4f}"
    )
    # Adagrad's state came back from the checkpoint: every parameter has the steps of both
    # epochs (64 sentences / 16 per batch = 4 batches per epoch).
    for path in (resumed, uninterrupted):
        states = adagrad_state(path / "training_state_e2_b0.th").values()
        steps = {float(state["step"]) for state in states}
        assert steps == {8.0}, (path.name, steps)
    if randomness == "deterministic":
        assert weights_diff == 0.0 and optimizer_diff == 0.0
        assert resumed_epoch_1 == uninterrupted_epoch_1
    else:
        # Different dropout masks, negatives and batches in epoch 1 (see the docstring): the
        # runs part ways. Measured here: the two end states are about as far apart as one
        # epoch's update, the held-out perplexities a few percent.
        assert weights_diff > 0.0
        gap = state_distance(
            resumed / "model_state_e2_b0.th", uninterrupted / "model_state_e2_b0.th"
        )
        step = state_distance(
            uninterrupted / "model_state_e1_b0.th", uninterrupted / "model_state_e2_b0.th"
        )
        print(f"[{randomness}] |resumed - uninterrupted| = {gap:.4g}, epoch 1 update {step:.4g}")
        assert resumed_epoch_1["validation_ppl"] < 160  # it did train on from the checkpoint
    # The returned model is the best epoch's.
    best = torch.load(resumed / "best.th")
    for name, parameter in model.state_dict().items():
        assert torch.equal(parameter, best[name]), name


def test_stream_batching_trains_one_epoch(tmp_path):
    arguments = {
        **write_sample_subset(tmp_path / "data", train_lines=64, heldout_lines=16),
        **TINY_BILM,
        "batching": "stream",
        "num_epochs": 1,
        "num_samples": 16,
        "batch_size": 4,
        # and in bfloat16 autocast, which must learn as well
        "mixed_precision": True,
    }
    run = tmp_path / "run"
    model = train_bilm(run, arguments, {})
    config = json.loads((run / "config.json").read_text())
    assert config["model"]["mixed_precision"] is True
    assert config["dataset_reader"]["mode"] == "stream"
    assert config["dataset_reader"]["batch_size"] == config["data_loader"]["batch_size"] == 4
    assert config["data_loader"]["type"] == "bilm_stream"
    assert config["validation_dataset_reader"]["mode"] == "sentences"
    metrics = json.loads((run / "metrics.json").read_text())
    assert metrics["epoch"] == 0
    keys = ("training_ppl", "training_forward_ppl", "validation_ppl", "validation_backward_ppl")
    for key in keys:
        assert math.isfinite(metrics[key]) and metrics[key] > 1.0, (key, metrics[key])
    # A 1-epoch model learned something: held-out perplexity well under the 160-word vocabulary.
    assert metrics["validation_ppl"] < 160
    # Validation (sentences mode) left the biLM stateless; the archive exports.
    assert not model.bilm.stateful
    paths = export_to_bilm_tf(run / "model.tar.gz", str(tmp_path / "export"))
    assert Path(paths["weights"]).exists()


# -- argument checks: a bad value is one error naming the argument, before training --------------


@pytest.mark.parametrize(
    "config, arguments, message",
    [
        ("bilm.jsonnet", {"num_epochs": 0}, "num_epochs must be an integer >= 1, got 0"),
        ("bilm.jsonnet", {"num_epochs": 1.5}, "num_epochs must be an integer >= 1, got 1.5"),
        ("bilm.jsonnet", {"num_epochs": "3"}, 'num_epochs must be an integer >= 1, got "3"'),
        ("bilm.jsonnet", {"batch_size": 0}, "batch_size must be an integer >= 1, got 0"),
        ("bilm.jsonnet", {"num_samples": -1}, "num_samples must be an integer >= 1, got -1"),
        ("bilm.jsonnet", {"unroll_steps": 2.5}, "unroll_steps must be an integer >= 1, got 2.5"),
        ("bilm.jsonnet", {"num_workers": -1}, "num_workers must be an integer >= 0, got -1"),
        ("bilm.jsonnet", {"cuda_device": "0"}, 'cuda_device must be an integer >= -1, got "0"'),
        ("bilm.jsonnet", {"mixed_precision": "yes"},
         'mixed_precision must be true or false, got "yes"'),
        ("bilm.jsonnet", {"batching": "windows"},
         'batching must be "sentences" or "stream", got "windows"'),
        ("bilm_small.jsonnet", {"steps_per_epoch": 0},
         "steps_per_epoch must be an integer >= 1, got 0"),
        ("bilm_small.jsonnet", {"num_epochs": 0}, "num_epochs must be an integer >= 1, got 0"),
        ("bilm_ko_small.jsonnet", {"steps_per_epoch": 99.5},
         "steps_per_epoch must be an integer >= 1, got 99.5"),
    ],
)
def test_bad_config_arguments_are_one_error_naming_them(tmp_path, config, arguments, message):
    called = config_calling(tmp_path / "config.jsonnet", config, **arguments)
    # Params.from_file is the first thing `allennlp train` does: the error comes before the
    # serialization directory is created.
    with pytest.raises(RuntimeError) as error:
        Params.from_file(str(called))
    assert message in str(error.value)


def test_zero_epochs_through_an_override_is_refused_when_training_starts(tmp_path):
    # -o overrides bypass the config's own checks; the check_training_settings callback (in
    # every biLM config) refuses before the first batch, instead of "best.th does not exist".
    from allennlp.common.checks import ConfigurationError

    arguments = {**write_sample_subset(tmp_path / "data", 6, 4), **TINY_BILM}
    config = config_calling(tmp_path / "run.jsonnet", "bilm.jsonnet", **arguments)
    params = Params.from_file(str(config)).as_dict(quiet=True)
    assert {"type": "check_training_settings"} in params["trainer"]["callbacks"]
    with pytest.raises(ConfigurationError, match="trainer.num_epochs must be an integer >= 1, got 0"):
        train_model_from_file(
            str(config),
            str(tmp_path / "run"),
            overrides=json.dumps(
                {"trainer.num_epochs": 0, "trainer.callbacks": [{"type": "check_training_settings"}]}
            ),
        )
    assert not (tmp_path / "run" / "best.th").exists()


def test_bilm_ko_small_warm_restart_continues_from_a_finished_run(tmp_path):
    # `make pretrain-ko`'s stages: stage 2 calls the config with continue_from=stage 1's
    # directory and learning_rate=0.001; it starts from all of stage 1's weights, and its
    # archive and export do not need stage 1 any more.
    from allennlp.models.archival import load_archive

    data = write_sample_subset(tmp_path / "data", train_lines=6, heldout_lines=4)
    tiny = {
        "model.options.lstm.dim": 16,
        "model.options.lstm.projection_dim": 8,
        "model.options.char_cnn.filters": [[1, 4], [2, 4]],
        "model.num_samples": 8,
        # The count for the learning rate's decay stays (linear_decay_over_corpus needs it).
        "trainer.callbacks": [{"type": "count_batches_per_epoch"}],
        # Three updates per stage: the decay's last update runs at rate 0, so a single-batch
        # stage would not change the weights.
        "data_loader.batch_sampler.batch_size": 2,
    }
    stage1 = tmp_path / "stage1"
    train_model_from_file(
        str(config_calling(tmp_path / "stage1.jsonnet", "bilm_ko_small.jsonnet", num_epochs=1, **data)),
        str(stage1),
        overrides=json.dumps(tiny),
    )
    stage1_weights = torch.load(stage1 / "best.th", map_location="cpu")

    stage2_config = config_calling(
        tmp_path / "stage2.jsonnet", "bilm_ko_small.jsonnet", num_epochs=1,
        continue_from=str(stage1), learning_rate=0.001, **data,
    )
    params = Params.from_file(str(stage2_config), params_overrides=json.dumps(tiny))
    assert params["trainer"]["optimizer"] == {"type": "adam", "lr": 0.001}
    vocab = Vocabulary.from_params(params.pop("vocabulary"))
    restarted = Model.from_params(vocab=vocab, params=params.pop("model"))
    for name, value in restarted.state_dict().items():
        assert torch.equal(value, stage1_weights[name]), name

    stage2 = tmp_path / "stage2"
    train_model_from_file(str(stage2_config), str(stage2), overrides=json.dumps(tiny))
    for path in sorted(stage1.rglob("*"), reverse=True):
        path.rmdir() if path.is_dir() else path.unlink()
    stage1.rmdir()
    trained = load_archive(str(stage2 / "model.tar.gz")).model
    assert not torch.equal(trained.softmax.softmax_weight, stage1_weights["softmax.softmax_weight"])
    written = export_to_bilm_tf(stage2 / "model.tar.gz", str(tmp_path / "bilm"))
    assert Path(written["weights"]).is_file()


# -- bilm_original.jsonnet: bilm-tf's published recipe ------------------------------------------


@pytest.mark.parametrize("num_gpus, rows_per_gpu", [(1, 384), (2, 192), (3, 128), (8, 48)])
def test_bilm_original_trains_384_rows_x_20_tokens_per_update(tmp_path, num_gpus, rows_per_gpu):
    called = config_calling(tmp_path / "config.jsonnet", "bilm_original.jsonnet", num_gpus=num_gpus)
    params = Params.from_file(str(called)).as_dict(quiet=True)
    reader, loader, trainer = params["dataset_reader"], params["data_loader"], params["trainer"]
    assert reader["mode"] == "stream" and reader["unroll_steps"] == 20
    assert reader["batch_size"] == loader["batch_size"] == rows_per_gpu
    assert rows_per_gpu * num_gpus == 384
    assert loader == {"type": "bilm_stream", "batch_size": rows_per_gpu, "parallel_directions": True}
    if num_gpus == 1:
        assert "distributed" not in params
    else:
        assert params["distributed"] == {"cuda_devices": list(range(num_gpus))}
    model = params["model"]
    assert model["num_samples"] == 8192 and model["sparse_softmax_gradients"] is True
    assert model["options"]["dropout"] == 0.1
    assert trainer["optimizer"] == {"type": "dense_sparse_adagrad", "lr": 0.2,
                                    "initial_accumulator_value": 1.0}
    assert trainer["grad_norm"] == 10.0 and trainer["num_epochs"] == 10


def test_bilm_original_refuses_a_number_of_gpus_that_does_not_divide_384(tmp_path):
    called = config_calling(tmp_path / "config.jsonnet", "bilm_original.jsonnet", num_gpus=5)
    with pytest.raises(RuntimeError, match="num_gpus must be 1, 2, 3, 4, 6 or 8"):
        Params.from_file(str(called))


def test_the_recipe_s_header_says_what_it_reproduces_and_that_its_time_is_projected():
    header = (CONFIG_DIR / "bilm_original.jsonnet").read_text(encoding="utf-8").split("local ")[0]
    for fact in ("10 passes over the", "1B Word Benchmark", "768,648,884", "793,471",
                 "384", "8,192", "Adagrad 0.2", "39.7", "PROJECTED, NOT MEASURED",
                 "session.sh day"):
        assert fact in header, fact
