"""
Parity with AllenNLP core's ELMo (``allennlp.modules.elmo``) on random biLMs written with our
bilm-tf writer. AllenNLP hard-codes 50 characters per token and only supports skip connections,
so every architecture here has those; the other cases are in test_reference_parity.py.
"""
from typing import Dict, List

import pytest
import torch
from allennlp.modules.elmo import Elmo, _ElmoBiLm
from allennlp.modules.elmo import batch_to_ids as allennlp_batch_to_ids

from elmo_plugin.data.character_ids import ElmoCharacterIds
from elmo_plugin.modules.bilm import ElmoBiLm
from tests.helpers import (
    LONG_TOKEN,
    VARIED_BATCH,
    assert_clips_exercised,
    make_random_bilm_files,
    masked_max_abs_diff,
)

pytestmark = pytest.mark.usefixtures("single_thread")

ATOL = 1e-5

ARCHITECTURES: Dict[str, dict] = {
    # (a) the fixture's architecture (proj_clip lowered from 3 so that it bites)
    "tiny": dict(cell_clip=3.0, proj_clip=1.5),
    # (b) several filters, tanh, 2 highway layers, 2 LSTM layers, a tighter projection clip
    "tanh_filters": dict(
        filters=[[1, 8], [2, 8], [3, 16], [4, 16], [5, 32]],
        n_highway=2,
        activation="tanh",
        char_embedding_dim=6,
        lstm_dim=32,
        projection_dim=16,
        n_layers=2,
        cell_clip=3.0,
        proj_clip=2.0,

        seed=1,
    ),
    # (c) one LSTM layer, no highway, a single filter, small clips (often active)
    "one_layer": dict(
        filters=[[3, 24]],
        n_highway=0,
        lstm_dim=24,
        projection_dim=12,
        n_layers=1,
        cell_clip=2.0,
        proj_clip=1.0,
        seed=2,
    ),
    # (d) three LSTM layers, no cell clip
    "three_layers_no_cell_clip": dict(
        filters=[[1, 8], [2, 16]],
        n_highway=1,
        lstm_dim=24,
        projection_dim=8,
        n_layers=3,
        cell_clip=None,
        proj_clip=1.5,

        seed=3,
    ),
    # (e) no projection clip, a small cell clip
    "no_proj_clip": dict(
        filters=[[2, 8], [4, 8]],
        n_highway=1,
        lstm_dim=16,
        projection_dim=8,
        n_layers=2,
        cell_clip=1.0,
        proj_clip=None,

        seed=4,
    ),
}

# A fixed, non-trivial scalar mix for `Elmo`: softmax(s) weights, gamma = 1.
MIX = [0.3, -0.5, 1.2, 0.1]

STATEFUL_BATCHES: List[List[List[str]]] = [
    [["Stateful", "runs", "carry", "state"], ["짧은", "문장"], []],
    [
        ["the", "second", "batch", "is", "larger"],
        ["so", "rows", "three", "and", "four", "start", "from", "zero"],
        [LONG_TOKEN],
        ["new", "row"],
        ["아버지가방에들어가신다", "."],
    ],
    [["then", "smaller"], ["only", "two", "rows"]],
    [["and", "large"], ["again", "!"], ["rows", "2-4", "kept", "their", "state"], ["x"], ["y", "z"]],
]


@pytest.fixture(scope="module", params=list(ARCHITECTURES), ids=list(ARCHITECTURES))
def model_files(request, tmp_path_factory):
    arch = dict(ARCHITECTURES[request.param])
    arch.update(max_characters_per_token=50, use_skip_connections=True)
    files = make_random_bilm_files(tmp_path_factory.mktemp(request.param), n_characters=262, **arch)
    return request.param, files


def our_ids(batch):
    return ElmoCharacterIds(50).batch_to_ids(batch)


def compare_bilm_outputs(name, ours, theirs) -> float:
    assert len(ours["activations"]) == len(theirs["activations"])
    assert torch.equal(ours["mask"], theirs["mask"].bool())
    mask = ours["mask"]
    worst = 0.0
    for layer, (a, b) in enumerate(zip(ours["activations"], theirs["activations"])):
        assert a.shape == b.shape, (name, layer, a.shape, b.shape)
        diff = masked_max_abs_diff(a, b, mask)
        assert diff < ATOL, (name, layer, diff)
        # Padded positions are exactly zero in ours.
        assert float((a * (~mask).unsqueeze(-1)).abs().max()) == 0.0
        worst = max(worst, diff)
    return worst


def test_batch_to_ids_matches_allennlp():
    batch = VARIED_BATCH + [["<S>", "</S>", "밥", "a" * 100, "é" * 30]]
    ours = our_ids(batch)
    theirs = allennlp_batch_to_ids(batch)
    assert ours.dtype == theirs.dtype
    assert torch.equal(ours, theirs)


def test_allennlp_elmo_bilm_parity(model_files):
    name, files = model_files
    ours_bilm = ElmoBiLm.from_files(files.options_file, files.weight_file).eval()
    theirs_bilm = _ElmoBiLm(str(files.options_file), str(files.weight_file)).eval()
    ids = our_ids(VARIED_BATCH)
    with torch.no_grad():
        worst = compare_bilm_outputs(name, ours_bilm(ids), theirs_bilm(ids))
    print(f"_ElmoBiLm parity [{name}]: worst |diff| = {worst:.3g}")
    assert_clips_exercised(ours_bilm, ids)


def test_allennlp_elmo_scalar_mix_parity(model_files):
    name, files = model_files
    ours_bilm = ElmoBiLm.from_files(files.options_file, files.weight_file).eval()
    num_layers = ours_bilm.num_layers
    elmo = Elmo(
        str(files.options_file),
        str(files.weight_file),
        num_output_representations=1,
        dropout=0.0,
        scalar_mix_parameters=MIX[:num_layers],
    ).eval()
    ids = our_ids(VARIED_BATCH)
    with torch.no_grad():
        theirs = elmo(ids)
        ours = ours_bilm(ids)
    weights = torch.softmax(torch.tensor(MIX[:num_layers]), dim=0)
    mixed = sum(w * layer for w, layer in zip(weights, ours["activations"]))
    lengths = [len(s) for s in VARIED_BATCH]
    expected = torch.zeros(len(VARIED_BATCH), max(lengths), mixed.size(-1))
    for row, n in enumerate(lengths):
        expected[row, :n] = mixed[row, 1 : n + 1]  # drop <S> and </S>
    representation = theirs["elmo_representations"][0]
    assert torch.equal(theirs["mask"].bool(), ours_ids_mask(ids))
    diff = masked_max_abs_diff(expected, representation)
    print(f"Elmo scalar-mix parity [{name}]: worst |diff| = {diff:.3g}")
    assert diff < ATOL


def ours_ids_mask(ids: torch.Tensor) -> torch.Tensor:
    return (ids > 0).any(dim=-1)


def test_allennlp_stateful_parity(model_files):
    """AllenNLP's ``_ElmoBiLm`` is stateful; batch sizes 3, 5, 2, 5 exercise growing/shrinking."""
    name, files = model_files
    ours_bilm = ElmoBiLm.from_files(files.options_file, files.weight_file, stateful=True).eval()
    theirs_bilm = _ElmoBiLm(str(files.options_file), str(files.weight_file)).eval()
    stateless = ElmoBiLm.from_files(files.options_file, files.weight_file).eval()
    worst = 0.0
    with torch.no_grad():
        for index, batch in enumerate(STATEFUL_BATCHES):
            ids = our_ids(batch)
            ours = ours_bilm(ids)
            worst = max(worst, compare_bilm_outputs(f"{name} batch {index}", ours, theirs_bilm(ids)))
            if index > 0:
                # The state really matters here: a fresh start gives different top layers.
                fresh = stateless(ids)
                assert masked_max_abs_diff(fresh["activations"][-1], ours["activations"][-1]) > 1e-3
    print(f"stateful parity [{name}]: worst |diff| = {worst:.3g}")


def core_parameter_name(ours: str) -> str:
    """The name of the parameter of AllenNLP's ``_ElmoBiLm`` that holds the same weights."""
    names = {
        "character_encoder.char_embedding.weight": "_token_embedder._char_embedding_weights",
        "character_encoder.projection.weight": "_token_embedder._projection.weight",
        "character_encoder.projection.bias": "_token_embedder._projection.bias",
    }
    if ours in names:
        return names[ours]
    parts = ours.split(".")
    if parts[1] == "convolutions":  # character_encoder.convolutions.K.weight
        return f"_token_embedder.char_conv_{parts[2]}.{parts[3]}"
    if parts[1] == "highway":  # character_encoder.highway.layers.K.weight
        return f"_token_embedder._highways._layers.{parts[3]}.{parts[4]}"
    # lstm.forward_layers.K.input_weight
    direction = parts[1].split("_")[0]
    suffix = {
        "input_weight": "input_linearity.weight",
        "recurrent_weight": "state_linearity.weight",
        "bias": "state_linearity.bias",
        "projection_weight": "state_projection.weight",
    }[parts[3]]
    return f"_elmo_lstm.{direction}_layer_{parts[2]}.{suffix}"


def test_allennlp_gradient_parity(model_files):
    """
    Training needs the backward pass to be right too: the gradient of a fixed random function of
    every output layer, with respect to every weight, against AllenNLP's ``_ElmoBiLm``.
    AllenNLP stores the LSTM gates in the order (i, f, j, o), bilm-tf and we in (i, j, f, o), and
    the highway gate negated (its gate multiplies the carried input, ours the transform).
    """
    name, files = model_files
    ours_bilm = ElmoBiLm.from_files(files.options_file, files.weight_file).train()
    theirs_bilm = _ElmoBiLm(str(files.options_file), str(files.weight_file), requires_grad=True)
    theirs_bilm.train()
    ours_bilm.requires_grad_(True)
    ids = our_ids(VARIED_BATCH)
    ours = ours_bilm(ids)
    theirs = theirs_bilm(ids)
    generator = torch.Generator().manual_seed(0)
    directions = [torch.randn(a.shape, generator=generator) for a in ours["activations"]]
    mask = ours["mask"].unsqueeze(-1)
    sum(((a * d) * mask).sum() for a, d in zip(ours["activations"], directions)).backward()
    sum(((a * d) * mask).sum() for a, d in zip(theirs["activations"], directions)).backward()

    theirs_parameters = dict(theirs_bilm.named_parameters())
    compared = 0
    for parameter_name, parameter in ours_bilm.named_parameters():
        core_gradient = theirs_parameters[core_parameter_name(parameter_name)].grad
        if parameter_name.startswith("lstm.") and not parameter_name.endswith("projection_weight"):
            i, f, j, o = core_gradient.chunk(4, dim=0)
            core_gradient = torch.cat([i, j, f, o], dim=0)
        if parameter_name.startswith("lstm.") and not parameter_name.endswith("bias"):
            core_gradient = core_gradient.t()  # Linear's (out, in); ours TensorFlow's (in, out).
        if ".highway." in parameter_name:
            transform, gate = core_gradient.chunk(2, dim=0)
            core_gradient = torch.cat([transform, -gate], dim=0)
        assert parameter.grad is not None, parameter_name
        scale = float(core_gradient.abs().max()) + 1e-6
        diff = float((parameter.grad - core_gradient).abs().max())
        assert diff <= 1e-4 * scale + 1e-5, (name, parameter_name, diff, scale)
        compared += 1
    assert compared == len(theirs_parameters)
