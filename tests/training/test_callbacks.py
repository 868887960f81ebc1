"""
The ``check_training_settings`` callback: refuses settings that would train nothing, which
AllenNLP's ``-o`` overrides can set after the configs checked their own arguments.
"""
from types import SimpleNamespace

import pytest
from allennlp.common.checks import ConfigurationError
from allennlp.training.callbacks.callback import TrainerCallback

from elmo_plugin.training.callbacks import CheckTrainingSettingsCallback


@pytest.mark.parametrize("num_epochs", [0, -1, 1.5, True, "2"])
def test_bad_num_epochs_is_refused_when_training_starts(tmp_path, num_epochs):
    callback = CheckTrainingSettingsCallback(str(tmp_path))
    with pytest.raises(ConfigurationError, match="trainer.num_epochs must be an integer >= 1"):
        callback.on_start(SimpleNamespace(_num_epochs=num_epochs))


def test_good_settings_and_other_trainers_pass(tmp_path):
    assert TrainerCallback.by_name("check_training_settings") is CheckTrainingSettingsCallback
    callback = CheckTrainingSettingsCallback(str(tmp_path))
    callback.on_start(SimpleNamespace(_num_epochs=1))
    callback.on_start(SimpleNamespace())  # a trainer without epochs: nothing to check
