"""
``precision="bfloat16"`` for inference (`elmo_plugin.modules.precision`): with native bfloat16
(mocked: the CPU flags `hardware.bfloat16_support` reads) the biLM's products run in bfloat16
and its layers stay within bfloat16's rounding of float32's, on the golden fixture (the trained
TensorFlow biLM and its 30 sentences) and against the TensorFlow outputs themselves; without it
there is one warning and float32's numbers, exactly; through `ElmoEmbedder`, `Elmo` and
``elmo_token_embedder``, each deciding the biLM's execution plan once per device. The command's
option is tested in tests/commands/test_elmo_precision.py.
"""
import json
import logging
from typing import List

import h5py
import numpy as np
import pytest
import torch
from allennlp.common import Params
from allennlp.common.checks import ConfigurationError
from allennlp.modules.token_embedders import TokenEmbedder

from elmo_plugin.common import hardware
from elmo_plugin.data.character_ids import ElmoCharacterIds
from elmo_plugin.elmo_embedder import ElmoEmbedder
from elmo_plugin.modules.bilm import ElmoBiLm
from elmo_plugin.modules.elmo import Elmo
from elmo_plugin.modules.precision import InferenceSettings, check_precision
from tests.helpers import FIXTURE_OPTIONS, FIXTURE_WEIGHTS, FIXTURES

pytestmark = pytest.mark.usefixtures("single_thread")

BFLOAT16_CPU = frozenset({"avx2", "avx512f", "avx512_bf16"})  # e.g. AMD Zen 4
AVX2_ONLY_CPU = frozenset({"avx", "avx2", "fma"})  # e.g. AMD EPYC 7B13 (Zen 3)
PRECISION_LOGGER = "elmo_plugin.modules.precision"
NO_BFLOAT16_WARNING = (
    "CPU 'AMD EPYC 7B13' has no AVX512-BF16/AMX instructions; precision bfloat16 would be "
    "emulated in software, many times slower than float32, so the biLM runs in float32"
)

# bfloat16 keeps 8 significant bits: one unit in the last place is 2**-7 of the value's power
# of two, so a product rounded once is within 2**-8 of it, relatively. The layers pass through a
# chain of rounded products (convolutions, highways, projection, two LSTM layers of 23 steps), so
# a single element may move by a few of those units; bounds: every element within 2 units at the
# layer's largest magnitude (measured on the fixture: 0.023, 0.018, 0.018 against bounds of 0.055,
# 0.023, 0.036 for one unit) and every token's vector pointing the same way to 1e-3 (measured:
# the worst token's cosine is 0.99986, the mean 0.999994).
BFLOAT16_UNIT = 2.0**-7
WORST_TOKEN_COSINE = 0.999
MEAN_COSINE = 0.9999
# The TensorFlow outputs (float32) against ours in bfloat16: the top layer lies within [-3, 3]
# (proj_clip), where 2 units are 2**-5.
GOLDEN_BFLOAT16_ATOL = 2.0**-5


def record_products(module: torch.nn.Module) -> List:
    """The products' dtype of the plan each later call of ``module`` is handed (None: none)."""
    products: List = []

    def hook(_module, arguments):
        plan = arguments[1] if len(arguments) > 1 else None
        products.append(None if plan is None else plan.products)

    module.register_forward_pre_hook(hook)
    return products


def precision_records(caplog) -> List[logging.LogRecord]:
    """The option's own log records (others' depend on the logging setup of earlier tests)."""
    return [record for record in caplog.records if record.name == PRECISION_LOGGER]


@pytest.fixture
def cpu_with(monkeypatch):
    """Sets the CPU flags (and model name) that `hardware.bfloat16_support` reads."""
    monkeypatch.setattr(hardware, "cpu_model_name", lambda: "AMD EPYC 7B13")

    def set_flags(flags: frozenset) -> None:
        monkeypatch.setattr(hardware, "cpu_flags", lambda: flags)

    return set_flags


@pytest.fixture(scope="module")
def golden_sentences() -> List[List[List[str]]]:
    """The fixture's 30 sentences, as its 10 batches of 3 (sentences.json lists them by row)."""
    with open(FIXTURES / "sentences.json", encoding="utf-8") as handle:
        rows = json.load(handle)
    return [[rows[k][i].split() for k in range(3)] for i in range(len(rows[0]))]


def assert_within_bfloat16_rounding(expected: torch.Tensor, got: torch.Tensor, mask) -> None:
    """Per layer of ``(batch, layers, time, dim)``: the bounds of the module's comment."""
    assert got.dtype == torch.float32
    for layer in range(expected.size(1)):
        want, have = expected[:, layer][mask], got[:, layer][mask]
        largest = float(want.abs().max())
        assert float((have - want).abs().max()) <= 2 * BFLOAT16_UNIT * 2.0 ** np.ceil(
            np.log2(largest)
        ), layer
        cosine = torch.nn.functional.cosine_similarity(have, want, dim=-1)
        assert float(cosine.min()) >= WORST_TOKEN_COSINE, layer
        assert float(cosine.mean()) >= MEAN_COSINE, layer


def test_with_native_bfloat16_the_embedder_computes_in_bfloat16_close_to_float32(
    cpu_with, golden_sentences, caplog
):
    cpu_with(BFLOAT16_CPU)
    reference = ElmoEmbedder(FIXTURE_OPTIONS, FIXTURE_WEIGHTS)
    with caplog.at_level(logging.INFO, logger=PRECISION_LOGGER):
        embedder = ElmoEmbedder(FIXTURE_OPTIONS, FIXTURE_WEIGHTS, precision="bfloat16")
    assert embedder.precision == "bfloat16" and reference.precision == "float32"
    assert [(r.levelno, r.getMessage()) for r in precision_records(caplog)] == [
        (
            logging.INFO,
            "precision bfloat16: the biLM's products in bfloat16 (CPU 'AMD EPYC 7B13' has "
            "AVX512-BF16 instructions)",
        )
    ]
    products = record_products(embedder.elmo_bilm.character_encoder)
    batch = [sentence for batch in golden_sentences for sentence in batch]
    expected, expected_mask = reference.batch_to_embeddings(batch)
    got, mask = embedder.batch_to_embeddings(batch)
    assert products == [torch.bfloat16]
    assert torch.equal(mask, expected_mask)
    assert not torch.equal(got, expected)  # bfloat16's numbers, not float32's
    assert_within_bfloat16_rounding(expected, got, mask)
    # numpy output (what the HDF5 file gets) is float32 too.
    assert embedder.embed_sentence(batch[0]).dtype == np.float32


def test_with_native_bfloat16_the_stateful_bilm_stays_near_tensorflows_outputs(
    cpu_with, golden_sentences
):
    cpu_with(BFLOAT16_CPU)
    embedder = ElmoEmbedder(FIXTURE_OPTIONS, FIXTURE_WEIGHTS, stateful=True, precision="bfloat16")
    worst = 0.0
    for i, batch in enumerate(golden_sentences):
        activations, _ = embedder.batch_to_embeddings(batch)
        for k, sentence in enumerate(batch):
            with h5py.File(FIXTURES / f"lm_embeddings_{k}.hdf5", "r") as handle:
                halves = handle[str(i)][...]
            golden = np.concatenate([halves[0], halves[1]], axis=-1)
            top = activations[k, 2, : len(sentence)].numpy()
            worst = max(worst, float(np.abs(top - golden).max()))
    # The carried state goes through 10 batches without drifting away.
    print(f"bfloat16 against TensorFlow: worst |diff| {worst:.3g}")
    assert 0.0 < worst <= GOLDEN_BFLOAT16_ATOL


def test_without_native_bfloat16_one_warning_and_exactly_float32(cpu_with, golden_sentences, caplog):
    cpu_with(AVX2_ONLY_CPU)
    reference = ElmoEmbedder(FIXTURE_OPTIONS, FIXTURE_WEIGHTS)
    with caplog.at_level(logging.INFO, logger=PRECISION_LOGGER):
        embedder = ElmoEmbedder(FIXTURE_OPTIONS, FIXTURE_WEIGHTS, precision="bfloat16")
        assert embedder.precision == "float32"
        products = record_products(embedder.elmo_bilm.character_encoder)
        for batch in golden_sentences[:4]:
            expected = reference.embed_batch(batch)
            got = embedder.embed_batch(batch)
            for want, have in zip(expected, got):
                assert have.dtype == np.float32
                np.testing.assert_array_equal(have, want)
    assert products == [None] * 4  # plain PyTorch
    assert [(r.levelno, r.getMessage()) for r in precision_records(caplog)] == [
        (logging.WARNING, NO_BFLOAT16_WARNING)
    ]


def test_precision_is_checked_and_float32_asks_nothing(monkeypatch):
    with pytest.raises(ConfigurationError, match="precision must be one of float32, bfloat16"):
        check_precision("float16")
    with pytest.raises(ConfigurationError, match="got 'bf16'"):
        ElmoEmbedder(FIXTURE_OPTIONS, FIXTURE_WEIGHTS, precision="bf16")

    def fail(device):
        raise AssertionError("float32 must not look at the hardware")

    monkeypatch.setattr(hardware, "bfloat16_support", fail)
    assert InferenceSettings("float32").plan("cpu") is None


def test_the_plan_is_decided_once_and_read_after(cpu_with, golden_sentences, monkeypatch):
    cpu_with(BFLOAT16_CPU)
    embedder = ElmoEmbedder(FIXTURE_OPTIONS, FIXTURE_WEIGHTS, precision="bfloat16")
    plan = embedder.execution
    assert plan.products == torch.bfloat16 and plan.compile_mode is None

    def fail(device):
        raise AssertionError("the plan was decided when the embedder was built")

    monkeypatch.setattr(hardware, "bfloat16_support", fail)
    products = record_products(embedder.elmo_bilm.character_encoder)
    for batch in golden_sentences[:2]:
        embedder.embed_batch(batch)
    assert embedder.precision == "bfloat16" and embedder.execution is plan
    assert products == [torch.bfloat16] * 2
    settings = InferenceSettings("bfloat16")
    monkeypatch.undo()
    cpu_with(BFLOAT16_CPU)
    assert settings.plan("cpu") is settings.plan(torch.device("cpu"))  # once per device


def character_ids(batches) -> torch.Tensor:
    return ElmoCharacterIds(50).batch_to_ids([s for batch in batches for s in batch])


@pytest.mark.parametrize("native", [True, False])
def test_elmo_mixes_float32_layers_in_either_precision(cpu_with, golden_sentences, caplog, native):
    cpu_with(BFLOAT16_CPU if native else AVX2_ONLY_CPU)
    ids = character_ids(golden_sentences[:3])
    reference = Elmo(str(FIXTURE_OPTIONS), str(FIXTURE_WEIGHTS), 2, dropout=0.0)
    elmo = Elmo(str(FIXTURE_OPTIONS), str(FIXTURE_WEIGHTS), 2, dropout=0.0, precision="bfloat16")
    elmo.load_state_dict(reference.state_dict())
    with torch.no_grad():
        for mix in (reference.scalar_mixes[1], elmo.scalar_mixes[1]):
            for parameter, value in zip(mix.scalar_parameters, (0.5, -1.0, 2.0)):
                parameter.fill_(value)
    with caplog.at_level(logging.INFO, logger=PRECISION_LOGGER), torch.no_grad():
        expected = reference(ids)
        outputs = [elmo(ids) for _ in range(2)]
    warnings = [r for r in precision_records(caplog) if r.levelno >= logging.WARNING]
    assert len(warnings) == (0 if native else 1)
    mask = expected["mask"]
    for output in outputs:
        assert torch.equal(output["mask"], mask)
        for want, have in zip(expected["elmo_representations"], output["elmo_representations"]):
            assert have.dtype == torch.float32
            if native:
                assert not torch.equal(have, want)
                assert_within_bfloat16_rounding(want.unsqueeze(1), have.unsqueeze(1), mask)
            else:
                assert torch.equal(have, want)


def test_bfloat16_needs_a_frozen_bilm():
    with pytest.raises(ConfigurationError, match="precision 'bfloat16' is for a frozen biLM"):
        Elmo(str(FIXTURE_OPTIONS), str(FIXTURE_WEIGHTS), requires_grad=True, precision="bfloat16")
    trainable = ElmoBiLm.from_files(FIXTURE_OPTIONS, FIXTURE_WEIGHTS, requires_grad=True)
    with pytest.raises(ConfigurationError, match="frozen biLM"):
        Elmo(bilm=trainable, precision="bfloat16")
    # float32 fine-tunes as before.
    Elmo(bilm=trainable, precision="float32")


def test_token_embedder_takes_precision_from_a_config(cpu_with, golden_sentences):
    cpu_with(BFLOAT16_CPU)
    params = {
        "type": "elmo_token_embedder",
        "options_file": str(FIXTURE_OPTIONS),
        "weight_file": str(FIXTURE_WEIGHTS),
        "dropout": 0.0,
    }
    reference = TokenEmbedder.from_params(Params(dict(params)))
    embedder = TokenEmbedder.from_params(Params(dict(params, precision="bfloat16")))
    embedder.load_state_dict(reference.state_dict())
    ids = character_ids(golden_sentences[:2])
    with torch.no_grad():
        want, have = reference(ids), embedder(ids)
    assert have.dtype == torch.float32 and not torch.equal(have, want)
    mask = (ids > 0).any(-1)
    assert_within_bfloat16_rounding(want.unsqueeze(1), have.unsqueeze(1), mask)
    with pytest.raises(ConfigurationError, match="frozen biLM"):
        TokenEmbedder.from_params(
            Params(dict(params, precision="bfloat16", requires_grad=True))
        )
