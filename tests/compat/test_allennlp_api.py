"""
Code written against AllenNLP's ELMo API (``allennlp.modules.elmo.Elmo``, ``batch_to_ids``,
``allennlp.modules.scalar_mix.ScalarMix``, ``ElmoTokenEmbedder``) runs unchanged with
elmo_plugin's swapped in: `user_script` is such code, idioms of AllenNLP's own tests and of its
users included, and it runs once with AllenNLP's classes and once with ours; the results must
agree. The one difference, documented: AllenNLP's ELMo LSTM carries its state from one call to
the next, ours starts every call from zero unless asked (``bilm.stateful = True``).
"""
import re
from types import SimpleNamespace
from typing import Any, Dict

import pytest
import torch
from allennlp.common.checks import ConfigurationError
from allennlp.nn.regularizers import L2Regularizer, RegularizerApplicator

from tests.helpers import FIXTURE_OPTIONS, FIXTURE_WEIGHTS

pytestmark = pytest.mark.usefixtures("single_thread")

ATOL = 1e-5


def allennlp_api() -> SimpleNamespace:
    from allennlp.modules.elmo import Elmo, batch_to_ids
    from allennlp.modules.scalar_mix import ScalarMix
    from allennlp.modules.token_embedders.elmo_token_embedder import ElmoTokenEmbedder

    return SimpleNamespace(Elmo=Elmo, batch_to_ids=batch_to_ids, ScalarMix=ScalarMix,
                           ElmoTokenEmbedder=ElmoTokenEmbedder)


def plugin_api() -> SimpleNamespace:
    from elmo_plugin import Elmo, ElmoTokenEmbedder, ScalarMix, batch_to_ids

    return SimpleNamespace(Elmo=Elmo, batch_to_ids=batch_to_ids, ScalarMix=ScalarMix,
                           ElmoTokenEmbedder=ElmoTokenEmbedder)


def user_script(api: SimpleNamespace) -> Dict[str, Any]:
    """Code as a user of AllenNLP's ELMo writes it; only the names come from ``api``."""
    Elmo, batch_to_ids = api.Elmo, api.batch_to_ids
    ScalarMix, ElmoTokenEmbedder = api.ScalarMix, api.ElmoTokenEmbedder
    options_file, weight_file = str(FIXTURE_OPTIONS), str(FIXTURE_WEIGHTS)
    results: Dict[str, Any] = {}

    sentences = [["First", "sentence", "."], ["Another", "one", "that", "is", "longer", "."], ["x"]]
    character_ids = batch_to_ids(sentences)
    results["character_ids"] = character_ids

    # Positional arguments as in AllenNLP's docs; two mixes, set the way AllenNLP's tests do.
    elmo = Elmo(options_file, weight_file, 2, dropout=0)
    for k in range(3):
        elmo.scalar_mix_0.scalar_parameters[k].data[0] = 0.5 * k
        elmo.scalar_mix_1.scalar_parameters[k].data[0] = -0.3 * k
    elmo.scalar_mix_1.gamma.data[0] = 2.0
    output = elmo(character_ids)
    results["representation_0"] = output["elmo_representations"][0]
    results["representation_1"] = output["elmo_representations"][1]
    results["mask"] = output["mask"]
    results["output_dim"] = elmo.get_output_dim()
    # A second call on the same module (AllenNLP carries the LSTM state over).
    results["second_call"] = elmo(character_ids)["elmo_representations"][0]

    # Inputs with an extra leading dimension come back in that shape.
    fresh = Elmo(options_file, weight_file, 1, dropout=0.0)
    results["four_dimensional"] = fresh(character_ids.unsqueeze(0))["elmo_representations"][0]

    # A prebuilt biLM, AllenNLP's keyword.
    shared = Elmo(None, None, 1, dropout=0.0, module=Elmo(options_file, weight_file, 1)._elmo_lstm)
    results["module"] = shared(character_ids)["elmo_representations"][0]
    try:
        Elmo(options_file, None, 1, module=shared._elmo_lstm)
    except ConfigurationError as error:
        results["module_error"] = type(error).__name__

    # Layer names, the regularizer regex of AllenNLP's configs, and its penalty.
    results["mix_parameter_names"] = sorted(
        name for name, _ in elmo.named_parameters() if re.search("scalar_parameters|gamma", name)
    )
    penalty = RegularizerApplicator([("scalar_parameters", L2Regularizer(0.01))])(elmo)
    results["l2_penalty"] = penalty

    # ScalarMix on its own, with layer norm, parameters set through the list.
    generator = torch.Generator().manual_seed(0)
    tensors = [torch.randn(2, 4, 5, generator=generator) for _ in range(3)]
    mask = torch.tensor([[True, True, True, False], [True, True, False, False]])
    mix = ScalarMix(3, do_layer_norm=True)
    for k, value in enumerate([0.1, 0.2, 0.3]):
        mix.scalar_parameters[k].data[0] = value
    results["scalar_mix"] = mix(tensors, mask)
    results["scalar_mix_weights"] = torch.nn.functional.softmax(
        torch.cat([parameter for parameter in mix.scalar_parameters]), dim=0
    )
    results["mixture_size"] = ScalarMix(mixture_size=4).mixture_size
    try:
        ScalarMix(3)(tensors + tensors[:2])
    except ConfigurationError as error:
        results["scalar_mix_error"] = type(error).__name__

    # The token embedder, positional arguments in AllenNLP's order, with a projection.
    embedder = ElmoTokenEmbedder(options_file, weight_file, False, 0.0, False, 4)
    with torch.no_grad():
        embedder._projection.weight.copy_(torch.randn(4, 32, generator=generator))
        embedder._projection.bias.copy_(torch.randn(4, generator=generator))
    results["token_embedder"] = embedder(character_ids)
    results["token_embedder_dim"] = embedder.get_output_dim()
    return results


@pytest.fixture(scope="module")
def both() -> Dict[str, Dict[str, Any]]:
    with torch.no_grad():
        return {"allennlp": user_script(allennlp_api()), "plugin": user_script(plugin_api())}


def test_the_two_apis_are_different_code(both):
    assert plugin_api().Elmo is not allennlp_api().Elmo
    assert plugin_api().ScalarMix.__module__.startswith("elmo_plugin")


def test_the_script_gives_the_same_results_with_both(both):
    theirs, ours = both["allennlp"], both["plugin"]
    assert set(ours) == set(theirs)
    for key, expected in theirs.items():
        if key == "second_call":
            continue  # the documented difference, below
        actual = ours[key]
        if isinstance(expected, torch.Tensor):
            assert actual.shape == expected.shape, key
            if expected.is_floating_point():
                assert torch.allclose(actual, expected, atol=ATOL, rtol=0), key
            else:
                assert torch.equal(actual, expected), key
        else:
            assert actual == expected, key
    assert theirs["module_error"] == theirs["scalar_mix_error"] == "ConfigurationError"


def test_the_one_difference_is_the_stateless_default(both):
    theirs, ours = both["allennlp"], both["plugin"]
    # AllenNLP's second call starts from the state the first left; ours from zero, so it
    # repeats the first call.
    assert (theirs["second_call"] - theirs["representation_0"]).abs().max() > 1e-3
    assert torch.allclose(ours["second_call"], ours["representation_0"], atol=1e-6, rtol=0)


def test_a_stateful_biLM_reproduces_allennlp_over_consecutive_batches_of_any_size():
    from allennlp.modules.elmo import Elmo as AllenNlpElmo

    from elmo_plugin import Elmo, batch_to_ids

    batches = [
        [["First", "sentence", "."], ["Another", "one", "that", "is", "longer", "."]],
        [["x", "y"], ["a", "b", "c", "d"], ["p", "q", "r", "s", "t", "u", "v"]],  # more rows
        [["one"]],  # fewer
        [["two", "words"], ["three", "more", "words"]],
    ]
    theirs = AllenNlpElmo(str(FIXTURE_OPTIONS), str(FIXTURE_WEIGHTS), 1, dropout=0.0)
    ours = Elmo(str(FIXTURE_OPTIONS), str(FIXTURE_WEIGHTS), 1, dropout=0.0)
    ours.bilm.stateful = True
    stateless = Elmo(str(FIXTURE_OPTIONS), str(FIXTURE_WEIGHTS), 1, dropout=0.0)
    carried = 0.0
    with torch.no_grad():
        for index, sentences in enumerate(batches):
            ids = batch_to_ids(sentences)
            mask = (ids > 0).any(-1).unsqueeze(-1)
            expected = theirs(ids)["elmo_representations"][0] * mask
            actual = ours(ids)["elmo_representations"][0] * mask
            assert torch.allclose(actual, expected, atol=ATOL, rtol=0), index
            fresh = stateless(ids)["elmo_representations"][0] * mask
            carried = max(carried, float((fresh - expected).abs().max()))
    assert carried > 1e-3  # the state carried over really changed AllenNLP's vectors
