"""
A trainer callback that holds a run at a known point, so that a test's signal lands there and not
after a tiny run has already finished (`start_training` of test_train_interrupts.py includes it
as a package of its own). It pauses ``TEST_PAUSE_SECONDS`` (environment; 0 when unset, so
that the same command resumes without pausing).
"""
import os
import time

from allennlp.training.callbacks.callback import TrainerCallback

PAUSE_SECONDS = "TEST_PAUSE_SECONDS"


@TrainerCallback.register("test_pause")
class PauseCallback(TrainerCallback):
    """Pauses before training (``after_epoch`` -1) or at the end of epoch ``after_epoch`` (from 0),
    before that epoch's checkpoint."""

    def __init__(self, serialization_dir: str, after_epoch: int = -1) -> None:
        super().__init__(serialization_dir)
        self.after_epoch = after_epoch

    def _pause(self) -> None:
        time.sleep(float(os.environ.get(PAUSE_SECONDS, "0")))

    def on_start(self, trainer, is_primary: bool = True, **kwargs) -> None:
        if self.after_epoch == -1:
            self._pause()

    def on_epoch(self, trainer, metrics, epoch: int, is_primary: bool = True, **kwargs) -> None:
        if epoch == self.after_epoch:
            self._pause()
