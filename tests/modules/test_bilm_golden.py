"""
The golden test: the fixture biLM must reproduce the top layer that the TensorFlow biLM computed
(tests/fixtures/elmo_allennlp/README.md). The 30 sentences were run in 10 batches of 3, statefully.
"""
import json
from typing import List

import h5py
import numpy as np
import pytest
import torch

from elmo_plugin.data.character_ids import ElmoCharacterIds
from elmo_plugin.modules.bilm import ElmoBiLm
from tests.helpers import FIXTURE_OPTIONS, FIXTURE_WEIGHTS, FIXTURES

pytestmark = pytest.mark.usefixtures("single_thread")

GOLDEN_ATOL = 2e-6
NUM_BATCHES = 10
BATCH_SIZE = 3


@pytest.fixture(scope="module")
def golden():
    with open(FIXTURES / "sentences.json", encoding="utf-8") as handle:
        sentences = json.load(handle)
    assert len(sentences) == BATCH_SIZE and all(len(s) == NUM_BATCHES for s in sentences)
    expected = {}
    for k in range(BATCH_SIZE):
        with h5py.File(FIXTURES / f"lm_embeddings_{k}.hdf5", "r") as handle:
            for i in range(NUM_BATCHES):
                halves = handle[str(i)][...]  # (2, T, 16): forward, backward
                assert halves.shape[0] == 2
                expected[k, i] = np.concatenate([halves[0], halves[1]], axis=-1)
    return sentences, expected


def batch_tokens(sentences, i: int) -> List[List[str]]:
    return [sentences[k][i].split() for k in range(BATCH_SIZE)]


def run_batch(bilm: ElmoBiLm, tokens: List[List[str]]):
    ids = ElmoCharacterIds(50).batch_to_ids(tokens)
    with torch.no_grad():
        output = bilm(ids)
    return output["activations"], output["mask"]


def top_layer_errors(bilm, sentences, expected, i: int) -> List[float]:
    """Max |ours - golden| of the top layer for each sentence of batch i."""
    tokens = batch_tokens(sentences, i)
    activations, mask = run_batch(bilm, tokens)
    errors = []
    for k, sentence in enumerate(tokens):
        n = len(sentence)
        assert int(mask[k].sum()) == n + 2  # <S> tokens </S>
        assert bool(mask[k, : n + 2].all()) and not bool(mask[k, n + 2 :].any())
        ours = activations[2][k, 1 : n + 1].numpy()
        assert expected[k, i].shape == ours.shape
        errors.append(float(np.abs(ours - expected[k, i]).max()))
    return errors


def test_stateful_bilm_reproduces_all_30_tensorflow_outputs(golden):
    sentences, expected = golden
    bilm = ElmoBiLm.from_files(FIXTURE_OPTIONS, FIXTURE_WEIGHTS, stateful=True).eval()
    errors = []
    for i in range(NUM_BATCHES):
        errors.extend(top_layer_errors(bilm, sentences, expected, i))
    assert len(errors) == 30
    worst = max(errors)
    print(f"golden: worst |diff| over 30 sentences = {worst:.3g}")
    assert worst < GOLDEN_ATOL, errors


def test_state_is_carried_between_batches(golden):
    sentences, expected = golden
    stateless = ElmoBiLm.from_files(FIXTURE_OPTIONS, FIXTURE_WEIGHTS, stateful=False).eval()
    # The first batch starts from zero state either way, so it matches...
    assert max(top_layer_errors(stateless, sentences, expected, 0)) < GOLDEN_ATOL
    # ...but later batches were computed from the carried state, which stateless mode drops.
    for i in range(1, NUM_BATCHES):
        assert max(top_layer_errors(stateless, sentences, expected, i)) > 1e-3
    # Stateless really is stateless: the same batch twice gives the same vectors.
    first, _ = run_batch(stateless, batch_tokens(sentences, 1))
    second, _ = run_batch(stateless, batch_tokens(sentences, 1))
    for a, b in zip(first, second):
        assert torch.equal(a, b)

    stateful = ElmoBiLm.from_files(FIXTURE_OPTIONS, FIXTURE_WEIGHTS, stateful=True).eval()
    for i in range(3):
        assert max(top_layer_errors(stateful, sentences, expected, i)) < GOLDEN_ATOL
    # Without a reset, batch 0 run again (on carried state) no longer matches...
    assert max(top_layer_errors(stateful, sentences, expected, 0)) > 1e-3
    # ...and after reset_states() it does, and the sequence continues to match.
    stateful.reset_states()
    assert max(top_layer_errors(stateful, sentences, expected, 0)) < GOLDEN_ATOL
    assert max(top_layer_errors(stateful, sentences, expected, 1)) < GOLDEN_ATOL
