"""
One direction of one ELMo LSTM layer: an LSTM with a projection, cell and projection clipping,
in TensorFlow's ``LSTMCell(num_proj=..., cell_clip=..., proj_clip=...)`` arithmetic.
"""
from typing import Optional, Tuple

import torch
from torch import nn

LstmState = Tuple[torch.Tensor, torch.Tensor]  # (h: (batch, projection), c: (batch, cell))


class ProjectedLstmLayer(nn.Module):
    """
    An LSTM layer whose output (and recurrent state) is a clipped projection of the cell output.

    Parameters keep TensorFlow's layout so that bilm-tf weights load without reordering: the gate
    blocks of ``input_weight``, ``recurrent_weight`` and ``bias`` are ordered i, j (candidate),
    f, o, and ``bias`` is TensorFlow's stored ``B``, *without* the forget bias of 1.0 that
    ``LSTMCell`` adds at run time; we add it in ``forward`` too.

    # Parameters

    input_size : `int`
        Size of each input vector.
    cell_size : `int`
        Size of the cell state (``lstm.dim``).
    projection_size : `int`
        Size of the output and of the recurrent state (``lstm.projection_dim``).
    cell_clip : `float`, optional
        Clip the cell state to ``[-cell_clip, cell_clip]`` after every update.
    proj_clip : `float`, optional
        Clip the projected output to ``[-proj_clip, proj_clip]``.
    forget_bias : `float`, optional (default = `1.0`)
        Added to the forget gate's pre-activation, as TensorFlow's ``LSTMCell`` does.
    """

    def __init__(
        self,
        input_size: int,
        cell_size: int,
        projection_size: int,
        cell_clip: Optional[float] = None,
        proj_clip: Optional[float] = None,
        forget_bias: float = 1.0,
    ) -> None:
        super().__init__()
        self.input_size = input_size
        self.cell_size = cell_size
        self.projection_size = projection_size
        self.cell_clip = cell_clip
        self.proj_clip = proj_clip
        self.forget_bias = forget_bias
        self.input_weight = nn.Parameter(torch.empty(4 * cell_size, input_size))
        self.recurrent_weight = nn.Parameter(torch.empty(4 * cell_size, projection_size))
        self.bias = nn.Parameter(torch.empty(4 * cell_size))
        self.projection_weight = nn.Parameter(torch.empty(projection_size, cell_size))
        self.reset_parameters()

    def reset_parameters(self) -> None:
        # Glorot-uniform over TensorFlow's concatenated kernel [input; recurrent], zero bias:
        # TensorFlow's defaults, which bilm-tf trained with.
        with torch.no_grad():
            bound = (6.0 / (self.input_size + self.projection_size + 4 * self.cell_size)) ** 0.5
            nn.init.uniform_(self.input_weight, -bound, bound)
            nn.init.uniform_(self.recurrent_weight, -bound, bound)
            self.bias.zero_()
            bound = (6.0 / (self.cell_size + self.projection_size)) ** 0.5
            nn.init.uniform_(self.projection_weight, -bound, bound)

    def _effective_bias(self) -> torch.Tensor:
        offset = torch.zeros_like(self.bias)
        offset[2 * self.cell_size : 3 * self.cell_size] = self.forget_bias
        return self.bias + offset

    def zero_state(self, batch_size: int, like: torch.Tensor) -> LstmState:
        return (
            like.new_zeros(batch_size, self.projection_size),
            like.new_zeros(batch_size, self.cell_size),
        )

    def forward(
        self,
        inputs: torch.Tensor,
        mask: torch.Tensor,
        initial_state: Optional[LstmState] = None,
    ) -> Tuple[torch.Tensor, LstmState]:
        """
        # Parameters

        inputs : `torch.Tensor`
            ``(batch, time, input_size)``, every row left-aligned (padding only at the end).
        mask : `torch.BoolTensor`
            ``(batch, time)``, True at real positions.
        initial_state : `LstmState`, optional
            ``(h, c)``; zeros if not given.

        # Returns

        ``outputs``: ``(batch, time, projection_size)``, zero at padded positions, and the final
        state ``(h, c)`` of each row: its state after its own last real position.
        """
        batch_size, num_steps, _ = inputs.shape
        h, c = initial_state if initial_state is not None else self.zero_state(batch_size, inputs)
        # The input half of every gate for all time steps at once: one large matrix multiply
        # instead of one per step. Time-major and unbound once, so each step reads a contiguous
        # slice and backward stacks the step gradients once; indexing `input_gates[:, step]`
        # instead makes autograd zero-fill and add a whole (batch, time, 4 * cell) gradient per
        # step, which is quadratic in the sentence length and was a third of a training step.
        step_input_gates = torch.addmm(
            self._effective_bias(),
            inputs.transpose(0, 1).reshape(-1, self.input_size),
            self.input_weight.t(),
        ).view(num_steps, batch_size, 4 * self.cell_size).unbind(0)
        recurrent_weight = self.recurrent_weight.t()
        projection_weight = self.projection_weight.t()
        lengths = mask.sum(dim=1)
        # Before the shortest row ends, every row is active and no state needs protecting.
        all_active_steps = int(lengths.min()) if batch_size > 0 else 0
        step_mask = mask.unsqueeze(-1)

        outputs = []
        for step in range(num_steps):
            gates = torch.addmm(step_input_gates[step], h, recurrent_weight)
            i, j, f, o = gates.chunk(4, dim=1)
            new_c = torch.sigmoid(i) * torch.tanh(j) + torch.sigmoid(f) * c
            if self.cell_clip is not None:
                new_c = torch.clamp(new_c, -self.cell_clip, self.cell_clip)
            new_h = torch.mm(torch.sigmoid(o) * torch.tanh(new_c), projection_weight)
            if self.proj_clip is not None:
                new_h = torch.clamp(new_h, -self.proj_clip, self.proj_clip)
            if step < all_active_steps:
                h, c = new_h, new_c
            else:
                active = step_mask[:, step]
                h = torch.where(active, new_h, h)
                c = torch.where(active, new_c, c)
                new_h = new_h * active
            outputs.append(new_h)
        if outputs:
            output = torch.stack(outputs, dim=1)
        else:
            output = inputs.new_zeros(batch_size, 0, self.projection_size)
        return output, (h, c)
