"""
The ELMo layer for task models: the scalar mix against a hand computation and AllenNLP's
``ScalarMix``, the L2 penalty through AllenNLP's regularizer, fixed mixes, ``Elmo`` and
``elmo_token_embedder`` against AllenNLP core's ``Elmo``, loading from an archive, fine-tuning
only when asked, and the token cache giving identical vectors.
"""
import json
import math
from pathlib import Path

import pytest
import torch
from allennlp.common import Params
from allennlp.common.checks import ConfigurationError
from allennlp.data import Vocabulary
from allennlp.models import Model
from allennlp.modules import ScalarMix as CoreScalarMix
from allennlp.modules.elmo import Elmo as CoreElmo
from allennlp.modules.token_embedders import TokenEmbedder
from allennlp.nn import RegularizerApplicator
from allennlp.nn.regularizers import L2Regularizer

from elmo_plugin.data.character_ids import ElmoCharacterIds
from elmo_plugin.data.vocabulary import BilmTfVocabulary
from elmo_plugin.models.elmo_language_model import ElmoLanguageModel
from elmo_plugin.modules.bilm import ElmoBiLm
from elmo_plugin.modules.elmo import Elmo
from elmo_plugin.modules.scalar_mix import ScalarMix, SingleLayerMix
from elmo_plugin.modules.token_embedders.elmo_token_embedder import ElmoTokenEmbedder
from tests.helpers import (
    FIXTURE_OPTIONS,
    FIXTURE_WEIGHTS,
    KOREAN_LONG,
    LONG_TOKEN,
    make_random_bilm_files,
    write_serialization_directory,
)

pytestmark = pytest.mark.usefixtures("single_thread")

SENTENCES = [
    "The cat sat on the mat .".split(),
    ["unseenword", KOREAN_LONG, LONG_TOKEN, "."],
    ["Hi"],
    "A much longer sentence that has quite a few more tokens than the others .".split(),
]
ATOL = 1e-5


def character_ids(sentences=SENTENCES, max_characters: int = 50) -> torch.Tensor:
    return ElmoCharacterIds(max_characters).batch_to_ids(sentences)


def random_layers(seed: int = 0, shape=(3, 5, 4), num_layers: int = 3):
    generator = torch.Generator().manual_seed(seed)
    return [torch.randn(*shape, generator=generator) for _ in range(num_layers)]


# ----------------------------------------------------------------------------- the scalar mix


def test_scalar_mix_against_a_hand_computation():
    layers = random_layers()
    s = [0.2, -1.0, 0.5]
    mix = ScalarMix(3, initial_scalar_parameters=s)
    with torch.no_grad():
        mix.gamma.fill_(2.0)
    total = sum(math.exp(v) for v in s)
    weights = [math.exp(v) / total for v in s]
    for b in range(3):
        for t in range(5):
            for d in range(4):
                expected = 2.0 * sum(weights[j] * layers[j][b, t, d].item() for j in range(3))
                assert mix(layers)[b, t, d].item() == pytest.approx(expected, abs=1e-6)
    assert mix.layer_weights().tolist() == pytest.approx(weights, abs=1e-7)
    # Untrained: an equal average, gamma 1.
    assert torch.allclose(ScalarMix(3)(layers), sum(layers) / 3, atol=1e-6)


@pytest.mark.parametrize("do_layer_norm", [False, True])
def test_scalar_mix_matches_allennlp(do_layer_norm):
    layers = random_layers(seed=1, shape=(4, 7, 6))
    layers = [layer * (j + 1) + j for j, layer in enumerate(layers)]  # different scales
    mask = torch.tensor([[True] * 7, [True] * 3 + [False] * 4, [True] + [False] * 6, [True] * 5 + [False] * 2])
    s = [0.3, -0.7, 1.1]
    ours = ScalarMix(3, do_layer_norm=do_layer_norm, initial_scalar_parameters=s)
    core = CoreScalarMix(3, do_layer_norm=do_layer_norm, initial_scalar_parameters=s)
    with torch.no_grad():
        ours.gamma.fill_(1.7)
        core.gamma.fill_(1.7)
    expected = core(layers, mask)
    actual = ours(layers, mask)
    assert torch.allclose(actual, expected, atol=1e-6), (actual - expected).abs().max()


def test_scalar_mix_checks_its_arguments():
    with pytest.raises(ConfigurationError, match="2 initial scalar parameters"):
        ScalarMix(3, initial_scalar_parameters=[0.0, 1.0])
    # ConfigurationError, as AllenNLP's ScalarMix raises.
    with pytest.raises(ConfigurationError, match="2 tensors were passed, but the mix was built for 3"):
        ScalarMix(3)(random_layers(num_layers=2))
    with pytest.raises(ConfigurationError, match="needs the mask"):
        ScalarMix(3, do_layer_norm=True)(random_layers())
    with pytest.raises(ConfigurationError, match="layer 3 of a biLM with 3 layers"):
        SingleLayerMix(3, layer=3)


def test_fixed_mixes_select_one_layer_and_do_not_train():
    layers = random_layers(seed=2)
    fixed = ScalarMix(3, initial_scalar_parameters=[-9e10, 1.0, -9e10], trainable=False)
    assert torch.equal(fixed(layers), layers[1])
    assert not any(p.requires_grad for p in fixed.parameters())
    top = ScalarMix.by_name("single_layer")(num_layers=3, layer=-1)
    assert torch.equal(top(layers), layers[2])
    assert not any(p.requires_grad for p in top.parameters())


# ------------------------------------------------------------------ Elmo and the token embedder


def core_elmo(do_layer_norm: bool, num_output_representations: int = 1, **kwargs) -> CoreElmo:
    return CoreElmo(
        str(FIXTURE_OPTIONS),
        str(FIXTURE_WEIGHTS),
        num_output_representations,
        do_layer_norm=do_layer_norm,
        dropout=0.0,
        **kwargs,
    ).eval()


@pytest.mark.parametrize("do_layer_norm", [False, True])
def test_elmo_matches_allennlp_core(do_layer_norm):
    ids = character_ids()
    core = core_elmo(do_layer_norm, num_output_representations=2)
    ours = Elmo(
        str(FIXTURE_OPTIONS),
        str(FIXTURE_WEIGHTS),
        num_output_representations=2,
        do_layer_norm=do_layer_norm,
        dropout=0.0,
    ).eval()
    # Different mixes for the two outputs, the same on both sides.
    for k, s in enumerate([[0.5, -0.5, 1.0], [-1.0, 0.0, 2.0]]):
        with torch.no_grad():
            for i, value in enumerate(s):
                getattr(core, f"scalar_mix_{k}").scalar_parameters[i].fill_(value)
                getattr(ours, f"scalar_mix_{k}").scalar_parameters[i].fill_(value)
    expected = core(ids)
    actual = ours(ids)
    assert torch.equal(actual["mask"], expected["mask"])
    for mine, theirs in zip(actual["elmo_representations"], expected["elmo_representations"]):
        assert mine.shape == theirs.shape
        assert torch.allclose(mine, theirs, atol=ATOL), (mine - theirs).abs().max()
    assert not torch.allclose(actual["elmo_representations"][0], actual["elmo_representations"][1])


def options_with_training_dropout(tmp_path: Path) -> Path:
    """The golden fixture's options with bilm-tf's training dropout, as its training options and
    the plugin's own exports have it."""
    options = json.loads(FIXTURE_OPTIONS.read_text(encoding="utf-8"))
    options["dropout"] = 0.1
    path = tmp_path / "options.json"
    path.write_text(json.dumps(options), encoding="utf-8")
    return path


@pytest.mark.parametrize("given_as", ["files", "module", "bilm"])
def test_elmo_turns_off_the_bilms_own_training_dropout_however_it_arrives(tmp_path, given_as):
    options = options_with_training_dropout(tmp_path)
    if given_as == "files":
        elmo = Elmo(str(options), str(FIXTURE_WEIGHTS), 1, dropout=0.0)
    else:
        bilm = ElmoBiLm.from_files(options, FIXTURE_WEIGHTS)
        assert bilm.training_dropout == 0.1
        elmo = Elmo(None, None, 1, dropout=0.0, **{given_as: bilm})
    assert elmo.bilm.training_dropout == 0.0
    elmo.train()  # what a task model's training does
    ids = character_ids()
    with torch.no_grad():
        first, second = (elmo(ids)["elmo_representations"][0] for _ in range(2))
    assert torch.equal(first, second)


def test_elmo_keeps_sentence_boundaries_like_core():
    ids = character_ids()
    expected = core_elmo(False, keep_sentence_boundaries=True)(ids)
    actual = Elmo(
        str(FIXTURE_OPTIONS), str(FIXTURE_WEIGHTS), dropout=0.0, keep_sentence_boundaries=True
    ).eval()(ids)
    assert torch.equal(actual["mask"], expected["mask"])
    assert torch.allclose(
        actual["elmo_representations"][0], expected["elmo_representations"][0], atol=ATOL
    )


def embedder_from_config(**params) -> TokenEmbedder:
    return TokenEmbedder.from_params(Params({"type": "elmo_token_embedder", **params}))


def test_token_embedder_replaces_allennlps_and_matches_core():
    assert TokenEmbedder.by_name("elmo_token_embedder") is ElmoTokenEmbedder
    embedder = embedder_from_config(
        options_file=str(FIXTURE_OPTIONS), weight_file=str(FIXTURE_WEIGHTS), dropout=0.0
    ).eval()
    ids = character_ids()
    expected = core_elmo(False)(ids)["elmo_representations"][0]
    actual = embedder(ids)
    assert embedder.get_output_dim() == 32 == actual.size(-1)
    assert torch.allclose(actual, expected, atol=ATOL)
    # Leading dimensions beyond (batch, time) are flattened and restored (ListField of texts).
    nested = embedder(torch.stack([ids, ids]))
    assert nested.shape == (2,) + actual.shape
    assert torch.allclose(nested[1], actual, atol=1e-6)


def test_token_embedder_projection_and_fixed_mix_from_config():
    embedder = embedder_from_config(
        options_file=str(FIXTURE_OPTIONS),
        weight_file=str(FIXTURE_WEIGHTS),
        dropout=0.0,
        projection_dim=7,
        scalar_mix_parameters=[-9e10, -9e10, 1.0],
    ).eval()
    ids = character_ids()
    assert embedder.get_output_dim() == 7
    assert embedder(ids).shape == ids.shape[:2] + (7,)
    top = embedder_from_config(
        options_file=str(FIXTURE_OPTIONS),
        weight_file=str(FIXTURE_WEIGHTS),
        dropout=0.0,
        scalar_mix={"type": "single_layer", "layer": -1},
    ).eval()
    core = core_elmo(False, scalar_mix_parameters=[-9e10, -9e10, 1.0])
    assert torch.allclose(top(ids), core(ids)["elmo_representations"][0], atol=ATOL)
    assert not any(p.requires_grad for p in top.parameters())


def write_bilm_archive(directory: Path) -> Path:
    """A serialization directory and model.tar.gz of an elmo_bilm with the fixture's weights."""
    directory.mkdir()
    vocabulary_file = directory / "bilm_vocabulary.txt"
    vocabulary_file.write_text("<S>\n</S>\n<UNK>\nthe\n.\n", encoding="utf-8")
    options = json.loads(FIXTURE_OPTIONS.read_text())
    model_params = {"type": "elmo_bilm", "num_samples": 2, "options": options}
    vocab = BilmTfVocabulary.from_bilm_tf_file(str(vocabulary_file))
    model = ElmoLanguageModel(vocab, options, num_samples=2, initial_weight_file=str(FIXTURE_WEIGHTS))
    config = {
        "dataset_reader": {"type": "bilm_corpus"},
        "train_data_path": "unused.txt",
        "vocabulary": {"type": "from_bilm_tf_file", "vocabulary_file": str(vocabulary_file)},
        "model": model_params,
        "data_loader": {"batch_size": 2},
        "trainer": {"optimizer": "adam"},
    }
    return write_serialization_directory(directory, model, config)


def test_token_embedder_loads_our_training_archive(tmp_path):
    directory = write_bilm_archive(tmp_path / "run")
    ids = character_ids()
    expected = core_elmo(False)(ids)["elmo_representations"][0]
    for params in (
        {"archive_file": str(directory / "model.tar.gz")},
        {"archive_file": str(directory)},
        {"weight_file": str(directory / "model.tar.gz")},  # no options file: an archive
    ):
        embedder = embedder_from_config(dropout=0.0, **params).eval()
        assert torch.allclose(embedder(ids), expected, atol=ATOL), params
    with pytest.raises(ConfigurationError, match="not both"):
        embedder_from_config(
            archive_file=str(directory), options_file=str(FIXTURE_OPTIONS), weight_file="x"
        )
    with pytest.raises(ConfigurationError, match="needs options_file and weight_file"):
        embedder_from_config(options_file=str(FIXTURE_OPTIONS))


class _Classifier(Model):
    """The smallest task model around the embedder: mean of ELMo vectors -> 2 classes."""

    def __init__(self, vocab, embedder: ElmoTokenEmbedder, regularizer=None):
        super().__init__(vocab, regularizer=regularizer)
        self.embedder = embedder
        self.output = torch.nn.Linear(embedder.get_output_dim(), 2)

    def forward(self, ids, label):
        vectors = self.embedder(ids)
        mask = (ids > 0).any(-1, keepdim=True).float()
        pooled = (vectors * mask).sum(1) / mask.sum(1)
        return {"loss": torch.nn.functional.cross_entropy(self.output(pooled), label)}


def train_one_step(requires_grad: bool):
    torch.manual_seed(0)
    embedder = ElmoTokenEmbedder(
        str(FIXTURE_OPTIONS), str(FIXTURE_WEIGHTS), dropout=0.0, requires_grad=requires_grad
    )
    model = _Classifier(Vocabulary(), embedder)
    before = {name: p.detach().clone() for name, p in model.named_parameters()}
    optimizer = torch.optim.SGD([p for p in model.parameters() if p.requires_grad], lr=1.0)
    model(character_ids(), torch.tensor([0, 1, 0, 1]))["loss"].backward()
    optimizer.step()
    changed = {name for name, p in model.named_parameters() if not torch.equal(p, before[name])}
    return changed


def test_the_bilm_is_frozen_unless_fine_tuning_is_asked_for():
    frozen = train_one_step(requires_grad=False)
    assert frozen and all("_elmo_lstm" not in name for name in frozen), frozen
    assert {f"embedder._elmo.scalar_mix_0.scalar_parameters.{i}" for i in range(3)} <= frozen
    assert "embedder._elmo.scalar_mix_0.gamma" in frozen
    tuned = train_one_step(requires_grad=True)
    bilm_changed = {name for name in tuned if "_elmo_lstm" in name}
    assert any("character_encoder" in name for name in bilm_changed), tuned
    assert any(".lstm." in name for name in bilm_changed), tuned


def test_l2_penalty_on_the_layer_weights_changes_the_loss_by_lambda_s_squared():
    from allennlp.data.data_loaders import SimpleDataLoader
    from allennlp.training import GradientDescentTrainer

    alpha = 0.1
    s = torch.tensor([0.4, -1.2, 2.0])
    losses = {}
    for regularized in (False, True):
        torch.manual_seed(0)
        embedder = ElmoTokenEmbedder(str(FIXTURE_OPTIONS), str(FIXTURE_WEIGHTS), dropout=0.0)
        with torch.no_grad():
            for i, value in enumerate(s.tolist()):
                embedder.elmo.scalar_mix_0.scalar_parameters[i].fill_(value)
        # The regex of AllenNLP's own ELMo configs.
        regularizer = (
            RegularizerApplicator([("scalar_parameters", L2Regularizer(alpha))])
            if regularized
            else None
        )
        model = _Classifier(Vocabulary(), embedder, regularizer)
        trainer = GradientDescentTrainer(
            model,
            torch.optim.SGD(model.parameters(), lr=0.1),
            data_loader=SimpleDataLoader([], batch_size=1),
            num_epochs=1,
        )
        outputs = trainer.batch_outputs(
            {"ids": character_ids(), "label": torch.tensor([0, 1, 0, 1])}, for_training=True
        )
        losses[regularized] = outputs["loss"].item()
    assert losses[True] - losses[False] == pytest.approx(alpha * float((s**2).sum()), rel=1e-5)


# -------------------------------------------------------------------------------- the cache


def test_vocab_to_cache_gives_identical_vectors_and_skips_the_encoder():
    ids = character_ids()
    plain = Elmo(str(FIXTURE_OPTIONS), str(FIXTURE_WEIGHTS), dropout=0.0).eval()
    vocabulary = ["The", "cat", "sat", "on", "the", "mat", ".", "Hi", KOREAN_LONG]
    cached = Elmo(
        str(FIXTURE_OPTIONS), str(FIXTURE_WEIGHTS), dropout=0.0, vocab_to_cache=vocabulary
    ).eval()
    encoded_rows = []
    cached.bilm.character_encoder.register_forward_hook(
        lambda module, inputs, output: encoded_rows.append(inputs[0].size(0))
    )
    expected = plain(ids)["elmo_representations"][0]
    actual = cached(ids)["elmo_representations"][0]
    # Identical up to float rounding: a matrix multiply over a different number of rows may
    # round differently in the last bit.
    assert torch.allclose(actual, expected, atol=1e-6, rtol=0), (actual - expected).abs().max()
    # Only the tokens outside the list (and none of <S>, </S>) went through the encoder.
    outside = sum(1 for sentence in SENTENCES for token in sentence if token not in vocabulary)
    assert encoded_rows == [outside]
    assert len(cached.bilm.token_cache) == len(vocabulary) + 2
    # A batch of nothing but cached tokens skips the encoder altogether.
    encoded_rows.clear()
    only_known = character_ids([["the", "cat"], ["Hi", "."]])
    assert torch.allclose(
        cached(only_known)["elmo_representations"][0],
        plain(only_known)["elmo_representations"][0],
        atol=1e-6,
        rtol=0,
    )
    assert encoded_rows == []


def test_token_embedder_with_30_characters_per_token(tmp_path):
    files = make_random_bilm_files(tmp_path, max_characters_per_token=30)
    embedder = ElmoTokenEmbedder(
        str(files.options_file), str(files.weight_file), dropout=0.0, vocab_to_cache=["the", "."]
    ).eval()
    sentences = [["the", KOREAN_LONG, "."], ["the"]]
    ids = ElmoCharacterIds(30).batch_to_ids(sentences)
    assert ids.shape[-1] == 30
    vectors = embedder(ids)
    # The top layer alone equals what our ElmoEmbedder computes for the same files.
    from elmo_plugin.elmo_embedder import ElmoEmbedder

    reference = ElmoEmbedder(str(files.options_file), str(files.weight_file)).embed_batch(sentences)
    equal_mix = sum(torch.as_tensor(reference[0][j]) for j in range(3)) / 3
    assert torch.allclose(vectors[0, :3], equal_mix, atol=ATOL)
    with pytest.raises(ValueError, match="30"):
        embedder(character_ids())  # 50-character ids into a 30-character biLM


def test_repeated_tokens_are_encoded_once_with_the_same_vectors(monkeypatch):
    from elmo_plugin.modules import token_cache

    bilm = ElmoBiLm.from_files(str(FIXTURE_OPTIONS), str(FIXTURE_WEIGHTS)).eval()
    ids = character_ids([["the", "cat", "the", "."], ["the", ".", KOREAN_LONG]])
    ids, mask = bilm.add_sentence_boundaries(ids)
    rows = []
    bilm.character_encoder.register_forward_hook(
        lambda module, inputs, output: rows.append(inputs[0].size(0))
    )
    deduplicated = bilm.encode_tokens(ids, mask)
    # <S> twice, </S> twice, "the" three times, "." twice: 11 tokens, 6 distinct.
    assert rows == [6]
    one_by_one = torch.stack(
        [bilm.character_encoder(ids[b, t : t + 1])[0] for b, t in mask.nonzero().tolist()]
    )
    # To float rounding: the encoder's matrix multiplies take other shapes one token at a time.
    assert torch.allclose(deduplicated[mask], one_by_one, atol=1e-5, rtol=0)
    # A key collision (forced here) only costs the deduplication, never a wrong vector.
    monkeypatch.setattr(token_cache, "row_keys", lambda ids: ids.new_zeros(ids.shape[:-1]))
    assert token_cache.unique_rows(ids[mask]) is None
    rows.clear()
    assert torch.allclose(bilm.encode_tokens(ids, mask), deduplicated, atol=1e-5, rtol=0)
    assert rows == [int(mask.sum())]


def test_an_empty_batch_gives_empty_layers_and_representations():
    # (0, T, 50) ids: a batch with no sentences (issue 40 found it raising in the biLM).
    bilm = ElmoBiLm.from_files(FIXTURE_OPTIONS, FIXTURE_WEIGHTS)
    empty = torch.zeros(0, 5, 50, dtype=torch.long)
    output = bilm(empty)
    assert [tuple(layer.shape) for layer in output["activations"]] == [(0, 7, 32)] * 3
    assert tuple(output["mask"].shape) == (0, 7)
    elmo = Elmo(FIXTURE_OPTIONS, FIXTURE_WEIGHTS, 2, dropout=0.0)
    mixed = elmo(empty)
    assert [tuple(r.shape) for r in mixed["elmo_representations"]] == [(0, 5, 32)] * 2
    assert tuple(mixed["mask"].shape) == (0, 5)
