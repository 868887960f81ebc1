"""
How the LSTM state carried from one batch to the next (`ElmoBiLstm`'s ``stateful`` mode, stream
training) is kept: in buffers of the module's own, written in place eagerly, as new tensors
inside ``torch.compile``.
"""
from typing import Optional, Tuple

import torch

LstmState = Tuple[torch.Tensor, torch.Tensor]  # (h: (batch, projection), c: (batch, cell))


def carried_state(stored: Optional[LstmState], final: LstmState) -> LstmState:
    """
    The state to carry after a batch that ended in ``final`` (detached): its rows, then those of
    ``stored`` (None at first) beyond them. Eagerly in place into ``stored`` where it fits (a CUDA
    graph replays its addresses); new tensors under ``torch.compile`` (docs/implementation.md).
    """
    h, c = final
    stored_h, stored_c = stored if stored is not None else (None, None)
    if torch.compiler.is_compiling():
        if stored_h is not None and stored_h.size(0) > h.size(0):
            h = torch.cat([h, stored_h[h.size(0):]])
            c = torch.cat([c, stored_c[c.size(0):]])
        return h, c
    if (stored_h is None or stored_h.size(0) < h.size(0) or stored_h.dtype != h.dtype
            or stored_h.device != h.device):
        return h.clone(), c.clone()
    stored_h[: h.size(0)].copy_(h)
    stored_c[: c.size(0)].copy_(c)
    return stored_h, stored_c
