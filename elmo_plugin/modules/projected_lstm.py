"""
One direction of one ELMo LSTM layer: an LSTM with a projection, cell and projection clipping,
in TensorFlow's ``LSTMCell(num_proj=..., cell_clip=..., proj_clip=...)`` arithmetic.
"""
from typing import Optional, Tuple

import torch
from torch import nn

from elmo_plugin.modules.execution.lstm_layer import LstmState, run_layer
from elmo_plugin.modules.execution.lstm_recurrence import LstmWeights
from elmo_plugin.modules.execution.plan import ExecutionPlan


class ProjectedLstmLayer(nn.Module):
    """
    An LSTM layer whose output (and recurrent state) is a clipped projection of the cell output,
    its parameters in TensorFlow's layout (docs/implementation.md, "Weight layouts"): ``(in, out)``
    matrices, gate blocks i, j, f, o, and ``bias`` without the forget bias, added at run time.

    One step, for gates ``z = x W_in + h W_rec + bias`` split into blocks i, j, f, o:
    ``c = sigmoid(f + forget_bias) * c + sigmoid(i) * tanh(j)``, clipped to ``cell_clip``;
    ``h = (sigmoid(o) * tanh(c)) W_proj``, clipped to ``proj_clip``; run over a batch by
    `elmo_plugin.modules.execution.lstm_layer`.

    # Parameters

    input_size, cell_size, projection_size : `int`
        Sizes of each input, the cell state (``lstm.dim``), the output and recurrent state
        (``lstm.projection_dim``).
    cell_clip, proj_clip : `float`, optional
        The bounds of the cell state and of the projected output.
    forget_bias : `float`, optional (default = `1.0`)
        Added to the forget gate's pre-activation (TensorFlow's ``LSTMCell``).
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
        self.input_weight = nn.Parameter(torch.empty(input_size, 4 * cell_size))
        self.recurrent_weight = nn.Parameter(torch.empty(projection_size, 4 * cell_size))
        self.bias = nn.Parameter(torch.empty(4 * cell_size))
        self.projection_weight = nn.Parameter(torch.empty(cell_size, projection_size))
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

    def effective_bias(self) -> torch.Tensor:
        """``bias`` with the forget bias added to the forget gate's block."""
        offset = torch.zeros_like(self.bias)
        offset[2 * self.cell_size : 3 * self.cell_size] = self.forget_bias
        return self.bias + offset

    def recurrence_weights(self) -> LstmWeights:
        """What the recurrence computes with: the recurrent and projection weights, the clips."""
        return LstmWeights(self.recurrent_weight, self.projection_weight, self.cell_clip,
                           self.proj_clip)

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
        execution: Optional[ExecutionPlan] = None,
    ) -> Tuple[torch.Tensor, LstmState]:
        """
        # Parameters

        inputs : `torch.Tensor`
            ``(batch, time, input_size)``, every row left-aligned (padding only at the end).
        mask : `torch.BoolTensor`
            ``(batch, time)``, True at real positions.
        initial_state : `LstmState`, optional
            ``(h, c)``; zeros if not given.
        execution : `ExecutionPlan`, optional
            How it runs; None: plain PyTorch.

        # Returns

        ``outputs``: ``(batch, time, projection_size)``, zero at padded positions, and each row's
        final state ``(h, c)``, after its own last real position.
        """
        if initial_state is None:
            initial_state = self.zero_state(inputs.size(0), inputs)
        return run_layer(inputs, mask, initial_state, self.input_weight, self.effective_bias(),
                         self.recurrence_weights(), execution)
