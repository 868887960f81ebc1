"""
The biLM's forward written for export (``allennlp elmo-export --format onnx``): the computation
of `ElmoBiLm.forward` for a stateless frozen biLM, in operations whose shapes follow the input's
and never its values, so that one exported graph runs at any batch and sentence length.

Why another way to run the same network: the eager paths choose their work from the data (the
batch shrinks as sentences end, distinct tokens are encoded once, tokens are chunked by their
length, Python loops run as many steps as the longest sentence), and an exporter that traces
them records one example's choices: ``torch.onnx.export`` unrolls the time loop at the example's
length and pins the token axis (docs/implementation.md). Here instead

- the character encoder runs over every real position of the batch (gathered by the mask;
  padded positions stay zero, as `ElmoBiLm.encode_tokens` leaves them), each distinct token once
  (``torch.unique`` over the id rows, ONNX's ``Unique``), its convolutions ``nn.Conv1d`` over the
  character windows up to the batch's longest token
  (`character_convolutions.leading_max_pooled_convolutions`, equal to the plain definition);
- each LSTM layer's recurrence is one ``scan`` over time (PyTorch's scan, a private prototype
  that the ONNX exporter writes as an ONNX ``Scan``, imported only when this runs) over every row
  of the batch, each step the step of the eager definition (`lstm_recurrence.projected_lstm_step`);
  a row whose sentence has ended keeps its state and outputs zeros (masking, where the eager loop
  shrinks the batch). A finished row's step is still computed, and the serving side sorts
  sentences by length (examples/serve_onnx.py) so that little of that is wasted.

What is computed is `ElmoBiLm`'s: tests compare this with the eager biLM on every configuration
(clips binding, skip connections, one to several layers, ELMoForManyLangs' word ids) and the
exported graph, run by ONNX Runtime, with both (tests/export/test_onnx_export.py).
"""
from typing import List, Tuple

import torch

from elmo_plugin.modules.elmo_lstm import reverse_within_lengths
from elmo_plugin.modules.execution.character_convolutions import leading_max_pooled_convolutions
from elmo_plugin.modules.execution.fast_paths import fast_path
from elmo_plugin.modules.execution.lstm_recurrence import LstmWeights, projected_lstm_step, reference_recurrence
from elmo_plugin.modules.util import add_sentence_boundaries, character_mask


@fast_path(reference_recurrence, time_major=True)
def masked_recurrence(input_gates: torch.Tensor, running: torch.Tensor, h0: torch.Tensor,
                      c0: torch.Tensor, weights: LstmWeights) -> Tuple[torch.Tensor, ...]:
    """
    The recurrence of `lstm_recurrence.reference_recurrence` over every row at every step, time
    major: ``input_gates`` ``(time, batch, 4 * cell)``, ``running`` ``(time, batch)`` bool (True
    while the row's sentence lasts; left-aligned rows, so each row runs a prefix of the steps),
    ``h0`` ``(batch, projection)``, ``c0`` ``(batch, cell)``. Returns the outputs ``(time, batch,
    projection)``, zero where a row does not run, and each row's final ``h``, ``c`` (its state
    after its own last step; the initial state for a row of length 0).
    """
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
    """
    `ProjectedLstmLayer.forward`'s outputs ``(batch, time, projection)``, zero at padded
    positions, from a zero initial state, for ``inputs`` ``(batch, time, input_size)`` and
    ``mask`` ``(batch, time)`` (left-aligned rows).
    """
    batch_size = inputs.size(0)
    h0, c0 = layer.zero_state(batch_size, inputs)
    # The input half of the gates for every position at once, as the eager run does for the
    # real positions (`lstm_layer.run_layer`).
    input_gates = torch.matmul(inputs, layer.input_weight) + layer.effective_bias()
    outputs, _, _ = masked_recurrence(
        input_gates.transpose(0, 1), mask.transpose(0, 1), h0, c0, layer.recurrence_weights()
    )
    return outputs.transpose(0, 1)


def run_bilstm_masked(bilstm, inputs: torch.Tensor, mask: torch.Tensor) -> List[torch.Tensor]:
    """
    `ElmoBiLstm.forward` (stateless, without dropout) with `run_layer_masked` for each layer:
    one ``(batch, time, 2 * projection)`` tensor per layer.
    """
    lengths = mask.sum(dim=1)
    directions = []
    for layers, direction_inputs in (
        (bilstm.forward_layers, inputs),
        (bilstm.backward_layers, reverse_within_lengths(inputs, lengths)),
    ):
        outputs = []
        x = direction_inputs
        for layer_index, layer in enumerate(layers):
            output = run_layer_masked(layer, x, mask)
            if bilstm.use_skip_connections and layer_index > 0:
                output = output + x
            outputs.append(output)
            x = output
        directions.append(outputs)
    forward_outputs, backward_outputs = directions
    return [
        torch.cat([forward, reverse_within_lengths(backward, lengths)], dim=-1)
        for forward, backward in zip(forward_outputs, backward_outputs)
    ]


def bilm_layers_masked(
    bilm, character_ids: torch.Tensor
) -> Tuple[List[torch.Tensor], torch.Tensor]:
    """
    `ElmoBiLm.forward` of a stateless biLM in evaluation mode, for export: ``character_ids``
    ``(batch, tokens, ids per token)`` without sentence boundaries. Returns the ``num_layers``
    layers ``(batch, tokens + 2, 2 * projection)``, zero at padded positions, and the ``(batch,
    tokens + 2)`` mask, both with the sentence boundaries, as `ElmoBiLm.forward` gives them.
    """
    ids, mask = add_sentence_boundaries(
        character_ids, character_mask(character_ids), bilm._bos_ids, bilm._eos_ids
    )
    batch_size, num_positions, ids_per_token = ids.shape
    encoder = bilm.character_encoder
    flat_ids = ids.reshape(batch_size * num_positions, ids_per_token)
    # Only the real positions are encoded (a graph input of data-dependent length: ONNX's
    # NonZero), as `ElmoBiLm.encode_tokens` does; the rest stay zero. In batches of real
    # sentences most positions are padding, and the character encoder is most of the work at
    # the Small size.
    real = mask.reshape(-1).nonzero().squeeze(1)
    # Each distinct token once (ONNX's Unique over the id rows), as the eager biLM encodes them:
    # in real text most positions repeat a token seen elsewhere in the batch.
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
