"""
The learning rate's linear decay follows the corpus it trains on: ``bilm_small.jsonnet`` on a
corpus of another size than its default one counts that corpus's batches when training starts,
and the rate falls linearly to zero, reaching it at the last update.
"""
import json
import math
import warnings
from typing import Any, List

import pytest
import torch
from allennlp.commands.train import train_model_from_file
from allennlp.common.checks import ConfigurationError
from allennlp.training.callbacks.callback import TrainerCallback

from elmo_plugin.training.corpus_schedule import LinearDecayOverCorpus
from tests.helpers import config_calling
from tests.training_configs.test_bilm_configs import write_sample_subset

pytestmark = pytest.mark.usefixtures("single_thread")

RECORDED: List[float] = []


@TrainerCallback.register("test_record_learning_rate")
class RecordLearningRate(TrainerCallback):
    """Records the optimizer's rate after every training batch (after the scheduler's step)."""

    def on_batch(self, trainer: Any, *args: Any, is_training: bool = True, **kwargs: Any) -> None:
        if is_training:
            RECORDED.append(trainer.optimizer.param_groups[0]["lr"])


# bilm_small's recipe (Adam 0.002, linear decay) on a model small enough for a test.
TINY_MODEL = {
    "model.options.char_cnn.filters": [[1, 4], [2, 4]],
    "model.options.lstm.dim": 16,
    "model.options.lstm.projection_dim": 8,
    "model.num_samples": 32,
    "data_loader.batch_sampler.batch_size": 8,
}


@pytest.mark.parametrize("train_lines", [45, 17])
def test_the_rate_reaches_zero_at_the_last_update_of_a_corpus_of_any_size(tmp_path, train_lines):
    data = write_sample_subset(tmp_path / "data", train_lines=train_lines, heldout_lines=4)
    config = config_calling(tmp_path / "config.jsonnet", "bilm_small.jsonnet", num_epochs=2, **data)
    RECORDED.clear()
    overrides = dict(
        TINY_MODEL,
        **{
            "trainer.callbacks": [
                {"type": "count_batches_per_epoch"},
                {"type": "test_record_learning_rate"},
            ],
            "trainer.checkpointer": {"keep_most_recent_by_count": 1},
        },
    )
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        train_model_from_file(str(config), str(tmp_path / "run"), overrides=json.dumps(overrides))
    # Not torch's deprecation of AllenNLP's torch.cuda.amp.autocast (the plugin's trainer).
    assert [str(w.message) for w in caught if "autocast" in str(w.message)] == []
    batches = math.ceil(train_lines / 8)
    total = 2 * batches
    # One value per update, falling linearly from 0.002 to 0 over exactly this corpus's updates
    # (with the old fixed 3,165 batches per epoch the last one would still be ~0.002). AllenNLP
    # steps the scheduler before the optimizer, so update k runs at 0.002 * (1 - k / total) and
    # the last one at the schedule's end, 0.
    expected = [0.002 * (1 - step / total) for step in range(1, total + 1)]
    assert RECORDED == pytest.approx(expected, abs=1e-12)
    assert RECORDED[-1] == 0.0


def test_an_explicit_count_is_used_as_given():
    optimizer = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=1.0)
    scheduler = LinearDecayOverCorpus(optimizer, num_epochs=2, num_steps_per_epoch=10)
    scheduler.step_batch(5)
    assert optimizer.param_groups[0]["lr"] == pytest.approx(0.75)
    scheduler.step_batch(20)
    assert optimizer.param_groups[0]["lr"] == 0.0


def test_an_unknown_count_without_the_callback_is_one_error():
    optimizer = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=1.0)
    scheduler = LinearDecayOverCorpus(optimizer, num_epochs=2)
    assert optimizer.param_groups[0]["lr"] == 1.0  # step 0 needs no count
    with pytest.raises(ConfigurationError, match="count_batches_per_epoch"):
        scheduler.step_batch(1)


def test_counting_does_not_use_up_a_shuffle_pass_of_the_corpus(tmp_path):
    # bilm_corpus shuffles each pass by its number: the first epoch after the count must see
    # the order a reader that did not count sees first (and a resumed run, which does not count).
    from allennlp.common import Params
    from allennlp.data import DataLoader, DatasetReader

    from elmo_plugin.training.corpus_schedule import count_batches_per_epoch

    data = write_sample_subset(tmp_path / "data", train_lines=40, heldout_lines=4)
    config = config_calling(tmp_path / "config.jsonnet", "bilm_small.jsonnet", **data)
    reader_params = Params.from_file(str(config))["dataset_reader"].as_dict()
    reader_params.update(seed=7, shuffle=True)

    def first_pass(reader):
        return [" ".join(t.text for t in i["tokens"].tokens) for i in reader.read(data["train_data_path"])]

    untouched = first_pass(DatasetReader.from_params(Params(dict(reader_params))))
    counted_reader = DatasetReader.from_params(Params(dict(reader_params)))
    loader = DataLoader.from_params(
        Params({"batch_sampler": {"type": "bucket", "batch_size": 8, "sorting_keys": ["tokens"]},
                "max_instances_in_memory": 16}),
        reader=counted_reader,
        data_path=data["train_data_path"],
    )
    assert count_batches_per_epoch(loader) == 2 + 2 + 1  # chunks of 16, 16 and 8 sentences
    assert first_pass(counted_reader) == untouched
