"""
The fast paths on a GPU: the same numbers as on the CPU, where the rest of the suite checks them
against their plain definitions and against AllenNLP core. Skipped without CUDA, so CI (CPU only)
never depends on a GPU; run ``pytest tests/test_device.py`` on a GPU machine.

``ELMO_TEST_DEVICE=cpu`` runs the module on the CPU instead (every comparison is then CPU
against CPU, which checks only that the tests themselves run).
"""
import os

import pytest
import torch
from allennlp.modules.elmo import _ElmoBiLm

from elmo_plugin.data.character_ids import ElmoCharacterIds
from elmo_plugin.modules.bilm import ElmoBiLm
from elmo_plugin.modules.character_encoder import CharacterEncoder
from elmo_plugin.modules.projected_lstm import ProjectedLstmLayer
from tests.helpers import VARIED_BATCH, make_random_bilm_files, masked_max_abs_diff
from tests.modules.test_character_encoder import encoder_ids, plain_forward
from tests.modules.test_projected_lstm import bfloat16_reference, mixed_lengths_case

DEVICE = torch.device(os.environ.get("ELMO_TEST_DEVICE", "cuda"))
pytestmark = pytest.mark.skipif(
    DEVICE.type == "cuda" and not torch.cuda.is_available(), reason="needs a CUDA GPU"
)


def gradients(module: torch.nn.Module, output: torch.Tensor, weights: torch.Tensor):
    return torch.autograd.grad((output * weights.to(output.device)).sum(), list(module.parameters()))


def test_projected_lstm_on_the_device_equals_the_cpu():
    layer, _, inputs, mask, h0, c0 = mixed_lengths_case()
    weights = torch.randn(*mask.shape, 3, dtype=torch.double)

    cpu_output, (cpu_h, cpu_c) = layer(inputs, mask, (h0, c0))
    cpu_gradients = gradients(layer, cpu_output + 0.3 * cpu_h.sum() + cpu_c.sum(), weights)
    device_layer = layer.to(DEVICE)
    output, (h, c) = device_layer(inputs.to(DEVICE), mask.to(DEVICE), (h0.to(DEVICE), c0.to(DEVICE)))
    with torch.no_grad():  # the in-place inference loop
        inference_output, _ = device_layer(
            inputs.to(DEVICE), mask.to(DEVICE), (h0.to(DEVICE), c0.to(DEVICE))
        )
    device_gradients = gradients(device_layer, output + 0.3 * h.sum() + c.sum(), weights)
    assert torch.allclose(output.cpu(), cpu_output, atol=1e-12, rtol=0)
    assert torch.allclose(inference_output.cpu(), cpu_output, atol=1e-12, rtol=0)
    assert torch.allclose(h.cpu(), cpu_h, atol=1e-12) and torch.allclose(c.cpu(), cpu_c, atol=1e-12)
    for (name, _), ours, theirs in zip(layer.named_parameters(), device_gradients, cpu_gradients):
        assert torch.allclose(ours.cpu(), theirs, atol=1e-10, rtol=0), name


def test_bfloat16_recurrence_on_the_device_matches_autograd():
    torch.manual_seed(4)
    layer = ProjectedLstmLayer(8, 16, 4, cell_clip=0.8, proj_clip=0.5)
    with torch.no_grad():
        layer.bias.normal_()
    layer = layer.to(DEVICE)
    inputs = torch.randn(5, 6, 8, device=DEVICE) * 2
    with torch.autocast(DEVICE.type, dtype=torch.bfloat16):
        output, (h, c) = layer(inputs, torch.ones(5, 6, dtype=torch.bool, device=DEVICE))
    assert output.dtype == c.dtype == torch.float32
    expected_output, _, _ = bfloat16_reference(layer, inputs, DEVICE.type)
    # The same bfloat16 multiplies; a GPU may accumulate them in another order.
    assert torch.allclose(output, expected_output, atol=2e-2, rtol=0)
    weights = torch.randn_like(output)
    ours = gradients(layer, output, weights)
    theirs = gradients(layer, expected_output, weights)
    for (name, _), a, b in zip(layer.named_parameters(), ours, theirs):
        assert a.dtype == torch.float32
        assert (a - b).norm() <= 3e-2 * b.norm(), name


def test_character_encoder_on_the_device_equals_conv1d():
    torch.manual_seed(0)
    encoder = CharacterEncoder([[1, 4], [2, 8], [3, 16], [4, 32], [5, 64]], 4, 2, 16, "relu")
    encoder = encoder.double()
    with torch.no_grad():
        encoder.char_embedding.weight.normal_()
        encoder.char_embedding.weight[0].zero_()
    ids = encoder_ids(50)
    reference = plain_forward(encoder, ids)
    weights = torch.randn_like(reference)
    reference_gradients = gradients(encoder, reference, weights)
    encoder = encoder.to(DEVICE)
    fused = encoder(ids.to(DEVICE))
    assert torch.allclose(fused.cpu(), reference, atol=1e-12, rtol=0)
    for (name, _), ours, theirs in zip(
        encoder.named_parameters(), gradients(encoder, fused, weights), reference_gradients
    ):
        assert torch.allclose(ours.cpu(), theirs, atol=1e-10, rtol=0), name


def test_bilm_on_the_device_matches_allennlp_on_the_cpu(tmp_path):
    files = make_random_bilm_files(tmp_path, n_characters=262, max_characters_per_token=50,
                                   use_skip_connections=True, cell_clip=3.0, proj_clip=1.5)
    theirs = _ElmoBiLm(str(files.options_file), str(files.weight_file)).eval()
    ours = ElmoBiLm.from_files(files.options_file, files.weight_file).eval().to(DEVICE)
    ids = ElmoCharacterIds(50).batch_to_ids(VARIED_BATCH)
    with torch.no_grad():
        expected = theirs(ids)
        output = ours(ids.to(DEVICE))
    mask = output["mask"].cpu()
    assert torch.equal(mask, expected["mask"].bool())
    for layer, (a, b) in enumerate(zip(output["activations"], expected["activations"])):
        assert masked_max_abs_diff(a.cpu(), b, mask) < 1e-5, layer
