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
    The state to carry after a batch whose rows ended in ``final`` (detached), given the state
    carried so far (``stored``, None at first): ``final``'s rows, and the rows of ``stored``
    beyond them (rows this batch did not reach keep their state for later, larger batches).

    Eagerly, ``stored``'s own tensors, written in place where they can hold it: a step captured
    as a CUDA graph reads the state from the same addresses at every replay, and a batch's outputs
    may live in memory that the next replay writes over. Inside ``torch.compile``, new tensors:
    written in place there, the state came out right but the backward pass of the next batch
    read the state after it, not the one it started from (wrong gradients from the second batch
    on; the slow test of tests/training/test_captured_step.py).
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
