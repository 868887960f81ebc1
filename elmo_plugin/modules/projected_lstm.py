"""
One direction of one ELMo LSTM layer: an LSTM with a projection, cell and projection clipping,
in TensorFlow's ``LSTMCell(num_proj=..., cell_clip=..., proj_clip=...)`` arithmetic.
"""
from typing import List, Optional, Tuple

import torch
from torch import nn

from elmo_plugin.modules.autocast_weight_copies import (
    AutocastWeightCopies,
    keep_copies_after_unpickling,
)
from elmo_plugin.modules import projected_lstm_recurrence
from elmo_plugin.modules.projected_lstm_recurrence import ProjectedLstmRecurrence, run_recurrence

LstmState = Tuple[torch.Tensor, torch.Tensor]  # (h: (batch, projection), c: (batch, cell))


class ProjectedLstmLayer(nn.Module):
    """
    An LSTM layer whose output (and recurrent state) is a clipped projection of the cell output.

    Parameters keep TensorFlow's layout so that bilm-tf weights load without reordering: matrices
    are ``(in, out)`` (``input_weight`` and ``recurrent_weight`` are the two row blocks of
    TensorFlow's kernel ``W_0``, ``projection_weight`` is ``W_P_0``), the gate blocks of their
    columns and of ``bias`` are ordered i, j (candidate), f, o, and ``bias`` is TensorFlow's
    stored ``B``, *without* the forget bias of 1.0 that ``LSTMCell`` adds at run time; we add it
    in ``forward`` too. The ``(in, out)`` layout is also the fast one: multiplying a few rows of
    states by Original's 32 MB recurrent matrix runs twice as fast as by a transposed view of a
    PyTorch-style ``(out, in)`` matrix (MKL, batch 1: 1.7 ms against 3.4 ms per step).

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
        self.input_weight = nn.Parameter(torch.empty(input_size, 4 * cell_size))
        self.recurrent_weight = nn.Parameter(torch.empty(projection_size, 4 * cell_size))
        self.bias = nn.Parameter(torch.empty(4 * cell_size))
        self.projection_weight = nn.Parameter(torch.empty(cell_size, projection_size))
        # The three weights in autocast's dtype for frozen inference (`_matmul_weights`); not
        # a buffer, so not in the state dict.
        self._matmul_weight_copies = AutocastWeightCopies()
        # The recurrent and projection weights transposed, in that dtype, for the steps of few
        # rows in CPU inference (`_few_rows_weights`).
        self._few_rows_weight_copies = AutocastWeightCopies()
        self.reset_parameters()

    def __setstate__(self, state: dict) -> None:
        super().__setstate__(state)
        keep_copies_after_unpickling(self, "_matmul_weight_copies")
        keep_copies_after_unpickling(self, "_few_rows_weight_copies")

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

    def _matmul_weights(self, matmul_dtype: torch.dtype, frozen: bool) -> Tuple[torch.Tensor, ...]:
        """
        The input, recurrent and projection weights in ``matmul_dtype`` (the products' dtype
        under autocast); for inference with frozen weights, copies kept between calls
        (`AutocastWeightCopies`: converting all of an Original biLM's LSTM weights took 4% of a
        bfloat16 batch of 64 on a 2-core AMX Xeon, on every call).
        """
        weights = (self.input_weight, self.recurrent_weight, self.projection_weight)
        return self._matmul_weight_copies.get(weights, matmul_dtype, frozen)

    def _few_rows_weights(
        self, matmul_dtype: torch.dtype, step_sizes: List[int], device_type: str
    ) -> Optional[Tuple[torch.Tensor, ...]]:
        """
        For frozen inference on a CPU whose products run in a narrower dtype than the
        parameters' (bfloat16 under autocast): the recurrent and projection weights transposed,
        in ``matmul_dtype``, kept between calls, if any step runs at most `FEW_ROWS_MAX` rows
        (`_run_inference` multiplies those steps by them: faster there); else None. In float32
        both layouts run at the same speed, and on a GPU this was not measured.
        """
        if (
            device_type != "cpu"
            or matmul_dtype == self.recurrent_weight.dtype
            # Read here, not imported: one setting for this check and the loop's.
            or step_sizes[-1] > projected_lstm_recurrence.FEW_ROWS_MAX
        ):
            return None
        weights = (self.recurrent_weight, self.projection_weight)
        return self._few_rows_weight_copies.get(weights, matmul_dtype, frozen=True, transposed=True)

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
        if batch_size == 0 or num_steps == 0:
            return inputs.new_zeros(batch_size, num_steps, self.projection_size), (h, c)
        lengths = mask.sum(dim=1)
        if int(lengths.max()) == 0:
            return inputs.new_zeros(batch_size, num_steps, self.projection_size), (h, c)
        # Rows longest first, so that the rows still running at any step are a prefix of the
        # batch: each step then multiplies only those rows, and padding costs nothing (as in
        # PyTorch's PackedSequence). Batches of 64 consecutive held-out sentences were 70-81%
        # padding.
        sorted_lengths, order = lengths.sort(descending=True, stable=True)
        in_order = bool((order == torch.arange(batch_size, device=order.device)).all())
        if not in_order:
            inputs, h, c = inputs[order], h[order], c[order]
        # Rebuilt from the lengths, so that it agrees with the step sizes however it was given.
        positions = torch.arange(num_steps, device=lengths.device).unsqueeze(0)
        mask = positions < sorted_lengths.unsqueeze(1)
        step_sizes = self._rows_per_step(sorted_lengths.tolist())
        time_major = inputs.transpose(0, 1)
        full = len(step_sizes) == num_steps and step_sizes[-1] == batch_size
        # The real positions, step by step, each step's rows a prefix: (real positions, input).
        packed = time_major.reshape(-1, self.input_size) if full else time_major[mask.t()]
        # The input half of every gate for all steps at once: one large matrix multiply instead
        # of one per step, and in training one for its gradient too (the recurrence's backward
        # returns the gradient of all steps' gates as one tensor).
        needs_gradient = torch.is_grad_enabled() and any(
            tensor.requires_grad
            for tensor in (inputs, h, c, self.input_weight, self.recurrent_weight,
                           self.bias, self.projection_weight)
        )
        # Under autocast (mixed-precision training, bfloat16 inference) the products run in the
        # autocast dtype: the input product below, and the recurrence's per-step products, for
        # which it gets the two weights in that dtype. Its states, gates and cell sums stay in
        # the parameters' dtype, because the cell state accumulates over the steps (bfloat16
        # keeps 8 bits of mantissa).
        dtype = self.recurrent_weight.dtype
        input_weight, recurrent_weight, projection_weight = (
            self.input_weight, self.recurrent_weight, self.projection_weight)
        device_type = inputs.device.type
        if torch.is_autocast_enabled(device_type):
            input_weight, recurrent_weight, projection_weight = self._matmul_weights(
                torch.get_autocast_dtype(device_type), frozen=not needs_gradient)
        input_gates = torch.addmm(self._effective_bias(), packed, input_weight)
        h, c = h.to(dtype), c.to(dtype)
        # Inference on a CPU widens the input gates step by step instead (`_run_inference`
        # says why); on a GPU, where a step's time is mostly its kernel launches, one more
        # kernel per step would cost more than widening them all at once.
        if needs_gradient or device_type != "cpu":
            input_gates = input_gates.to(dtype)
        if needs_gradient:
            packed_output, h, c = ProjectedLstmRecurrence.apply(
                input_gates, h, c, recurrent_weight, projection_weight, step_sizes,
                self.cell_clip, self.proj_clip,
            )
        else:
            packed_output, h, c, _ = run_recurrence(
                input_gates, h, c, recurrent_weight, projection_weight, step_sizes,
                self.cell_clip, self.proj_clip, keep_for_backward=False,
                few_rows_weights=self._few_rows_weights(
                    recurrent_weight.dtype, step_sizes, device_type),
            )
        if full:
            output = packed_output.view(num_steps, batch_size, self.projection_size)
        else:
            output = packed_output.new_zeros(num_steps, batch_size, self.projection_size)
            output = output.index_put((mask.t(),), packed_output)
        output = output.transpose(0, 1)
        if not in_order:
            restore = torch.empty_like(order)
            restore[order] = torch.arange(batch_size, device=order.device)
            output, h, c = output[restore], h[restore], c[restore]
        return output, (h, c)

    @staticmethod
    def _rows_per_step(sorted_lengths: List[int]) -> List[int]:
        """For lengths sorted longest first: how many rows are still running at each step."""
        rows = len(sorted_lengths)
        sizes = []
        for step in range(sorted_lengths[0] if sorted_lengths else 0):
            while rows > 0 and sorted_lengths[rows - 1] <= step:
                rows -= 1
            sizes.append(rows)
        return sizes
