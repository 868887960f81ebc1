"""
AllenNLP's ELMo state-dict layout read into ours (`elmo_plugin.model_files.allennlp_layout`),
checked against AllenNLP itself: AllenNLP's ``_ElmoBiLm``, ``Elmo`` and ``ElmoTokenEmbedder``
built from the golden fixture, their weights randomised (so that nothing passes because the
fixture's weights are symmetric in some way, and the forget-gate and highway-gate conversions
both matter), and their state dicts loaded into our modules, which must then compute the same.
"""
import math
from typing import Dict

import pytest
import torch
from allennlp.common.checks import ConfigurationError
from allennlp.modules.elmo import Elmo as AllenNlpElmo
from allennlp.modules.elmo import _ElmoBiLm as AllenNlpBiLm
from allennlp.modules.highway import Highway as AllenNlpHighway
from allennlp.modules.token_embedders.elmo_token_embedder import (
    ElmoTokenEmbedder as AllenNlpElmoTokenEmbedder,
)

from elmo_plugin.data.character_ids import batch_to_ids
from elmo_plugin.model_files.allennlp_layout import allennlp_bilm_key_map, bilm_state_layout
from elmo_plugin.modules.bilm import ElmoBiLm
from elmo_plugin.modules.character_encoder import Highway
from elmo_plugin.modules.elmo import Elmo
from elmo_plugin.modules.scalar_mix import ScalarMix
from elmo_plugin.modules.token_embedders.elmo_token_embedder import ElmoTokenEmbedder
from tests.helpers import FIXTURE_OPTIONS, FIXTURE_WEIGHTS, VARIED_BATCH, masked_max_abs_diff

pytestmark = pytest.mark.usefixtures("single_thread")

OPTIONS, WEIGHTS = str(FIXTURE_OPTIONS), str(FIXTURE_WEIGHTS)
ATOL = 1e-5


def randomize_(module: torch.nn.Module, seed: int) -> None:
    """Every parameter of an AllenNLP ELMo module to random values at a scale that keeps the
    gates and clips busy; the character embedding's row 0 too (it must not matter)."""
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, parameter in module.named_parameters():
            fan_in = parameter.shape[-1] if parameter.dim() > 1 else 4
            if "char_conv" in name and parameter.dim() == 3:
                fan_in = parameter.shape[1] * parameter.shape[2]
            scale = 0.5 if parameter.dim() == 1 else 1.5 / math.sqrt(fan_in)
            parameter.copy_(torch.randn(parameter.shape, generator=generator) * scale)


def reset_states_before_every_run(module: torch.nn.Module) -> None:
    """AllenNLP's ELMo LSTM carries its state between calls; ours is stateless by default."""
    from allennlp.modules.elmo_lstm import ElmoLstm

    for submodule in module.modules():
        if isinstance(submodule, ElmoLstm):
            submodule.register_forward_pre_hook(lambda m, _: m.reset_states())


def our_bilm() -> ElmoBiLm:
    # Random weights (not the fixture's), so that only the loaded state can make it match.
    return ElmoBiLm.from_files(OPTIONS, None).eval()


def test_highway_gates_are_opposite_in_allennlp_and_the_conversion_negates_them():
    torch.manual_seed(0)
    theirs = AllenNlpHighway(6, num_layers=2)
    ours = Highway(6, num_layers=2)
    randomize_(theirs, seed=1)
    x = torch.randn(5, 6)
    with torch.no_grad():
        for their_layer, our_layer in zip(theirs._layers, ours.layers):
            our_layer.weight.copy_(their_layer.weight)
            our_layer.bias.copy_(their_layer.bias)
        copied_unchanged = ours(x)
        for our_layer in ours.layers:
            our_layer.weight[6:].neg_()
            our_layer.bias[6:].neg_()
        assert torch.allclose(ours(x), theirs(x), atol=1e-6)
    # Without the negation the layers compute something else: the conventions really differ.
    assert (copied_unchanged - theirs(x)).abs().max() > 1e-2


def test_an_allennlp_bilm_loads_into_ours_and_computes_the_same_layers():
    theirs = AllenNlpBiLm(OPTIONS, WEIGHTS).eval()
    randomize_(theirs, seed=2)
    reset_states_before_every_run(theirs)
    state = theirs.state_dict()
    assert bilm_state_layout(state, "") == "allennlp"
    ours = our_bilm()
    ours.load_state_dict(state)  # strict: every key converted, none left over
    assert bilm_state_layout(ours.state_dict(), "") == "elmo_plugin"

    ids = batch_to_ids(VARIED_BATCH)
    with torch.no_grad():
        expected, actual = theirs(ids), ours(ids)
    assert torch.equal(actual["mask"], expected["mask"])
    assert len(actual["activations"]) == len(expected["activations"]) == 3
    for layer, (mine, reference) in enumerate(zip(actual["activations"], expected["activations"])):
        assert masked_max_abs_diff(mine, reference, expected["mask"]) < ATOL, layer
        # Not all tiny or clipped flat: the comparison can see a wrong gate order.
        assert reference.abs().max() > 0.1


def test_the_forget_bias_and_gate_order_are_converted_not_copied():
    theirs = AllenNlpBiLm(OPTIONS, WEIGHTS)
    state = theirs.state_dict()
    ours = our_bilm()
    ours.load_state_dict(state)
    # AllenNLP's loader turned the file's (TensorFlow's) B into its own order with the forget
    # bias added; converted back, it must be the file's B again, and the whole biLM the file's.
    from_file = ElmoBiLm.from_files(OPTIONS, WEIGHTS).state_dict()
    for key, value in ours.state_dict().items():
        if key == "character_encoder.char_embedding.weight":
            value, expected = value[1:], from_file[key][1:]
        else:
            expected = from_file[key]
        assert torch.allclose(value.float(), expected.float(), atol=1e-6), key


def test_an_allennlp_elmo_with_two_layer_normalised_mixes_loads_into_ours():
    theirs = AllenNlpElmo(OPTIONS, WEIGHTS, 2, do_layer_norm=True, dropout=0.0).eval()
    randomize_(theirs, seed=3)  # also the mixes' s_j and gamma
    reset_states_before_every_run(theirs)
    ours = Elmo(bilm=our_bilm(), num_output_representations=2, do_layer_norm=True, dropout=0.0)
    ours.load_state_dict(theirs.state_dict())
    ours.eval()
    ids = batch_to_ids(VARIED_BATCH)
    with torch.no_grad():
        expected, actual = theirs(ids), ours(ids)
    assert torch.equal(actual["mask"], expected["mask"])
    for mine, reference in zip(actual["elmo_representations"], expected["elmo_representations"]):
        assert masked_max_abs_diff(mine, reference, expected["mask"]) < ATOL


def test_an_allennlp_token_embedder_with_projection_and_vocab_to_cache_loads_into_ours():
    words = ["The", "quick", "fox", "밥"]
    torch.manual_seed(0)
    theirs = AllenNlpElmoTokenEmbedder(
        OPTIONS, WEIGHTS, dropout=0.0, projection_dim=7, vocab_to_cache=words
    ).eval()
    reset_states_before_every_run(theirs)
    state = theirs.state_dict()
    # AllenNLP's vocab_to_cache table is saved with the model; ours is rebuilt, not loaded.
    assert "_elmo._elmo_lstm._word_embedding.weight" in state
    ours = ElmoTokenEmbedder(OPTIONS, WEIGHTS, dropout=0.0, projection_dim=7, vocab_to_cache=words)
    ours.load_state_dict(state)
    ours.eval()
    assert torch.equal(ours._projection.weight, theirs._projection.weight)
    ids = batch_to_ids(VARIED_BATCH)
    mask = (ids > 0).any(-1)
    with torch.no_grad():
        assert masked_max_abs_diff(ours(ids), theirs(ids), mask) < ATOL


def test_loaded_weights_replace_the_vocab_to_cache_vectors_computed_from_the_files():
    theirs = AllenNlpElmo(OPTIONS, WEIGHTS, 1, dropout=0.0).eval()
    randomize_(theirs, seed=4)  # weights other than the files'
    reset_states_before_every_run(theirs)
    words = [token for sentence in VARIED_BATCH for token in sentence]
    ours = Elmo(OPTIONS, WEIGHTS, 1, dropout=0.0, vocab_to_cache=words)
    encoded = []
    ours.bilm.character_encoder.register_forward_hook(lambda m, i, o: encoded.append(i[0].size(0)))
    ours.load_state_dict(theirs.state_dict())
    ours.eval()
    encoded.clear()
    ids = batch_to_ids(VARIED_BATCH)
    with torch.no_grad():
        expected = theirs(ids)["elmo_representations"][0]
        actual = ours(ids)["elmo_representations"][0]
    assert encoded == []  # every token came from the cache...
    assert masked_max_abs_diff(actual, expected, (ids > 0).any(-1)) < ATOL  # ...recomputed


def test_allennlps_cached_boundary_vectors_are_dropped_too():
    # _bos_embedding and _eos_embedding are plain attributes in AllenNLP 2.10 (not saved), but a
    # state dict that has them is still AllenNLP's layout and loads.
    state = _allennlp_state()
    state["_word_embedding.weight"] = torch.zeros(5, 16)
    state["_bos_embedding"] = torch.zeros(16)
    state["_eos_embedding"] = torch.zeros(16)
    ours = our_bilm()
    ours.load_state_dict(state)
    assert torch.equal(
        ours.state_dict()["lstm.forward_layers.0.projection_weight"],
        state["_elmo_lstm.forward_layer_0.state_projection.weight"].t(),
    )


def test_elmo_plugin_0_1_scalar_mix_vectors_still_load():
    mix = ScalarMix(3)
    mix.load_state_dict({"scalar_parameters": torch.tensor([0.5, -1.0, 2.0]), "gamma": torch.tensor([3.0])})
    assert [float(p.detach()) for p in mix.scalar_parameters] == [0.5, -1.0, 2.0]
    assert torch.allclose(mix.layer_weights(), torch.softmax(torch.tensor([0.5, -1.0, 2.0]), 0))
    with pytest.raises(ConfigurationError, match="scalar_parameters has shape"):
        ScalarMix(3).load_state_dict({"scalar_parameters": torch.zeros(3, 1), "gamma": torch.ones(1)})


def _allennlp_state() -> Dict[str, torch.Tensor]:
    return dict(AllenNlpBiLm(OPTIONS, WEIGHTS).state_dict())


def test_keys_of_neither_layout_are_an_error_naming_them():
    state = _allennlp_state()
    state["_token_embedder_v2.weight"] = torch.zeros(1)
    with pytest.raises(ConfigurationError, match=r"fit neither .*_token_embedder_v2\.weight"):
        our_bilm().load_state_dict(state)


def test_both_layouts_at_once_are_an_error():
    state = {**_allennlp_state(), **our_bilm().state_dict()}
    with pytest.raises(ConfigurationError, match="mix AllenNLP's layout"):
        our_bilm().load_state_dict(state)


def test_allennlp_keys_this_bilm_does_not_have_or_lacks_are_named():
    state = _allennlp_state()
    state["_token_embedder.char_conv_5.weight"] = torch.zeros(3, 4, 6)
    del state["_elmo_lstm.backward_layer_1.state_projection.weight"]
    with pytest.raises(ConfigurationError) as error:
        our_bilm().load_state_dict(state)
    message = str(error.value)
    assert "keys this biLM's options do not have: _token_embedder.char_conv_5.weight" in message
    assert "missing keys: _elmo_lstm.backward_layer_1.state_projection.weight" in message


def test_a_shape_that_does_not_fit_is_named_with_both_shapes():
    state = _allennlp_state()
    state["_elmo_lstm.forward_layer_0.state_linearity.weight"] = torch.zeros(128, 16)
    expected = r"state_linearity.weight .* has shape \(128, 16\), but this biLM needs \(256, 16\)"
    with pytest.raises(ConfigurationError, match=expected):
        our_bilm().load_state_dict(state)


def test_the_key_map_covers_every_parameter_of_both_sides():
    theirs = AllenNlpBiLm(OPTIONS, WEIGHTS)
    ours = our_bilm()
    mapping = allennlp_bilm_key_map(ours.options)
    assert set(mapping) == set(theirs.state_dict())
    assert set(mapping.values()) == set(dict(ours.named_parameters()))
