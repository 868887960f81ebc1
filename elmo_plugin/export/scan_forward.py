"""
The biLM's forward written for export (``allennlp elmo-export --format onnx``): `ElmoBiLm.forward`
of a stateless frozen biLM in operations whose shapes follow the input's, never its values, so
that one graph runs at any batch and sentence length: each distinct real token encoded once, and
each LSTM layer one ``scan`` over time (PyTorch's private prototype, imported only here) of
`lstm_recurrence.projected_lstm_step`, a finished row keeping its state (docs/implementation.md).
"""
from typing import List, Tuple

import torch

from elmo_plugin.modules.elmo_lstm import reverse_within_lengths
from elmo_plugin.modules.execution.character_convolutions import leading_max_pooled_convolutions
from elmo_plugin.modules.execution.fast_paths import fast_path
from elmo_plugin.modules.execution.lstm_recurrence import LstmWeights, projected_lstm_step, reference_recurrence


@fast_path(reference_recurrence, time_major=True)
def masked_recurrence(input_gates: torch.Tensor, running: torch.Tensor, h0: torch.Tensor,
                      c0: torch.Tensor, weights: LstmWeights) -> Tuple[torch.Tensor, ...]:
    """`lstm_recurrence.reference_recurrence` over every row at every step, time major; ``running``
    ``(time, batch)`` is True while a row's sentence lasts. Outputs are zero where a row does not run."""
    from torch._higher_order_ops import scan  # private: imported only by an export

    def step(
        state: Tuple[torch.Tensor, torch.Tensor], inputs: Tuple[torch.Tensor, torch.Tensor]
    ) -> Tuple[Tuple[torch.Tensor, torch.Tensor], torch.Tensor]:
        h, c = state
        gates, rows_running = inputs
        new_h, new_c = projected_lstm_step(gates, h, c, weights)
        rows_running = rows_running.unsqueeze(1)
        # Three new tensors: scan's step may return no alias of its inputs or of each other.
        output = torch.where(rows_running, new_h, torch.zeros_like(new_h))
        return (torch.where(rows_running, new_h, h), torch.where(rows_running, new_c, c)), output

    (final_h, final_c), outputs = scan(step, (h0, c0), (input_gates, running))
    return outputs, final_h, final_c


def run_layer_masked(layer, inputs: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """`ProjectedLstmLayer.forward`'s outputs, zero at padded positions, from a zero initial state,
    for ``inputs`` ``(batch, time, input_size)`` and a left-aligned ``mask``."""
    batch_size = inputs.size(0)
    h0, c0 = layer.zero_state(batch_size, inputs)
    # The input half of the gates at every position at once (eagerly: at the real positions).
    input_gates = torch.matmul(inputs, layer.input_weight) + layer.effective_bias()
    outputs, _, _ = masked_recurrence(
        input_gates.transpose(0, 1), mask.transpose(0, 1), h0, c0, layer.recurrence_weights()
    )
    return outputs.transpose(0, 1)


def run_bilstm_masked(bilstm, inputs: torch.Tensor, mask: torch.Tensor) -> List[torch.Tensor]:
    """`ElmoBiLstm.forward` (stateless, without dropout) with `run_layer_masked` for each layer."""
    lengths = mask.sum(dim=1)
    directions = []
    for layers, x in ((bilstm.forward_layers, inputs),
                      (bilstm.backward_layers, reverse_within_lengths(inputs, lengths))):
        outputs = []
        for layer_index, layer in enumerate(layers):
            output = run_layer_masked(layer, x, mask)
            x = output + x if bilstm.use_skip_connections and layer_index > 0 else output
            outputs.append(x)
        directions.append(outputs)
    return [torch.cat([forward, reverse_within_lengths(backward, lengths)], dim=-1)
            for forward, backward in zip(*directions)]


def bilm_layers_masked(
    bilm, character_ids: torch.Tensor
) -> Tuple[List[torch.Tensor], torch.Tensor]:
    """`ElmoBiLm.forward` of a stateless biLM in evaluation mode, for export: its layers, zero at
    padding, and the mask, both with the sentence boundaries, for ``character_ids`` without them."""
    ids, mask = bilm.add_sentence_boundaries(character_ids)
    batch_size, num_positions, ids_per_token = ids.shape
    encoder = bilm.character_encoder
    flat_ids = ids.reshape(batch_size * num_positions, ids_per_token)
    # Only the real positions are encoded (ONNX's NonZero), as `ElmoBiLm.encode_tokens` does: most
    # positions of real batches are padding.
    real = mask.reshape(-1).nonzero().squeeze(1)
    # Each distinct token once (ONNX's Unique over the id rows), as the eager biLM encodes them.
    distinct, position_to_distinct = torch.unique(
        flat_ids.index_select(0, real), dim=0, return_inverse=True
    )
    character_part, word_ids = encoder.split_word_ids(distinct)
    pooled = leading_max_pooled_convolutions(character_part, encoder.convolution_weights())
    encoded = encoder.encode_pooled(pooled, word_ids).index_select(0, position_to_distinct)
    tokens = encoded.new_zeros(batch_size * num_positions, encoder.output_dim)
    tokens = tokens.index_copy(0, real, encoded).reshape(
        batch_size, num_positions, encoder.output_dim
    )
    layer_mask = mask.unsqueeze(-1).to(tokens.dtype)
    layers = [torch.cat([tokens, tokens], dim=-1)]
    layers.extend(layer * layer_mask for layer in run_bilstm_masked(bilm.lstm, tokens, mask))
    return layers, mask
