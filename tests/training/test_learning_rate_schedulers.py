import torch
from allennlp.common import Params
from allennlp.training.learning_rate_schedulers import LearningRateScheduler

import elmo_plugin  # noqa: F401  (registers the replacement)
from elmo_plugin.training.learning_rate_schedulers import ReduceOnPlateauLearningRateScheduler


def _optimizer():
    return torch.optim.SGD([torch.nn.Parameter(torch.zeros(2))], lr=1.0)


def test_reduce_on_plateau_builds_from_a_config_and_lowers_the_rate():
    optimizer = _optimizer()
    scheduler = LearningRateScheduler.from_params(
        optimizer=optimizer,
        params=Params({"type": "reduce_on_plateau", "factor": 0.5, "patience": 1, "verbose": True}),
    )
    assert isinstance(scheduler, ReduceOnPlateauLearningRateScheduler)
    # The metric improves, then stalls: after `patience` stalled epochs the rate halves.
    for metric, expected_lr in [(1.0, 1.0), (0.5, 1.0), (0.5, 1.0), (0.5, 0.5), (0.5, 0.5), (0.5, 0.25)]:
        scheduler.step(metric)
        assert optimizer.param_groups[0]["lr"] == expected_lr


def test_reduce_on_plateau_state_round_trip():
    optimizer = _optimizer()
    scheduler = ReduceOnPlateauLearningRateScheduler(optimizer, factor=0.5, patience=0)
    scheduler.step(1.0)
    scheduler.step(2.0)
    state = scheduler.state_dict()
    restored = ReduceOnPlateauLearningRateScheduler(_optimizer(), factor=0.5, patience=0)
    restored.load_state_dict(state)
    assert restored.lr_scheduler.best == 1.0
    assert restored.lr_scheduler.num_bad_epochs == scheduler.lr_scheduler.num_bad_epochs


def test_a_training_config_with_reduce_on_plateau_trains(tmp_path):
    """The breakage users hit: `allennlp train` with this scheduler failed to start at all."""
    import json

    from allennlp.commands.train import train_model

    data = tmp_path / "data.jsonl"
    rows = [{"text": "good fine great", "label": "pos"}, {"text": "bad awful poor", "label": "neg"}]
    data.write_text("\n".join(json.dumps(row) for row in rows * 4) + "\n")
    params = Params(
        {
            "dataset_reader": {
                "type": "text_classification_json",
                "tokenizer": {"type": "whitespace"},
            },
            "train_data_path": str(data),
            "validation_data_path": str(data),
            "model": {
                "type": "basic_classifier",
                "text_field_embedder": {
                    "token_embedders": {"tokens": {"type": "embedding", "embedding_dim": 4}}
                },
                "seq2vec_encoder": {"type": "bag_of_embeddings", "embedding_dim": 4},
            },
            "data_loader": {"batch_size": 4},
            "trainer": {
                "num_epochs": 3,
                "optimizer": {"type": "sgd", "lr": 0.1},
                "learning_rate_scheduler": {"type": "reduce_on_plateau", "patience": 0},
                "cuda_device": -1,
            },
        }
    )
    model = train_model(params, str(tmp_path / "out"))
    assert model is not None
    metrics = json.loads((tmp_path / "out" / "metrics.json").read_text())
    assert metrics["epoch"] == 2  # all three epochs ran, the scheduler stepped after each
