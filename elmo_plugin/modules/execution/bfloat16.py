"""
Does this device multiply in bfloat16 natively? The one question of inference's
``precision="bfloat16"`` and pretraining's ``mixed_precision``: where it does not, PyTorch
emulates bfloat16 products many times slower than float32, so both fall back to float32 with
one warning.
"""
import logging
from typing import Dict, Union

import torch

from elmo_plugin.common import hardware


class NativeBfloat16:
    """
    Whether a device multiplies in bfloat16 natively (`hardware.bfloat16_support`), decided the
    first time a device is asked about, with one log line, and remembered.

    # Parameters

    used : `str`
        The info line where it does; ``%s`` is the hardware's reason.
    not_used : `str`
        The warning where it does not (the caller then runs in float32); ``%s`` is the reason.
    logger : `logging.Logger`
        The caller's logger, which the two lines go to.
    """

    def __init__(self, used: str, not_used: str, logger: logging.Logger) -> None:
        self.used = used
        self.not_used = not_used
        self.logger = logger
        self._by_device: Dict[torch.device, bool] = {}

    def on(self, device: Union[torch.device, str]) -> bool:
        device = torch.device(device)
        if device not in self._by_device:
            support = hardware.bfloat16_support(device)
            if support.native:
                self.logger.info(self.used, support.reason)
            else:
                self.logger.warning(self.not_used, support.reason)
            self._by_device[device] = support.native
        return self._by_device[device]
