"""
The LSTM's inference loop (`_run_inference`, issue 28: fewer operator calls per step) computes
exactly what the stepwise loop computes (`_run_stepwise`, which training uses and inference used
before): the same arithmetic in the same order, so the outputs and final states are equal to the
bit, with rows ending at different steps, in float32 and with bfloat16 products.
"""
import pytest
import torch

from elmo_plugin.modules.projected_lstm_recurrence import _run_inference, _run_stepwise

pytestmark = pytest.mark.usefixtures("single_thread")


@pytest.mark.parametrize("matmul_dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("step_sizes", [[4, 4, 4], [5, 5, 4, 2, 2, 1], [3, 1, 1, 1], [2]])
@pytest.mark.parametrize("clips", [(1.0, 0.5), (None, None)])
def test_the_inference_loop_equals_the_stepwise_loop(matmul_dtype, step_sizes, clips):
    generator = torch.Generator().manual_seed(len(step_sizes))
    batch, cell, projection = 6, 8, 5  # rows beyond step_sizes[0] have length 0
    input_gates = 2 * torch.randn(sum(step_sizes), 4 * cell, generator=generator)
    h0 = torch.randn(batch, projection, generator=generator)
    c0 = 3 * torch.randn(batch, cell, generator=generator)  # some beyond the cell clip
    recurrent = torch.randn(projection, 4 * cell, generator=generator).to(matmul_dtype)
    project = torch.randn(cell, projection, generator=generator).to(matmul_dtype)
    arguments = (input_gates, h0, c0, recurrent, project, step_sizes, *clips)
    expected = _run_stepwise(*arguments, keep_for_backward=False)
    got = _run_inference(*arguments)
    for want, have in zip(expected[:3], got[:3]):
        assert have.dtype == torch.float32
        assert torch.equal(have, want)
    # The rows of length 0 keep their initial state; the clips bind somewhere (c0 has values
    # beyond the cell clip).
    assert torch.equal(got[1][step_sizes[0]:], h0[step_sizes[0]:])
    if clips[0] is not None:
        assert float(got[0].abs().max()) == clips[1]
        assert float(got[2][: step_sizes[0]].abs().max()) <= clips[0]
