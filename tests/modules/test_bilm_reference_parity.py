"""
Parity with the naive NumPy bilm-tf forward pass in `tests.reference_bilm`, for the cases that
AllenNLP core cannot load: 30 characters per token (Korean), no skip connections, TensorFlow's
single-layer weight names, no CNN projection (n_filters == projection_dim), n_characters 261.
The reference itself is first checked against the TensorFlow golden outputs.
"""
import json
from typing import Dict, List

import h5py
import numpy as np
import pytest
import torch

from elmo_plugin.data.character_ids import ElmoCharacterIds
from elmo_plugin.model_files.bilm_tf.weights import lstm_scope
from elmo_plugin.modules.bilm import ElmoBiLm
from tests.helpers import (
    FIXTURE_OPTIONS,
    FIXTURE_WEIGHTS,
    FIXTURES,
    KOREAN_LONG,
    assert_clips_exercised,
    make_random_bilm_files,
    read_hdf5_datasets,
    write_hdf5_datasets,
)
from tests.reference_bilm import ReferenceBilm, token_char_ids

pytestmark = pytest.mark.usefixtures("single_thread")

ATOL = 1e-5

KOREAN_BATCH: List[List[str]] = [
    [KOREAN_LONG, "밥", "을", "먹었다", "."],
    ["대한민국의수도는서울특별시입니다", "."],  # 16 syllables, 48 bytes
    ["짧다"],
    [],
    ["An", "ASCII", "token", "longer-than-twenty-eight-bytes-for-sure", "끝"],
]
ENGLISH_BATCH: List[List[str]] = [
    ["The", "quick", "brown", "fox", "jumps", "over", "the", "lazy", "dog", "."],
    ["Short", "one", "."],
    [],
    ["naïve", "café", "😀", "x" * 60],
]

CONFIGS: Dict[str, dict] = {
    # The Korean book model's layout at toy size: 30 characters per token, 261 in the options.
    "korean_30_chars": dict(
        max_characters_per_token=30,
        n_characters=261,
        filters=[[1, 8], [2, 8], [3, 16]],
        n_highway=2,
        activation="relu",
        lstm_dim=24,
        projection_dim=12,
        n_layers=2,
        cell_clip=3.0,
        proj_clip=1.0,
        use_skip_connections=True,
        seed=10,
        batch=KOREAN_BATCH,
    ),
    "no_skip_connections_tanh": dict(
        max_characters_per_token=50,
        n_characters=262,
        filters=[[1, 8], [3, 16]],
        n_highway=1,
        activation="tanh",
        lstm_dim=16,
        projection_dim=8,
        n_layers=3,
        cell_clip=1.0,
        proj_clip=1.0,
        use_skip_connections=False,
        seed=11,
        batch=ENGLISH_BATCH,
    ),
    # One LSTM layer, stored under TensorFlow's single-layer names (RNN_d/RNN/LSTMCell/...).
    "single_layer_tf_names": dict(
        max_characters_per_token=50,
        n_characters=261,
        filters=[[2, 8], [4, 8]],
        n_highway=1,
        activation="relu",
        lstm_dim=16,
        projection_dim=8,
        n_layers=1,
        cell_clip=1.5,
        proj_clip=1.0,
        use_skip_connections=True,
        seed=12,
        batch=ENGLISH_BATCH,
        single_layer_names=True,
    ),
    # n_filters == projection_dim: bilm-tf has no CNN_proj then.
    "no_cnn_projection_30_chars_tanh": dict(
        max_characters_per_token=30,
        n_characters=262,
        filters=[[1, 4], [2, 12]],
        n_highway=1,
        activation="tanh",
        lstm_dim=24,
        projection_dim=16,
        n_layers=2,
        cell_clip=2.0,
        proj_clip=1.5,
        use_skip_connections=True,
        seed=13,
        batch=KOREAN_BATCH,
    ),
}


def rename_to_single_layer_names(weight_file) -> None:
    arrays = read_hdf5_datasets(weight_file)
    renamed = {}
    for name, value in arrays.items():
        for direction in (0, 1):
            multi, single = lstm_scope(direction, 0), lstm_scope(direction, 0, True)
            if name.startswith(multi + "/"):
                name = single + name[len(multi) :]
        renamed[name] = value
    assert not any("MultiRNNCell" in name for name in renamed)
    assert "RNN_1/RNN/LSTMCell/W_0" in renamed
    write_hdf5_datasets(weight_file, renamed)


def test_reference_reproduces_the_tensorflow_golden_outputs():
    """The reference, run statefully row by row, matches all 30 TensorFlow outputs."""
    with open(FIXTURES / "sentences.json", encoding="utf-8") as handle:
        sentences = json.load(handle)
    with open(FIXTURE_OPTIONS, encoding="utf-8") as handle:
        options = json.load(handle)
    reference = ReferenceBilm(read_hdf5_datasets(FIXTURE_WEIGHTS), options)
    worst = 0.0
    for k in range(3):
        state = None
        with h5py.File(FIXTURES / f"lm_embeddings_{k}.hdf5", "r") as handle:
            for i in range(10):
                layers, state = reference.embed_sentence(sentences[k][i].split(), state)
                halves = handle[str(i)][...]
                expected = np.concatenate([halves[0], halves[1]], axis=-1)
                worst = max(worst, float(np.abs(layers[2, 1:-1] - expected).max()))
    print(f"reference vs golden: worst |diff| = {worst:.3g}")
    assert worst < 2e-6


def test_reference_character_ids_agree_with_ours():
    for max_chars in (30, 50):
        mapper = ElmoCharacterIds(max_chars)
        for token in ["<S>", "</S>", "hello", KOREAN_LONG, "x" * 70, "😀", "é"]:
            assert mapper.token_to_ids(token) == token_char_ids(token, max_chars)


@pytest.mark.parametrize("name", list(CONFIGS))
def test_matches_the_reference(name, tmp_path):
    config = dict(CONFIGS[name])
    batch = config.pop("batch")
    single_layer_names = config.pop("single_layer_names", False)
    files = make_random_bilm_files(tmp_path, **config)
    if single_layer_names:
        rename_to_single_layer_names(files.weight_file)
    with open(files.options_file, encoding="utf-8") as handle:
        options = json.load(handle)
    assert options["char_cnn"]["n_characters"] == config["n_characters"]
    n_filters = sum(count for _, count in config["filters"])
    arrays = read_hdf5_datasets(files.weight_file)
    assert ("CNN_proj/W_proj" in arrays) == (n_filters != config["projection_dim"])
    reference = ReferenceBilm(arrays, options)

    max_chars = config["max_characters_per_token"]
    bilm = ElmoBiLm.from_files(files.options_file, files.weight_file).eval()
    ids = ElmoCharacterIds(max_chars).batch_to_ids(batch)
    assert ids.shape[-1] == max_chars
    with torch.no_grad():
        output = bilm(ids)
    activations, mask = output["activations"], output["mask"]
    assert len(activations) == config["n_layers"] + 1

    worst = 0.0
    for row, sentence in enumerate(batch):
        expected, _ = reference.embed_sentence(sentence)  # (layers, n + 2, 2 * proj)
        n = len(sentence)
        assert mask[row].tolist() == [True] * (n + 2) + [False] * (mask.size(1) - n - 2)
        for layer, values in enumerate(activations):
            ours = values[row, : n + 2].double().numpy()
            worst = max(worst, float(np.abs(ours - expected[layer]).max()))
            assert not values[row, n + 2 :].any()
    print(f"reference parity [{name}]: worst |diff| = {worst:.3g}")
    assert worst < ATOL
    assert_clips_exercised(bilm, ids)


def test_korean_tokens_are_cut_mid_character_at_30():
    """The 30-character cases above really do cut a 3-byte character in half."""
    kept = ElmoCharacterIds(30).token_to_ids(KOREAN_LONG)[1:29]
    assert len(KOREAN_LONG.encode("utf-8")) == 33
    cut = bytes(i - 1 for i in kept)
    assert cut == KOREAN_LONG.encode("utf-8")[:28]
    with pytest.raises(UnicodeDecodeError):
        cut.decode("utf-8")
