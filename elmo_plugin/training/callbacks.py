"""
Trainer callbacks of the plugin.
"""
import logging
from typing import Any

from allennlp.training.callbacks.callback import TrainerCallback

from elmo_plugin.common.memory import keep_freed_memory_for_reuse

logger = logging.getLogger(__name__)


@TrainerCallback.register("keep_freed_memory")
class KeepFreedMemoryCallback(TrainerCallback):
    """
    Applies `keep_freed_memory_for_reuse` when training starts: CPU training steps of the
    Original-size biLM ran about 30% faster. Only host memory is affected; on a GPU the tensors
    live in PyTorch's own caching allocator (not measured there).
    """

    def on_start(
        self, trainer: Any, is_primary: bool = True, **kwargs: Any
    ) -> None:
        if keep_freed_memory_for_reuse():
            logger.info("glibc keeps freed memory for reuse during training")
