"""
ELMoForManyLangs model directories (issue 26), checked against ``elmoformanylangs`` itself.

Tiny models with random weights are built and saved by the package's own classes (its
``frontend.Model``, ``EmbeddingLayer``, training-code dictionary layout), and our vectors are
compared with its ``Embedder.sents2elmo`` on English and Korean sentences with unknown words and
characters, tokens longer than 48 characters and one-token sentences, through every entry point:
``ElmoEmbedder``, ``allennlp elmo``, ``Elmo``, and ``elmo_token_embedder`` fed by the
``elmoformanylangs_characters`` indexer.

``elmoformanylangs`` 0.0.4.post2 (requirements/dev.txt) imports ``overrides`` for one decorator,
and current ``overrides`` releases reject its use (its issues #100, #101); the shim below stands
in for that module while the package is imported, and nothing else of it is patched.
"""
import importlib
import json
import sys
import types
from pathlib import Path
from typing import Dict, List

import numpy as np
import pytest
import torch
from allennlp.common.checks import ConfigurationError

from elmo_plugin.data.elmoformanylangs_character_ids import ElmoForManyLangsCharacterIds
from elmo_plugin.elmo_embedder import ElmoEmbedder
from elmo_plugin.model_files.elmoformanylangs import (
    ElmoForManyLangsModel,
    is_elmoformanylangs_directory,
)
from elmo_plugin.modules.bilm import ElmoBiLm
from elmo_plugin.modules.elmo import Elmo


def _import_elmoformanylangs():
    saved = sys.modules.get("overrides")
    shim = types.ModuleType("overrides")
    shim.overrides = lambda method: method  # type: ignore[attr-defined]
    sys.modules["overrides"] = shim
    try:
        package = importlib.import_module("elmoformanylangs")
        frontend = importlib.import_module("elmoformanylangs.frontend")
        embedding_layer = importlib.import_module("elmoformanylangs.modules.embedding_layer")
    except Exception as error:  # pragma: no cover - depends on the environment
        pytest.skip(
            f"elmoformanylangs cannot be imported ({type(error).__name__}: {error}); install "
            "requirements/dev.txt (pip install --no-deps elmoformanylangs==0.0.4.post2)",
            allow_module_level=True,
        )
    finally:
        if saved is None:
            sys.modules.pop("overrides", None)
        else:
            sys.modules["overrides"] = saved
    import logging

    logging.getLogger("elmoformanylangs").setLevel(logging.WARNING)
    return package.Embedder, frontend, embedding_layer.EmbeddingLayer


Embedder, frontend, EmbeddingLayer = _import_elmoformanylangs()

pytestmark = pytest.mark.usefixtures("single_thread")

TOLERANCE = 1e-5

# The training text the tiny models' dictionaries are built from (as its biLM.train builds
# them: characters in order of appearance, then the special entries; words after theirs).
CORPUS = ["The cat sat on the mat .", "밥 을 먹었다 .", "a dog sat on a log !"]
LONG_ASCII = "Pneumonoultramicroscopicsilicovolcanoconiosis-and-more-letters"  # 62 characters
LONG_KOREAN = "가나다라마바사아자차카타파하" * 4  # 56 characters, none in the dictionary but 다
assert len(LONG_ASCII) > 48 and len(LONG_KOREAN) > 48
SENTENCES: List[List[str]] = [
    ["The", "cat", "sat", "on", "the", "mat", "."],
    ["A", "zebra", "quietly", "sat", "on", "the", "mat", "."],  # unknown words and characters
    ["밥", "을", "먹었다", "."],
    ["고양이", "가", "낮잠", "을", "잤다", "!"],  # unknown Korean words and characters
    ["a", LONG_ASCII, "and", LONG_KOREAN, "."],
    ["one"],
    ["밥"],
    ["<bos>", "sat", "<pad>"],  # literal special entries: its code gives them their ids
]

ARCHITECTURE = {
    "encoder": {
        "name": "elmo",
        "projection_dim": 8,
        "cell_clip": 1.0,  # small clips so that the random weights reach them
        "proj_clip": 1.0,
        "dim": 12,
        "n_layers": 2,
    },
    "token_embedder": {
        "name": "cnn",
        "activation": "relu",
        "filters": [[1, 4], [2, 4], [3, 6]],
        "n_highway": 2,
        "word_dim": 6,
        "char_dim": 5,
        "max_characters_per_token": 50,
    },
    "classifier": {"name": "sampled_softmax", "n_samples": 10},
    "dropout": 0.1,
}


def make_model_directory(
    directory: Path, word_dim: int, seed: int = 0, legacy_format: bool = False
) -> Path:
    """
    A model directory as elmoformanylangs writes one, built by its classes with random weights
    (every parameter uniform in [-0.5, 0.5], including the embeddings' padding rows).
    ``legacy_format`` saves the .pkl files in the pre-1.6 PyTorch format the released models have.
    """
    config = json.loads(json.dumps(ARCHITECTURE))
    config["token_embedder"]["word_dim"] = word_dim
    characters: Dict[str, int] = {}
    for line in CORPUS:
        for word in line.split():
            for character in word:
                characters.setdefault(character, len(characters))
    # An ideographic space: its line "\u3000\t<id>" is stripped to one field by its reader.
    characters.setdefault("\u3000", len(characters))
    for special in ["<bos>", "<eos>", "<oov>", "<pad>", "<bow>", "<eow>"]:
        characters.setdefault(special, len(characters))
    words = {special: index for index, special in enumerate(["<oov>", "<bos>", "<eos>", "<pad>"])}
    for line in CORPUS:
        for word in line.split():
            words.setdefault(word, len(words))
    char_layer = EmbeddingLayer(config["token_embedder"]["char_dim"], characters, fix_emb=False)
    word_layer = EmbeddingLayer(word_dim, words, fix_emb=False) if word_dim > 0 else None
    model = frontend.Model(config, word_layer, char_layer, False)
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for parameter in model.parameters():
            parameter.copy_(torch.rand(parameter.shape, generator=generator) - 0.5)
    directory.mkdir(parents=True, exist_ok=True)
    save = {"_use_new_zipfile_serialization": False} if legacy_format else {}
    torch.save(model.token_embedder.state_dict(), directory / "token_embedder.pkl", **save)
    torch.save(model.encoder.state_dict(), directory / "encoder.pkl", **save)
    with open(directory / "char.dic", "w", encoding="utf-8") as out:
        for character, index in characters.items():
            print(f"{character}\t{index}", file=out)
    if word_dim > 0:
        with open(directory / "word.dic", "w", encoding="utf-8") as out:
            for word, index in words.items():
                print(f"{word}\t{index}", file=out)
    options_name = f"cnn_{word_dim}_tiny.json"
    (directory / options_name).write_text(json.dumps(config), encoding="utf-8")
    (directory / "config.json").write_text(
        json.dumps({"config_path": options_name, "model": str(directory)}), encoding="utf-8"
    )
    return directory


VARIANTS = {"words": dict(word_dim=6), "no_words": dict(word_dim=0)}


@pytest.fixture(scope="module")
def model_dirs(tmp_path_factory) -> Dict[str, Path]:
    root = tmp_path_factory.mktemp("elmoformanylangs")
    dirs = {
        name: make_model_directory(root / name, seed=index, **arguments)
        for index, (name, arguments) in enumerate(VARIANTS.items())
    }
    dirs["words_legacy_format"] = make_model_directory(
        root / "legacy", word_dim=6, seed=7, legacy_format=True
    )
    return dirs


def their_vectors(directory: Path, sentences, output_layer: int = -2) -> List[np.ndarray]:
    """``sents2elmo`` of a fresh Embedder: its LSTM is stateful across calls (see below)."""
    return Embedder(str(directory)).sents2elmo(sentences, output_layer=output_layer)


def assert_close(ours, theirs, tolerance=TOLERANCE):
    assert len(ours) == len(theirs)
    for index, (a, b) in enumerate(zip(ours, theirs)):
        assert a.shape == b.shape, (index, a.shape, b.shape)
        difference = float(np.abs(np.asarray(a) - np.asarray(b)).max(initial=0.0))
        assert difference <= tolerance, f"sentence {index}: max |difference| {difference:.2e}"


ALL_VARIANTS = ["words", "no_words", "words_legacy_format"]


@pytest.mark.parametrize("variant", ["words", "no_words"])
def test_token_ids_are_those_of_its_create_one_batch(model_dirs, variant):
    directory = model_dirs[variant]
    embedder = Embedder(str(directory))
    theirs_text, _ = importlib.import_module("elmoformanylangs.elmo").read_list(
        SENTENCES + [["a\u3000b"]], 50
    )
    words, characters, lengths, _ = frontend.create_one_batch(
        theirs_text, embedder.word_lexicon, embedder.char_lexicon, embedder.config, sort=False
    )
    scheme = ElmoForManyLangsCharacterIds.from_model(ElmoForManyLangsModel(directory, weights=False))
    for row, sentence in enumerate(SENTENCES + [["a\u3000b"]]):
        tokens = ["<bos>"] + sentence + ["<eos>"]
        ours = torch.tensor([scheme.token_to_ids(token) for token in tokens]) - 1
        assert torch.equal(ours[:, :50], characters[row, : len(tokens)]), sentence
        if variant == "words":
            assert torch.equal(ours[:, 50], words[row, : len(tokens)]), sentence
        else:
            assert ours.size(1) == 50 and words is None


@pytest.mark.parametrize("variant", ALL_VARIANTS)
def test_elmo_embedder_gives_its_vectors_for_all_layers(model_dirs, variant):
    sentences = SENTENCES + [[]]  # an empty sentence too: (3, 0, dim) from both
    ours = ElmoEmbedder(model=str(model_dirs[variant])).embed_batch(sentences)
    assert_close(ours, their_vectors(model_dirs[variant], sentences))


def test_the_comparison_can_fail(model_dirs):
    # Another random model of the same shapes gives other vectors: the tolerance is meaningful.
    ours = ElmoEmbedder(model=str(model_dirs["words_legacy_format"])).embed_batch(SENTENCES[:2])
    theirs = their_vectors(model_dirs["words"], SENTENCES[:2])
    assert max(float(np.abs(a - b).max()) for a, b in zip(ours, theirs)) > 0.1


def test_its_embedder_is_stateful_ours_is_not(model_dirs):
    directory = model_dirs["words"]
    embedder = Embedder(str(directory))
    first = embedder.sents2elmo(SENTENCES[:2], output_layer=-2)
    second = embedder.sents2elmo(SENTENCES[:2], output_layer=-2)
    # Its second call starts from the LSTM state the first left: the LSTM layers differ.
    assert float(np.abs(first[0][1:] - second[0][1:]).max()) > 1e-3
    ours = ElmoEmbedder(model=str(directory))
    assert_close(ours.embed_batch(SENTENCES[:2]), first)
    assert_close(ours.embed_batch(SENTENCES[:2]), first)


@pytest.mark.parametrize("variant", ["words", "no_words"])
def test_allennlp_elmo_command_with_the_model_directory(model_dirs, tmp_path, variant):
    from tests.helpers import read_output, run_elmo

    input_file = tmp_path / "in.txt"
    input_file.write_text("".join(" ".join(s) + "\n" for s in SENTENCES), encoding="utf-8")
    output_file = tmp_path / "out.hdf5"
    status = run_elmo(
        input_file, output_file, "--all", "--model", model_dirs[variant], model_files=False
    )
    assert status == 0
    datasets, _ = read_output(output_file)
    ours = [datasets[str(index)] for index in range(len(SENTENCES))]
    assert_close(ours, their_vectors(model_dirs[variant], SENTENCES))


@pytest.mark.parametrize("variant", ["words", "no_words"])
def test_elmo_and_the_token_embedder_give_its_average(model_dirs, variant):
    """Its default output (the mean of the three layers) is a fixed mix of equal weights."""
    from allennlp.common import Params
    from allennlp.data import Batch, Instance, Vocabulary
    from allennlp.data.fields import TextField
    from allennlp.data.token_indexers import TokenIndexer
    from allennlp.data.tokenizers import Token
    from allennlp.modules.token_embedders import TokenEmbedder

    directory = str(model_dirs[variant])
    theirs = their_vectors(model_dirs[variant], SENTENCES, output_layer=-1)

    elmo = Elmo(model=directory, scalar_mix_parameters=[0.0, 0.0, 0.0], dropout=0.0)
    output = elmo(elmo.bilm.character_ids.batch_to_ids(SENTENCES))
    mixed, mask = output["elmo_representations"][0], output["mask"]
    assert_close([mixed[i, : len(s)].detach().numpy() for i, s in enumerate(SENTENCES)], theirs)
    assert mask.sum(dim=1).tolist() == [len(s) for s in SENTENCES]

    indexer = TokenIndexer.from_params(
        Params({"type": "elmoformanylangs_characters", "model": directory})
    )
    instances = [
        Instance({"tokens": TextField([Token(t) for t in s], {"elmo": indexer})})
        for s in SENTENCES
    ]
    batch = Batch(instances)
    batch.index_instances(Vocabulary())
    elmo_tokens = batch.as_tensor_dict()["tokens"]["elmo"]["elmo_tokens"]
    assert torch.equal(elmo_tokens, elmo.bilm.character_ids.batch_to_ids(SENTENCES))
    embedder = TokenEmbedder.from_params(
        Params(
            {
                "type": "elmo_token_embedder",
                "model": directory,
                "scalar_mix_parameters": [0.0, 0.0, 0.0],
                "dropout": 0.0,
            }
        )
    )
    vectors = embedder(elmo_tokens)
    assert_close([vectors[i, : len(s)].detach().numpy() for i, s in enumerate(SENTENCES)], theirs)


def test_the_token_cache_gives_the_same_vectors(model_dirs):
    directory = str(model_dirs["words"])
    plain = Elmo(model=directory, scalar_mix_parameters=[0.0, 0.0, 0.0], dropout=0.0)
    cached = Elmo(
        model=directory,
        scalar_mix_parameters=[0.0, 0.0, 0.0],
        dropout=0.0,
        vocab_to_cache=["the", "cat", "sat", "밥", "zebra"],
    )
    ids = plain.bilm.character_ids.batch_to_ids(SENTENCES)
    a = plain(ids)["elmo_representations"][0]
    b = cached(ids)["elmo_representations"][0]
    assert float((a - b).abs().max()) <= 1e-6


def test_recognition_and_the_resolver(model_dirs, tmp_path):
    assert is_elmoformanylangs_directory(model_dirs["words"])
    assert not is_elmoformanylangs_directory(tmp_path)
    bilm = ElmoBiLm.from_model(str(model_dirs["no_words"]))
    assert bilm.num_layers == 3 and bilm.get_output_dim() == 16
    assert not any(p.requires_grad for p in bilm.parameters())


def test_a_task_config_reads_the_width_from_its_config(model_dirs, tmp_path):
    # Issue 37: `elmo={model: DIR}` in a task config, the width read from the model's config.
    from allennlp.common import Params

    from elmo_plugin.training.config_functions import elmo_output_dim

    directory = str(model_dirs["words"])
    width = ElmoBiLm.from_model(directory).get_output_dim()
    assert elmo_output_dim(directory, None, None, None) == width == 16
    ner = Path(__file__).parents[2] / "training_configs" / "tasks" / "ner_wikiann.libsonnet"
    (tmp_path / "c.jsonnet").write_text(
        f'(import "{ner}")(use_elmo=true, elmo={{model: "{directory}"}})\n', encoding="utf-8"
    )
    params = Params.from_file(str(tmp_path / "c.jsonnet"))
    assert params["model"]["encoder"]["input_size"] == 100 + 64 + width


# ---------------------------------------------------------------------------------------------
# Bad input: one ConfigurationError that names the file.


def _copy_model(source: Path, target: Path) -> Path:
    target.mkdir()
    for item in source.iterdir():
        (target / item.name).write_bytes(item.read_bytes())
    return target


def test_a_directory_that_is_neither_format(tmp_path):
    (tmp_path / "notes.txt").write_text("hello")
    with pytest.raises(ConfigurationError, match="holds no ELMo model.* or an ELMoForManyLangs"):
        ElmoBiLm.from_model(str(tmp_path))


@pytest.mark.parametrize("name", ["encoder.pkl", "token_embedder.pkl", "char.dic", "word.dic"])
def test_a_missing_file_is_named(model_dirs, tmp_path, name):
    directory = _copy_model(model_dirs["words"], tmp_path / "model")
    (directory / name).unlink()
    with pytest.raises(ConfigurationError) as error:
        ElmoBiLm.from_model(str(directory))
    assert str(directory / name) in str(error.value) and "missing" in str(error.value)
    assert "\n" not in str(error.value)


def test_the_command_reports_a_missing_weight_file_in_one_line(model_dirs, tmp_path, capsys):
    from tests.helpers import run_elmo

    directory = _copy_model(model_dirs["no_words"], tmp_path / "model")
    (directory / "encoder.pkl").unlink()
    (tmp_path / "in.txt").write_text("a b\n", encoding="utf-8")
    status = run_elmo(
        tmp_path / "in.txt", tmp_path / "out.hdf5", "--all", "--model", directory, model_files=False
    )
    assert status == 1 and not (tmp_path / "out.hdf5").exists()
    error = capsys.readouterr().err.strip()
    assert error == f"allennlp elmo: error: {directory / 'encoder.pkl'}: missing; an " + (
        "ELMoForManyLangs model directory needs token_embedder.pkl and encoder.pkl"
    )


@pytest.mark.parametrize("name", ["encoder.pkl", "token_embedder.pkl"])
@pytest.mark.parametrize("variant", ["words", "words_legacy_format"])
def test_a_truncated_weight_file_is_named(model_dirs, tmp_path, name, variant):
    directory = _copy_model(model_dirs[variant], tmp_path / "model")
    content = (directory / name).read_bytes()
    (directory / name).write_bytes(content[: len(content) * 2 // 3])
    with pytest.raises(ConfigurationError) as error:
        ElmoEmbedder(model=str(directory))
    message = str(error.value)
    assert message.startswith(f"{directory / name}: not a readable PyTorch state dict")
    assert "\n" not in message


def test_a_character_dictionary_that_does_not_fit_the_weights(model_dirs, tmp_path):
    directory = _copy_model(model_dirs["words"], tmp_path / "model")
    with open(directory / "char.dic", "a", encoding="utf-8") as out:
        out.write("Z\t999\n")
    with pytest.raises(ConfigurationError) as error:
        ElmoBiLm.from_model(directory)
    message = str(error.value)
    assert message.startswith(str(directory / "char.dic"))
    assert "does not belong to these weights" in message and "token_embedder.pkl" in message


def test_a_word_dictionary_of_another_model(model_dirs, tmp_path):
    directory = _copy_model(model_dirs["words"], tmp_path / "model")
    lines = (directory / "word.dic").read_text(encoding="utf-8").splitlines()
    (directory / "word.dic").write_text("\n".join(lines[:-2]) + "\n", encoding="utf-8")
    with pytest.raises(ConfigurationError, match=r"word\.dic: \d+ entries, but the word embedding"):
        ElmoBiLm.from_model(directory)


def test_a_dictionary_without_the_special_entries(model_dirs, tmp_path):
    directory = _copy_model(model_dirs["words"], tmp_path / "model")
    lines = (directory / "char.dic").read_text(encoding="utf-8").splitlines()
    kept = [line for line in lines if not line.startswith("<bow>")]
    (directory / "char.dic").write_text("\n".join(kept) + "\n", encoding="utf-8")
    with pytest.raises(ConfigurationError, match=r"char\.dic: no entry for <bow>"):
        ElmoBiLm.from_model(directory)


def test_options_that_do_not_fit_the_weights(model_dirs, tmp_path):
    # The options of the model without word embedding, the weights of the one with.
    directory = _copy_model(model_dirs["words"], tmp_path / "model")
    (directory / "config.json").write_text(json.dumps({"config_path": "other.json"}))
    (directory / "other.json").write_text(
        (model_dirs["no_words"] / "cnn_0_tiny.json").read_text(encoding="utf-8")
    )
    with pytest.raises(ConfigurationError) as error:
        ElmoBiLm.from_model(directory)
    message = str(error.value)
    weights = directory / "token_embedder.pkl"
    assert message.startswith(f"{weights}: word_emb_layer.embedding.weight")
    assert "other.json" in message


def test_an_options_file_that_is_nowhere(model_dirs, tmp_path):
    directory = _copy_model(model_dirs["words"], tmp_path / "model")
    (directory / "config.json").write_text(json.dumps({"config_path": "/elsewhere/mine.json"}))
    with pytest.raises(ConfigurationError, match=r"config\.json: its config_path '/elsewhere/"):
        ElmoBiLm.from_model(directory)


def test_the_packaged_options_are_used_when_the_directory_lacks_them(model_dirs, tmp_path):
    # As its Embedder does: a released model names ../configs/cnn_50_100_512_4096_sample.json.
    directory = _copy_model(model_dirs["words"], tmp_path / "model")
    (directory / "config.json").write_text(
        json.dumps({"config_path": "../configs/cnn_50_100_512_4096_sample.json"})
    )
    # The packaged options describe the full-size model: the tiny weights do not fit them.
    with pytest.raises(ConfigurationError) as error:
        ElmoBiLm.from_model(directory)
    assert "elmoformanylangs' packaged cnn_50_100_512_4096_sample.json" in str(error.value)
    package_configs = Path(importlib.import_module("elmoformanylangs").__file__).parent / "configs"
    from elmo_plugin.model_files.elmoformanylangs import PACKAGED_OPTIONS

    for name, options in PACKAGED_OPTIONS.items():
        assert json.loads((package_configs / name).read_text()) == options


def test_export_to_bilm_tf_is_refused_in_one_line(model_dirs, tmp_path, capsys):
    from tests.helpers import run_export

    assert run_export(model_dirs["words"], tmp_path / "out") == 1
    error = capsys.readouterr().err.strip()
    assert error.startswith("allennlp elmo-export: error: ") and "\n" not in error
    assert "ELMoForManyLangs" in error and "word-embedding" in error
    assert not (tmp_path / "out").exists()


# ---------------------------------------------------------------------------------------------
# A task trains with it.


def test_a_tagger_trains_with_the_model_in_its_config(model_dirs, tmp_path):
    from allennlp.commands.train import train_model
    from allennlp.common import Params

    directory = str(model_dirs["words"])
    lines = [
        "The###DET cat###NOUN sat###VERB on###ADP the###DET mat###NOUN .###PUNCT",
        "밥###NOUN 을###PART 먹었다###VERB .###PUNCT",
        "A###DET zebra###NOUN sat###VERB !###PUNCT",
        "고양이###NOUN 가###PART 잤다###VERB .###PUNCT",
    ]
    data = tmp_path / "train.txt"
    data.write_text("\n".join(lines * 2) + "\n", encoding="utf-8")
    params = Params(
        {
            "dataset_reader": {
                "type": "sequence_tagging",
                "token_indexers": {
                    "elmo": {"type": "elmoformanylangs_characters", "model": directory}
                },
            },
            "train_data_path": str(data),
            "validation_data_path": str(data),
            "model": {
                "type": "simple_tagger",
                "text_field_embedder": {
                    "token_embedders": {
                        "elmo": {"type": "elmo_token_embedder", "model": directory, "dropout": 0.2}
                    }
                },
                "encoder": {"type": "lstm", "input_size": 16, "hidden_size": 4},
            },
            "data_loader": {"batch_size": 4},
            "trainer": {"num_epochs": 1, "optimizer": {"type": "adam", "lr": 0.01}},
        }
    )
    model = train_model(params, str(tmp_path / "run"))
    metrics = json.loads((tmp_path / "run" / "metrics.json").read_text())
    assert metrics["epoch"] == 0 and "validation_accuracy" in metrics
    trained = dict(model.named_parameters())
    pretrained = dict(ElmoBiLm.from_model(directory).named_parameters())
    bilm = {n.split("._elmo_lstm.", 1)[1]: p for n, p in trained.items() if "._elmo_lstm." in n}
    assert set(bilm) == set(pretrained)
    for name, parameter in bilm.items():
        # .cpu(): AllenNLP's trainer picks GPU 0 where one is visible (issue 29's GPU run).
        assert not parameter.requires_grad and torch.equal(parameter.cpu(), pretrained[name]), name
    # The mix's layer weights (AllenNLP's layout: scalar_parameters.0, .1, ...) learned.
    mix = [p for n, p in trained.items() if ".scalar_parameters." in n]
    assert mix and all(p.requires_grad for p in mix)
    assert not torch.equal(torch.cat(mix).cpu(), torch.zeros(len(mix)))
    # The archive loads again (its config names the model directory) with the trained weights.
    from allennlp.models.archival import load_archive

    loaded = load_archive(str(tmp_path / "run" / "model.tar.gz")).model
    for name, parameter in loaded.named_parameters():
        assert torch.equal(parameter, trained[name].cpu()), name
