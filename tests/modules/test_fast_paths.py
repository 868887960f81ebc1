"""
Every fast path declared with `elmo_plugin.modules.execution.fast_paths.fast_path` (the export's
too) against the plain definition it names, on random weights, in float64 so that a difference
beyond rounding is a bug rather than noise: the LSTM recurrences with both clips (cell and
projection) binding, on batches whose rows end at different steps (one of length 0) and on full
batches; the character convolutions on tokens of every length around the windows' boundaries,
chunked as they come and one token a chunk, with a padding character that decides many maxima.
Values, and for the training paths the gradients of every input too.
"""
from typing import List

import pytest
import torch

import elmo_plugin.export.scan_forward  # noqa: F401  (declares its fast path)
from elmo_plugin.data.character_ids import ElmoCharacterIds
from elmo_plugin.modules.character_encoder import PADDING_ID
from elmo_plugin.modules.execution import character_convolutions
from elmo_plugin.modules.execution.character_convolutions import (
    CharacterConvolutions,
    reference_max_pooled_convolutions,
)
from elmo_plugin.modules.execution.fast_paths import FAST_PATHS, FastPath
from elmo_plugin.modules.execution.lstm_recurrence import LstmWeights, reference_recurrence
from tests.modules.test_character_encoder import KOREAN_LONG

pytestmark = pytest.mark.usefixtures("single_thread")

DECLARED = {
    "elmo_plugin.modules.execution.lstm_recurrence.recurrence_loop",
    "elmo_plugin.modules.execution.lstm_recurrence.training_recurrence",
    "elmo_plugin.modules.execution.compiled_step.traced_training_recurrence",
    "elmo_plugin.export.scan_forward.masked_recurrence",
    "elmo_plugin.modules.execution.character_convolutions.max_pooled_convolutions",
    "elmo_plugin.modules.execution.character_convolutions.leading_max_pooled_convolutions",
    "elmo_plugin.modules.execution.character_convolutions.every_window_max_pooled_convolutions",
}
CLIPS = (1.0, 0.5)
PACKED = [5, 5, 4, 2, 2, 1]  # rows ending at different steps, and a sixth of length 0
FULL = [6] * 5
VALUES, GRADIENTS = 1e-12, 1e-10  # float64


def recurrence_inputs(step_sizes: List[int], clips=CLIPS):
    """Input gates, h0, c0 and weights (a leaf tensor each), large enough that the clips bind."""
    generator = torch.Generator().manual_seed(len(step_sizes))
    batch, cell, projection = 6, 8, 5

    def randn(*shape, scale=1.0):
        return (scale * torch.randn(*shape, generator=generator, dtype=torch.float64)
                ).requires_grad_()

    return (randn(sum(step_sizes), 4 * cell, scale=2.0), randn(batch, projection),
            randn(batch, cell, scale=3.0),  # c0 beyond the cell clip
            LstmWeights(randn(projection, 4 * cell), randn(cell, projection), *clips))


def run_time_major(fast, input_gates, h0, c0, weights, step_sizes):
    """A recurrence over ``(time, batch, ...)`` gates and a mask of the rows running, with the
    packed arguments and results of `reference_recurrence`."""
    running = torch.arange(len(step_sizes)).unsqueeze(1) < torch.tensor(
        [sum(rows > row for rows in step_sizes) for row in range(h0.size(0))]
    ).unsqueeze(0)
    gates = input_gates.new_zeros(len(step_sizes), h0.size(0), input_gates.size(1))
    gates = gates.index_put((running,), input_gates)
    outputs, final_h, final_c = fast(gates, running, h0, c0, weights)
    assert not outputs[~running].any()  # the rows not running give zeros
    return outputs[running], final_h, final_c


def run_recurrence(path: FastPath, function, inputs, step_sizes):
    if path.time_major and function is path.fast:
        return run_time_major(function, *inputs, step_sizes)
    return function(*inputs, step_sizes)


def recurrence_loss(outputs) -> torch.Tensor:
    packed, final_h, final_c = outputs[:3]
    weights = torch.linspace(-1, 1, packed.numel(), dtype=packed.dtype).view_as(packed)
    return (packed * weights).sum() + 0.3 * final_h.sum() + (final_c * final_c).sum()


def leaves(inputs) -> List[torch.Tensor]:
    return [*inputs[:3], inputs[3].recurrent, inputs[3].projection]


def paths_of(reference) -> List[str]:
    return sorted(name for name, path in FAST_PATHS.items() if path.reference is reference)


def test_every_fast_path_is_declared_and_names_its_reference():
    assert set(FAST_PATHS) == DECLARED
    for path in FAST_PATHS.values():
        assert path.fast.reference is path.reference


@pytest.mark.parametrize("name", paths_of(reference_recurrence))
@pytest.mark.parametrize("batches", ["packed", "full"])
def test_each_fast_recurrence_equals_the_reference_with_both_clips_binding(name, batches):
    path = FAST_PATHS[name]
    if batches == "packed" and path.full_batches:
        pytest.skip("a fast path for batches without padding")
    step_sizes = PACKED if batches == "packed" else FULL
    fast_inputs, reference_inputs = recurrence_inputs(step_sizes), recurrence_inputs(step_sizes)
    with torch.set_grad_enabled(path.gradients):
        got = run_recurrence(path, path.fast, fast_inputs, step_sizes)
    expected = reference_recurrence(*reference_inputs, step_sizes)
    # Both clips bind, at a good part of the positions.
    with torch.no_grad():
        record = reference_recurrence(*reference_inputs, step_sizes, True)[3]
    for passes in (record.cell_passes, record.output_passes):
        assert 0.1 < float((~passes).double().mean()) < 0.9
    for have, want in zip(got, expected):
        assert have.shape == want.shape
        torch.testing.assert_close(have, want, rtol=0, atol=VALUES)
    if path.gradients:
        ours = torch.autograd.grad(recurrence_loss(got), leaves(fast_inputs))
        theirs = torch.autograd.grad(recurrence_loss(expected), leaves(reference_inputs))
        for have, want in zip(ours, theirs):
            torch.testing.assert_close(have, want, rtol=0, atol=GRADIENTS)


def test_the_recurrence_comparison_can_fail():
    """A recurrence that forgot a clip is far beyond the tolerances above."""
    inputs = recurrence_inputs(PACKED)
    with torch.no_grad():
        clipped = reference_recurrence(*inputs, PACKED)
        unclipped = reference_recurrence(*inputs[:3], inputs[3]._replace(proj_clip=None), PACKED)
    assert float((clipped[0] - unclipped[0]).abs().max()) > 1e-2


def character_ids(max_characters: int = 50) -> torch.Tensor:
    """Tokens of many lengths: of every length whose last window of some width is the first made
    of padding only, and longer; cut Korean; the sentence markers; a masked (all-zero) row."""
    scheme = ElmoCharacterIds(max_characters)
    tokens = ["the", ".", "aaa", "y" * (max_characters - 2), "z" * (max_characters + 10),
              KOREAN_LONG, "영화", "caterpillars"]
    tokens += ["x" * (max_characters - width - 2) for width in range(1, 9)]
    rows = [scheme.token_to_ids(token) for token in tokens]
    rows += [scheme.beginning_of_sentence_ids, scheme.end_of_sentence_ids, [0] * max_characters]
    return torch.tensor(rows)


def convolution_weights(padding_scale: float) -> CharacterConvolutions:
    generator = torch.Generator().manual_seed(0)
    embedding = torch.randn(262, 4, generator=generator, dtype=torch.float64)
    embedding[0] = 0.0
    embedding[PADDING_ID] *= padding_scale
    filters = [(1, 4), (2, 8), (3, 16), (5, 8), (7, 8)]
    kernels = [torch.randn(count, 4, width, generator=generator, dtype=torch.float64)
               for width, count in filters]
    biases = [torch.randn(count, generator=generator, dtype=torch.float64)
              for _, count in filters]
    for tensor in [embedding, *kernels, *biases]:
        tensor.requires_grad_()
    return CharacterConvolutions(embedding, kernels, biases, PADDING_ID)


def convolution_leaves(convolutions: CharacterConvolutions) -> List[torch.Tensor]:
    return [convolutions.embedding, *convolutions.kernels, *convolutions.biases]


@pytest.mark.parametrize("name", paths_of(reference_max_pooled_convolutions))
@pytest.mark.parametrize("padding_scale", [1.0, 10.0])
@pytest.mark.parametrize("rows_per_chunk", [8192, 37])
def test_each_fast_convolution_equals_the_reference(name, padding_scale, rows_per_chunk,
                                                    monkeypatch):
    """Chunks of a few tokens too (37 rows: one token a chunk for the long ones), and a padding
    character that wins many maxima (the windows of padding only, added back)."""
    monkeypatch.setattr(character_convolutions, "CONVOLUTION_ROWS_PER_CHUNK", rows_per_chunk)
    path = FAST_PATHS[name]
    for ids in (character_ids(50), character_ids(30), character_ids(50)[:0]):
        fast_weights, reference_weights = (convolution_weights(padding_scale) for _ in range(2))
        with torch.set_grad_enabled(path.gradients):
            got = path.fast(ids, fast_weights)
        expected = reference_max_pooled_convolutions(ids, reference_weights)
        assert got.shape == expected.shape
        torch.testing.assert_close(got, expected, rtol=0, atol=VALUES)
        if path.gradients and ids.numel():
            weights = torch.randn(expected.shape, dtype=expected.dtype,
                                  generator=torch.Generator().manual_seed(1))
            ours = torch.autograd.grad((got * weights).sum(), convolution_leaves(fast_weights))
            theirs = torch.autograd.grad((expected * weights).sum(),
                                         convolution_leaves(reference_weights))
            for have, want in zip(ours, theirs):
                torch.testing.assert_close(have, want, rtol=0, atol=GRADIENTS)


def test_the_convolution_comparison_can_fail():
    """Without the value of the windows of padding only, the short tokens come out different."""
    ids = character_ids(50)
    weights = convolution_weights(10.0)
    with torch.no_grad():
        cut = reference_max_pooled_convolutions(ids[:, :7], weights)
        full = reference_max_pooled_convolutions(ids, weights)
    assert float((cut - full).abs().max()) > 1e-3
