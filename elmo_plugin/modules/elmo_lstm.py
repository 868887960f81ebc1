"""
ELMo's bidirectional LSTM stack: separate forward and backward stacks of
`ProjectedLstmLayer`s, optional skip connections, and optional state carried across batches.
"""
from typing import List, Optional

import torch
from torch import nn

from elmo_plugin.modules.execution.carried_state import carried_state
from elmo_plugin.modules.execution.plan import ExecutionPlan
from elmo_plugin.modules.projected_lstm import LstmState, ProjectedLstmLayer


def reverse_within_lengths(tensor: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
    """Each row of ``(batch, time, ...)`` reversed within its length (``tf.reverse_sequence``)."""
    num_steps = tensor.size(1)
    positions = torch.arange(num_steps, device=tensor.device).unsqueeze(0)
    reversed_positions = lengths.unsqueeze(1) - 1 - positions
    index = torch.where(reversed_positions >= 0, reversed_positions, positions)
    index = index.view(*index.shape, *([1] * (tensor.dim() - 2))).expand_as(tensor)
    return tensor.gather(1, index)


class ElmoBiLstm(nn.Module):
    """
    Forward and backward LSTM stacks over the same inputs, as in bilm-tf.

    # Parameters

    input_size, cell_size, projection_size, cell_clip, proj_clip
        As `ProjectedLstmLayer`'s (``input_size``: the first layer's).
    num_layers : `int`
        Layers per direction.
    use_skip_connections : `bool`, optional (default = `True`)
        Add each layer's input to its output after the first layer (TensorFlow's ``ResidualWrapper``).
    dropout : `float`, optional (default = `0.0`)
        Dropout on every layer's input while training (bilm-tf's ``DropoutWrapper``).
    stateful : `bool`, optional (default = `False`)
        Each row's final state starts the same row in the next batch (bilm-tf's behaviour); rows
        beyond the largest batch seen start from zero, and ``reset_states()`` forgets everything.
        If False, every batch starts from zero, so a sentence always gets the same vectors.
    """

    def __init__(
        self,
        input_size: int,
        cell_size: int,
        projection_size: int,
        num_layers: int,
        cell_clip: Optional[float] = None,
        proj_clip: Optional[float] = None,
        use_skip_connections: bool = True,
        dropout: float = 0.0,
        stateful: bool = False,
    ) -> None:
        super().__init__()
        if num_layers < 1:
            raise ValueError(f"num_layers must be at least 1, got {num_layers}")
        if use_skip_connections and num_layers > 1 and input_size != projection_size:
            raise ValueError(
                "skip connections need input_size == projection_size, got "
                f"{input_size} and {projection_size}"
            )
        self.input_size = input_size
        self.cell_size = cell_size
        self.projection_size = projection_size
        self.num_layers = num_layers
        self.use_skip_connections = use_skip_connections
        self.dropout = dropout
        self.stateful = stateful

        def make_layer(layer_index: int) -> ProjectedLstmLayer:
            size = input_size if layer_index == 0 else projection_size
            return ProjectedLstmLayer(size, cell_size, projection_size, cell_clip, proj_clip)

        self.forward_layers = nn.ModuleList([make_layer(i) for i in range(num_layers)])
        self.backward_layers = nn.ModuleList([make_layer(i) for i in range(num_layers)])
        # states[direction][layer] = (h, c) for every row seen so far; None until the first batch.
        self._states: Optional[List[List[LstmState]]] = None

    def get_output_dim(self) -> int:
        return 2 * self.projection_size

    def reset_states(self) -> None:
        """Forget the carried state: the next batch starts from zero."""
        self._states = None

    def _initial_state(
        self, direction: int, layer: int, batch_size: int, like: torch.Tensor
    ) -> Optional[LstmState]:
        if not self.stateful or self._states is None or self._states[direction][layer][0] is None:
            return None
        stored = self._states[direction][layer]
        rows = min(batch_size, stored[0].size(0))
        state = []
        for tensor in stored:  # h, then c
            initial = like.new_zeros(batch_size, tensor.size(1))
            initial[:rows] = tensor[:rows].to(like)
            state.append(initial)
        return tuple(state)

    def run_direction(self, direction: int, inputs: torch.Tensor, mask: torch.Tensor,
                      execution: Optional[ExecutionPlan] = None) -> List[torch.Tensor]:
        """
        Each layer's ``(batch, time, projection_size)`` output of one direction's stack (0 =
        forward, 1 = backward, its inputs already reversed), reading and updating its carried
        state in stateful mode.
        """
        batch_size = inputs.size(0)
        layers = self.forward_layers if direction == 0 else self.backward_layers
        outputs: List[torch.Tensor] = []
        final_states: List[LstmState] = []
        x = inputs
        for layer_index, layer in enumerate(layers):
            layer_input = x
            if self.dropout > 0.0:
                layer_input = nn.functional.dropout(layer_input, self.dropout, self.training)
            state = self._initial_state(direction, layer_index, batch_size, inputs)
            output, final_state = layer(layer_input, mask, state, execution)
            if self.use_skip_connections and layer_index > 0:
                output = output + x
            final_states.append(final_state)
            outputs.append(output)
            x = output
        if self.stateful:
            if self._states is None:
                self._states = [[(None, None)] * self.num_layers for _ in range(2)]  # type: ignore
            stored = self._states[direction]
            for layer_index, (h, c) in enumerate(final_states):
                carried = None if stored[layer_index][0] is None else stored[layer_index]
                stored[layer_index] = carried_state(carried, (h.detach(), c.detach()))
        return outputs

    def forward(self, inputs: torch.Tensor, mask: torch.Tensor,
                execution: Optional[ExecutionPlan] = None) -> List[torch.Tensor]:
        """
        # Parameters

        inputs : `torch.Tensor`
            ``(batch, time, input_size)``, each row left-aligned.
        mask : `torch.BoolTensor`
            ``(batch, time)``.
        execution : `ExecutionPlan`, optional
            How the layers run; None: plain PyTorch.

        # Returns

        One ``(batch, time, 2 * projection_size)`` tensor per layer: forward and backward
        outputs concatenated, zero at padded positions.
        """
        lengths = mask.sum(dim=1)
        forward_outputs = self.run_direction(0, inputs, mask, execution)
        backward_outputs = self.run_direction(1, reverse_within_lengths(inputs, lengths), mask,
                                              execution)
        return [
            torch.cat([forward, reverse_within_lengths(backward, lengths)], dim=-1)
            for forward, backward in zip(forward_outputs, backward_outputs)
        ]
