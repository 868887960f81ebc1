"""
The plugin's ``gradient_descent`` trainer where it differs from AllenNLP's: the loss and metrics
read at an interval (a NaN loss still stops training, and no checkpoint is written behind one),
the gradient norm handed on as a tensor, sparse row gradients clipped as their dense form, and
the settings checked before training, best.th written whole or not at all, and a run resumed
from its best epoch's checkpoint ending with that epoch's weights.
"""
import json
from pathlib import Path

import pytest
import torch
from allennlp.commands.train import train_model_from_file
from allennlp.common.checks import ConfigurationError
from allennlp.common.util import SigTermReceived

from elmo_plugin.models.elmo_language_model import ElmoLanguageModel
from elmo_plugin.training.trainer import DeviceCheckingGradientDescentTrainer, clip_grad_norm
from tests.helpers import config_calling
from tests.training_configs.test_bilm_configs import write_sample_subset

pytestmark = pytest.mark.usefixtures("single_thread")

TINY = dict(lstm_dim=16, projection_dim=8, batch_size=4, num_epochs=1, unroll_steps=10,
            num_samples=16, batching="stream")


def _config(tmp_path: Path, **arguments) -> Path:
    data = write_sample_subset(tmp_path / "data", train_lines=60, heldout_lines=8)
    return config_calling(tmp_path / "config.jsonnet", "bilm.jsonnet", **data, **{**TINY, **arguments})


def test_a_nan_loss_stops_training_before_any_checkpoint_behind_it(tmp_path, monkeypatch):
    forward = ElmoLanguageModel.forward
    calls = {"training": 0}

    def nan_at_the_third_batch(self, **inputs):
        output = forward(self, **inputs)
        if self.training:
            calls["training"] += 1
            if calls["training"] == 3:
                output["loss"] = output["loss"] * float("nan")
        return output

    monkeypatch.setattr(ElmoLanguageModel, "forward", nan_at_the_third_batch)
    run = tmp_path / "run"
    with pytest.raises(ValueError, match="nan loss encountered"):
        train_model_from_file(str(_config(tmp_path)), str(run), overrides=json.dumps({
            "trainer.callbacks": [], "trainer.metrics_every_num_batches": 100,
            # A checkpoint after every batch: the one after the third must not be written.
            "trainer.checkpointer": {"save_every_num_batches": 1},
        }))
    written = sorted(path.name for path in run.glob("model_state_*"))
    assert written == ["model_state_e0_b1.th", "model_state_e0_b2.th"], written


def test_the_reads_interval_is_checked(tmp_path):
    with pytest.raises(ConfigurationError,
                       match="trainer.metrics_every_num_batches must be an integer >= 1, got 0"):
        train_model_from_file(str(_config(tmp_path)), str(tmp_path / "run"), overrides=json.dumps(
            {"trainer.callbacks": [], "trainer.metrics_every_num_batches": 0}))


def test_the_callbacks_get_the_gradient_norm_as_a_tensor_and_the_metrics_when_read(tmp_path, monkeypatch):
    from allennlp.training.callbacks import TrainerCallback

    seen = []

    @TrainerCallback.register("record_batches_for_test")
    class Recording(TrainerCallback):
        def on_batch(self, trainer, batch_inputs, batch_outputs, batch_metrics, epoch,
                     batch_number, is_training, is_primary=True, batch_grad_norm=None, **kwargs):
            # Read during the batch (a callback that reads them pays for the device read).
            seen.append((batch_number, batch_grad_norm, dict(batch_metrics) if batch_number == 4 else None))

    try:
        train_model_from_file(str(_config(tmp_path)), str(tmp_path / "run"), overrides=json.dumps({
            "trainer.callbacks": [{"type": "record_batches_for_test"}]}))
    finally:
        del TrainerCallback._registry[TrainerCallback]["record_batches_for_test"]
    assert len(seen) > 5
    number, norm, metrics = seen[3]
    assert isinstance(norm, torch.Tensor) and norm.dim() == 0 and float(norm) > 0
    # Read when asked: the running loss and the model's perplexity, as AllenNLP gives them.
    assert set(metrics) >= {"loss", "batch_loss", "ppl", "forward_ppl", "backward_ppl"}
    assert metrics["loss"] > 0 and metrics["ppl"] > 1


def test_clip_grad_norm_takes_sparse_row_gradients_as_their_dense_form():
    torch.manual_seed(0)
    dense = torch.nn.Parameter(torch.randn(30, 4))
    sparse = torch.nn.Parameter(dense.detach().clone())
    other = [torch.nn.Parameter(torch.randn(5)) for _ in range(2)]
    ids = torch.tensor([3, 7, 3, 3, 29, 7])
    rows = torch.randn(6, 4) * 10
    dense.grad = torch.zeros(30, 4).index_add_(0, ids, rows)
    sparse.grad = torch.sparse_coo_tensor(ids.unsqueeze(0), rows, (30, 4), check_invariants=True)
    for parameter in other:
        parameter.grad = torch.randn(5)
    reference = [p.grad.clone() for p in other]
    expected = torch.nn.utils.clip_grad_norm_([dense, *other], 1.0)
    for parameter, gradient in zip(other, reference):
        parameter.grad = gradient.clone()
    norm = clip_grad_norm([sparse, *other], 1.0)
    assert float(expected) > 1.0  # the clip binds
    assert torch.allclose(norm, expected, rtol=1e-6)
    assert torch.allclose(sparse.grad.to_dense(), dense.grad, rtol=1e-6, atol=1e-7)


def test_sparse_softmax_gradients_with_an_optimizer_that_cannot_take_them_are_refused(tmp_path):
    with pytest.raises(ConfigurationError, match=r"model.sparse_softmax_gradients is true, but "
                                                 r"trainer.optimizer \(AdamOptimizer\) cannot take "
                                                 r"sparse gradients"):
        train_model_from_file(str(_config(tmp_path)), str(tmp_path / "run"), overrides=json.dumps({
            "trainer.optimizer": {"type": "adam"}}))


def test_best_th_is_whole_or_absent(tmp_path, monkeypatch):
    trainer = object.__new__(DeviceCheckingGradientDescentTrainer)
    trainer._ddp_wrapped_model, trainer.model = None, torch.nn.Linear(2, 1)
    saved = torch.save

    def stopped_while_writing(value, path, *args, **kwargs):
        saved(value, path, *args, **kwargs)
        raise SigTermReceived()

    with monkeypatch.context() as patch:
        patch.setattr(torch, "save", stopped_while_writing)
        with pytest.raises(SigTermReceived):
            trainer._save_model_state(str(tmp_path / "best.th"))
    assert list(tmp_path.iterdir()) == []  # AllenNLP's left the file it was writing
    trainer._save_model_state(str(tmp_path / "best.th"))
    assert torch.equal(torch.load(tmp_path / "best.th")["weight"], trainer.model.weight)


def test_a_sigterm_swallowed_during_a_batch_stops_training_before_the_next(tmp_path, monkeypatch):
    from allennlp.training.callbacks import TrainerCallback

    from elmo_plugin.common import termination

    batches = []

    @TrainerCallback.register("swallow_a_sigterm_for_test")
    class SwallowingSigterm(TrainerCallback):
        def on_batch(self, trainer, *args, **kwargs):
            batches.append(trainer._batches_in_epoch_completed)
            termination._received = SigTermReceived  # as watch_interruptions records a SIGTERM that code swallowed

    monkeypatch.setattr(termination, "_received", None)
    try:
        with pytest.raises(SigTermReceived):
            train_model_from_file(str(_config(tmp_path)), str(tmp_path / "run"), overrides=json.dumps({
                "trainer.callbacks": [{"type": "swallow_a_sigterm_for_test"}]}))
    finally:
        del TrainerCallback._registry[TrainerCallback]["swallow_a_sigterm_for_test"]
    assert batches == [1]


def _weights(path: Path) -> dict:
    return torch.load(path, map_location="cpu")


@pytest.mark.parametrize("window", [False, True])
def test_a_run_resumed_from_its_best_epochs_checkpoint_ends_with_that_epochs_weights(tmp_path, window):
    # AllenNLP saves an epoch's checkpoint, then links best.th to it (removing the old best.th
    # first); the checkpoint of the first best epoch does not name best.th yet. A run resumed
    # from it ended with its last epoch's weights, and without best.th (a signal between the
    # removal and the link: ``window``) made no archive. "+ppl": the first epoch stays the best.
    from allennlp.training.callbacks import TrainerCallback

    interrupted = []

    @TrainerCallback.register("interrupt_the_second_epoch_once_for_test")
    class InterruptOnce(TrainerCallback):
        def on_batch(self, trainer, *args, **kwargs):
            if trainer._epochs_completed == 1 and not interrupted:
                interrupted.append(True)
                raise KeyboardInterrupt()

    config, run = str(_config(tmp_path, num_epochs=3)), tmp_path / "run"
    overrides = json.dumps({"trainer.validation_metric": "+ppl",
                            "trainer.callbacks": [{"type": "interrupt_the_second_epoch_once_for_test"}]})
    try:
        with pytest.raises(KeyboardInterrupt):
            train_model_from_file(config, str(run), overrides=overrides)
        best_epoch = _weights(run / "model_state_e1_b0.th")
        if window:
            (run / "best.th").unlink()
        model = train_model_from_file(config, str(run), overrides=overrides, recover=True, return_model=True)
    finally:
        del TrainerCallback._registry[TrainerCallback]["interrupt_the_second_epoch_once_for_test"]
    assert json.loads((run / "metrics.json").read_text())["best_epoch"] == 0
    assert sorted(best_epoch) == sorted(model.state_dict())
    for name, value in model.state_dict().items():
        assert torch.equal(value, best_epoch[name]), name
    for name, value in _weights(run / "best.th").items():
        assert torch.equal(value, best_epoch[name]), name
    assert (run / "model.tar.gz").is_file()
