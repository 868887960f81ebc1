"""
TF32 for float32 matrix products on a GPU: the one place that sets it, for training's and
inference's ``tf32`` options.

On an NVIDIA GPU since Ampere, TF32 multiplies float32 operands with a 10-bit mantissa and
accumulates in float32, several times faster than plain float32 products (issue 36: one H100's
float32 ceiling is about 100k Original training tokens/s, TF32's about 750k). PyTorch leaves it off
for matrix products by default (``torch.backends.cuda.matmul.allow_tf32``); cuDNN's convolutions
use it by default already (``torch.backends.cudnn.allow_tf32``), and that is left as it is.

On a CPU nothing here changes anything: the flag is CUDA's, and it is set only for a CUDA device
(oneDNN's own precision setting is not touched).
"""
import contextlib
from typing import Iterator, Optional, Union

import torch


def set_tf32(device: Union[torch.device, str], enabled: bool) -> bool:
    """
    For training: float32 matrix products on ``device`` use TF32 (``enabled``) or plain float32,
    from now on, in the whole process (the backward pass's products run after the forward pass
    returns, so a context around the forward pass would not reach them). Returns whether
    anything was set: False for any device but CUDA.
    """
    if torch.device(device).type != "cuda":
        return False
    torch.backends.cuda.matmul.allow_tf32 = bool(enabled)
    return True


@contextlib.contextmanager
def tf32_products(device: Union[torch.device, str], enabled: Optional[bool]) -> Iterator[None]:
    """
    For inference: within the context, float32 matrix products on ``device`` use TF32 where
    ``enabled`` is True, plain float32 where it is False; the setting before is restored after.
    None, or a device that is not CUDA, changes nothing.
    """
    if enabled is None or torch.device(device).type != "cuda":
        yield
        return
    before = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = bool(enabled)
    try:
        yield
    finally:
        torch.backends.cuda.matmul.allow_tf32 = before
