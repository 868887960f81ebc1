"""
Korean end to end, the road docs/korean.md walks, on a dozen reviews: raw text ->
``elmo-tokenize`` (Mecab morphemes) -> ``elmo-vocab`` -> ``allennlp train
training_configs/bilm_ko.jsonnet`` (the course's architecture, 30 bytes per token; a few
batches, with small stream windows so that it fits a CPU test) -> ``elmo-export`` -> the
embedder and ``allennlp elmo`` on Korean text.
"""
import json
from pathlib import Path

import h5py
import numpy as np
import pytest
import torch
from allennlp.commands.train import train_model_from_file
from allennlp.models.archival import load_archive

from elmo_plugin.data.character_ids import ElmoCharacterIds
from elmo_plugin.data.vocabulary import build_lm_vocabulary
from elmo_plugin.elmo_embedder import ElmoEmbedder
from elmo_plugin.export.archive_to_bilm_tf import export_to_bilm_tf
from elmo_plugin.korean.corpus_tokenization import tokenize_corpus
from elmo_plugin.korean.tokenizers import MecabKoTokenizer
from tests.helpers import REPO_ROOT, run_elmo

pytest.importorskip("mecab_ko")
pytestmark = pytest.mark.usefixtures("single_thread")

REVIEWS = [
    "아버지가방에들어가신다.",
    "이 영화 정말 재미있어요 ㅋㅋ",
    "배우들의 연기가 훌륭했고 음악도 좋았다",
    "스토리가 너무 지루하고 뻔했다.",
    "두 번 보세요, 두 번!",
    "감독의 전작보다 훨씬 나아진 느낌입니다",
    "시간 가는 줄 모르고 봤네요",
    "돈이 아깝다... 최악의 영화",
    "",
    "OST가 계속 생각나는 영화",
    "기대를 많이 했는데 실망했어요",
    "가족과 함께 보기 좋은 따뜻한 영화",
    "연기는 좋았지만 결말이 아쉽다",
]
HELDOUT = ["이 영화는 연기가 좋았다", "다시 보고 싶은 영화입니다"]
NUM_BATCHES = 4


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """Tokenizes, builds the vocabulary, trains bilm_ko for a few batches and exports it."""
    root = tmp_path_factory.mktemp("korean")
    (root / "raw").mkdir()
    (root / "raw" / "reviews.txt").write_text("\n".join(REVIEWS) + "\n", encoding="utf-8")
    (root / "raw" / "heldout.txt").write_text("\n".join(HELDOUT) + "\n", encoding="utf-8")
    summary = tokenize_corpus(str(root / "raw" / "reviews.txt"), str(root / "tokens"), progress=False)
    tokenize_corpus(str(root / "raw" / "heldout.txt"), str(root / "heldout"), progress=False)
    build_lm_vocabulary(str(root / "tokens" / "*.txt"), root / "vocabulary.txt", progress=False)

    # bilm_ko's model and recipe as they are, pointed at this corpus with -o overrides, as the
    # docs/korean.md's walkthrough does; only the stream windows shrink (2 rows x 5 steps instead
    # of 128 x 20) so that the small corpus makes several batches.
    overrides = {
        "train_data_path": str(root / "tokens" / "*.txt"),
        "validation_data_path": str(root / "heldout" / "heldout.txt"),
        "vocabulary.vocabulary_file": str(root / "vocabulary.txt"),
        "dataset_reader.batch_size": 2,
        "dataset_reader.unroll_steps": 5,
        "data_loader.batch_size": 2,
        "trainer.num_epochs": 1,
    }
    torch.manual_seed(0)
    train_model_from_file(
        str(REPO_ROOT / "training_configs" / "bilm_ko.jsonnet"),
        str(root / "run"),
        overrides=json.dumps(overrides),
        include_package=["elmo_plugin"],
    )
    model = load_archive(str(root / "run" / "model.tar.gz")).model
    files = export_to_bilm_tf(root / "run", str(root / "bilm"))
    return {"root": root, "summary": summary, "model": model, "files": files}


def test_the_corpus_is_tokenized_into_morphemes(trained):
    lines = (trained["root"] / "tokens" / "reviews.txt").read_text(encoding="utf-8").splitlines()
    # The blank review is skipped and counted; every other review is one line of morphemes.
    assert len(lines) == len(REVIEWS) - 1
    assert lines[0].split() == [token.text for token in MecabKoTokenizer().tokenize(REVIEWS[0])]
    assert "아버지" in lines[0].split() and "가방" not in lines[0].split()


def test_bilm_ko_trains_with_30_byte_tokens(trained):
    metrics = json.loads((trained["root"] / "run" / "metrics.json").read_text())
    assert np.isfinite(metrics["training_loss"]) and np.isfinite(metrics["validation_ppl"])
    # The corpus is big enough for several windows of 2 rows x 5 steps (every morpheme plus
    # </S>). AllenNLP's metrics do not count batches, so this checks the data, not the trainer.
    num_targets = sum(
        len(line.split()) + 1
        for line in (trained["root"] / "tokens" / "reviews.txt").read_text("utf-8").splitlines()
    )
    assert num_targets // (2 * 5) >= NUM_BATCHES
    options = json.loads(Path(trained["files"]["options"]).read_text())
    assert options["char_cnn"]["max_characters_per_token"] == 30
    assert options["lstm"]["dim"] == 1024 and options["lstm"]["projection_dim"] == 128
    assert len(options["char_cnn"]["filters"]) == 7


def test_exported_korean_biLM_embeds_like_the_trained_model(trained, tmp_path):
    files = trained["files"]
    embedder = ElmoEmbedder(files["options"], files["weights"])
    sentence = [token.text for token in MecabKoTokenizer().tokenize(HELDOUT[0])]
    vectors = embedder.embed_sentence(sentence)
    assert vectors.shape == (3, len(sentence), 256)

    # The same sentence through the trained model's own biLM (eval mode: no dropout).
    bilm = trained["model"].bilm.eval()
    ids = ElmoCharacterIds(30).batch_to_ids([sentence])
    with torch.no_grad():
        layers = bilm(ids)["activations"]
    expected = np.stack([layer[0, 1:-1].numpy() for layer in layers])
    np.testing.assert_allclose(vectors, expected, atol=1e-5)

    # `allennlp elmo` writes the same vectors for the same line.
    input_file = tmp_path / "sentences.txt"
    input_file.write_text(" ".join(sentence) + "\n", encoding="utf-8")
    output_file = tmp_path / "out.hdf5"
    status = run_elmo(
        input_file, output_file, "--all", "--options-file", files["options"],
        "--weight-file", files["weights"], model_files=False,
    )
    assert status == 0
    with h5py.File(output_file, "r") as handle:
        np.testing.assert_allclose(handle["0"][...], vectors, atol=1e-5)


def test_tokens_cut_mid_character_at_30_bytes_embed(trained):
    """
    An unsegmented 11-syllable token is 33 bytes; 28 fit between the word markers, so the cut
    falls inside the 10th syllable. Two tokens that agree on those 28 bytes are the same token.
    """
    files = trained["files"]
    embedder = ElmoEmbedder(files["options"], files["weights"])
    token = "아버지가방에들어가신다"
    assert len(token.encode("utf-8")) == 33
    ids = ElmoCharacterIds(30).batch_to_ids([[token]])[0, 0]
    assert ids.tolist() == [259] + [b + 1 for b in token.encode("utf-8")[:28]] + [260]
    same_prefix = token[:9] + "신" + "나요"  # shares the 10th syllable's first byte
    assert same_prefix.encode("utf-8")[:28] == token.encode("utf-8")[:28]
    first = embedder.embed_sentence([token])
    second = embedder.embed_sentence([same_prefix])
    assert np.isfinite(first).all()
    np.testing.assert_array_equal(first[0], second[0])
