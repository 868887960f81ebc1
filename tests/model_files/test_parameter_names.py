"""
The biLM's parameter names, spelled once in `elmo_plugin.model_files.parameter_names`, against
the state dict the network itself has, for several architectures; and every reader of another
layout gives exactly those names.
"""
import pytest

from elmo_plugin.model_files import parameter_names as names
from elmo_plugin.model_files.allennlp_layout import allennlp_bilm_key_map
from elmo_plugin.model_files.bilm_tf.options import BilmOptions
from elmo_plugin.model_files.bilm_tf.weights import read_bilm_tf_weights
from elmo_plugin.modules.bilm import ElmoBiLm
from elmo_plugin.modules.character_encoder import CharacterEncoder
from tests.helpers import TINY_ARCH, make_random_bilm_files

ARCHITECTURES = {
    # The golden fixture's: 5 filter widths (F = 124 != P = 16: projected), 2 highway, 2 layers.
    "projected": {},
    # F == P: bilm-tf has no projection then.
    "unprojected": dict(filters=[[1, 8], [2, 8]], projection_dim=16, lstm_dim=32),
    "no_highway": dict(n_highway=0),
    "one_layer": dict(n_layers=1, use_skip_connections=False),
    "three_layers": dict(n_layers=3, n_highway=1),
}


def options_of(architecture: str) -> BilmOptions:
    return BilmOptions(**{**TINY_ARCH, **ARCHITECTURES[architecture]})


@pytest.mark.parametrize("architecture", sorted(ARCHITECTURES))
def test_the_names_are_the_networks_own(architecture):
    options = options_of(architecture)
    bilm = ElmoBiLm(options)
    assert (bilm.character_encoder.projection is not None) == options.has_character_projection
    assert names.state_dict_keys(options) == list(bilm.state_dict())


@pytest.mark.parametrize("word_embedding", [False, True])
def test_the_names_of_an_elmoformanylangs_encoder(word_embedding):
    # Its token encoder always projects, and may read a word embedding.
    options = options_of("unprojected")
    encoder = CharacterEncoder(
        filters=options.filters,
        char_embedding_dim=options.char_embedding_dim,
        n_highway=options.n_highway,
        projection_dim=options.projection_dim,
        num_character_ids=30,
        num_word_ids=12 if word_embedding else 0,
        word_embedding_dim=5,
        project=True,
    )
    bilm = ElmoBiLm(options, character_encoder=encoder)
    expected = names.state_dict_keys(
        options, has_projection=True, has_word_embedding=word_embedding
    )
    assert expected == list(bilm.state_dict())


@pytest.mark.parametrize("architecture", sorted(ARCHITECTURES))
def test_readers_of_other_layouts_give_these_names(tmp_path, architecture):
    files = make_random_bilm_files(tmp_path, **ARCHITECTURES[architecture])
    options = BilmOptions.from_file(files.options_file)
    expected = names.state_dict_keys(options)
    assert sorted(read_bilm_tf_weights(files.weight_file, options)) == sorted(expected)
    parameters = set(expected) - {names.FORMAT_VERSION}
    assert set(allennlp_bilm_key_map(options).values()) == parameters
