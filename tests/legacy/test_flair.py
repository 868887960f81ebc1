"""
flair's ``ELMoEmbeddings`` (flair 0.15.1, requirements/dev.txt), unchanged, on the plugin: it does
``import allennlp.commands.elmo`` and ``ElmoEmbedder(options_file=..., weight_file=...,
cuda_device=...)``, then ``embed_batch``. Its token vectors equal `elmo_plugin.ElmoEmbedder`'s
layers as flair combines them (``all``: concatenated, ``top``, ``average``), and a
``SequenceTagger`` on them trains one epoch and predicts (about 7 s on the fixture model).
"""
import random
from pathlib import Path

import numpy as np
import pytest

from elmo_plugin.elmo_embedder import ElmoEmbedder
from elmo_plugin.legacy import finder
from tests.helpers import FIXTURE_OPTIONS, FIXTURE_WEIGHTS

pytestmark = pytest.mark.usefixtures("single_thread")

# The module flair imports; see test_allennlp_commands_elmo.py for the .pth in a fresh interpreter.
finder.install()

SENTENCES = [
    "The cat sat on the mat .",
    "Maria lives in Paris .",
    "I went to the bank to deposit money .",
]


@pytest.mark.parametrize("mode", ["all", "top", "average"])
def test_flair_elmo_embeddings_give_the_plugins_vectors(mode):
    from flair.data import Sentence
    from flair.embeddings import ELMoEmbeddings

    embeddings = ELMoEmbeddings(
        options_file=str(FIXTURE_OPTIONS), weight_file=str(FIXTURE_WEIGHTS), embedding_mode=mode
    )
    ours = ElmoEmbedder(FIXTURE_OPTIONS, FIXTURE_WEIGHTS)
    sentences = [Sentence(text) for text in SENTENCES]
    embeddings.embed(sentences)  # one embed_batch call for the three
    assert embeddings.embedding_length == {"all": 96, "top": 32, "average": 32}[mode]
    for sentence in sentences:
        got = np.stack([token.get_embedding().cpu().numpy() for token in sentence])
        layers = ours.embed_sentence([token.text for token in sentence])
        expected = {
            "all": np.concatenate(list(layers), axis=-1),
            "top": layers[-1],
            "average": layers.mean(axis=0),
        }[mode]
        # Batched with the other sentences in flair, alone here: float noise of batching only.
        np.testing.assert_allclose(got, expected, rtol=0, atol=1e-5)


def write_tiny_ner(directory: Path, seed: int = 0) -> None:
    """A tiny NER set in CoNLL columns (token, BIO tag): person, verb phrase, location."""
    people, places = ["Anna", "Peter", "Maria", "John"], ["Berlin", "Paris", "London", "Rome"]
    rng = random.Random(seed)
    for split, size in (("train", 120), ("dev", 8), ("test", 8)):
        lines = []
        for _ in range(size):
            person, place = rng.choice(people), rng.choice(places)
            lines += [f"{person} B-PER", "lives O", "in O", f"{place} B-LOC", ". O", ""]
        (directory / f"{split}.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")


def test_a_flair_sequence_tagger_with_elmo_embeddings_trains_one_epoch_and_predicts(tmp_path):
    import flair
    from flair.data import Sentence
    from flair.datasets import ColumnCorpus
    from flair.embeddings import ELMoEmbeddings
    from flair.models import SequenceTagger
    from flair.trainers import ModelTrainer

    flair.set_seed(1)
    write_tiny_ner(tmp_path)
    corpus = ColumnCorpus(tmp_path, {0: "text", 1: "ner"}, train_file="train.txt",
                          dev_file="dev.txt", test_file="test.txt")
    tags = corpus.make_label_dictionary("ner", add_unk=False)
    embeddings = ELMoEmbeddings(
        options_file=str(FIXTURE_OPTIONS), weight_file=str(FIXTURE_WEIGHTS)
    )
    tagger = SequenceTagger(
        hidden_size=16, embeddings=embeddings, tag_dictionary=tags, tag_type="ner"
    )
    # flair 0.15 cannot save a model with ELMoEmbeddings (it has no to_params(): NotImplementedError
    # with any ELMo), so nothing is saved: the final model is evaluated.
    result = ModelTrainer(tagger, corpus).train(
        tmp_path / "run", max_epochs=1, mini_batch_size=8, learning_rate=0.1,
        save_final_model=False, use_final_model_for_eval=True,
    )
    assert result["test_score"] == 1.0  # the pattern is easy: one epoch learns it
    sentence = Sentence("Peter lives in Rome .")
    tagger.predict(sentence)
    spans = [(span.text, span.tag) for span in sentence.get_spans("ner")]
    assert spans == [("Peter", "PER"), ("Rome", "LOC")]
