"""
Does this device multiply in bfloat16 natively? Where it does not, PyTorch emulates bfloat16
products many times slower than float32, so inference's ``precision="bfloat16"`` and
pretraining's ``mixed_precision`` fall back to float32 with one warning.
"""
import logging
from typing import Dict, Union

import torch

from elmo_plugin.common import hardware


class NativeBfloat16:
    """
    Whether a device multiplies in bfloat16 natively (`hardware.bfloat16_support`), decided once
    per device with one line to the caller's ``logger``: the info ``used`` where it does, the
    warning ``not_used`` where it does not (``%s`` in each: the hardware's reason).
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
