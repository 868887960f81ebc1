"""
``--sentence-vectors``: each line's mean over its tokens, checked against the token vectors
of the same command without it (to 1e-5) in both layouts and every output format, read back
with plain h5py and with `EmbeddingsFile`; the same from Python (`ElmoEmbedder`); a sharded
run (one rank in-process here, two processes under torchrun, slow) equal to one process to the
bit.
"""
from pathlib import Path

import h5py
import numpy as np
import pytest

from elmo_plugin import ElmoEmbedder, EmbeddingsFile
from elmo_plugin.embedding_output.layout import SENTENCE_VECTORS_ATTRIBUTE
from elmo_plugin.embedding_output.sentence_vectors import token_mean
from tests.embedding_output.sharding_helpers import assert_same_output, corpus, free_port, torchrun
from tests.helpers import FIXTURE_OPTIONS, FIXTURE_WEIGHTS, run_elmo, write_lines

pytestmark = pytest.mark.usefixtures("single_thread")

FORMATS = {"all": "--all", "top": "--top", "average": "--average"}


def embed(tmp_path: Path, name: str, input_file: Path, *args) -> Path:
    output = tmp_path / name
    assert run_elmo(input_file, output, "--batch-size", "3", *args) == 0
    return output


@pytest.mark.parametrize("layout", ["per-sentence", "flat"])
@pytest.mark.parametrize("output_format", sorted(FORMATS))
def test_sentence_vectors_are_the_token_mean(tmp_path, layout, output_format):
    lines = corpus(40, seed=3)
    input_file = write_lines(tmp_path / "in.txt", lines)
    args = [FORMATS[output_format], "--layout", layout]
    tokens = embed(tmp_path, "tokens.hdf5", input_file, *args)
    vectors = embed(tmp_path, "vectors.hdf5", input_file, *args, "--sentence-vectors")
    with EmbeddingsFile(tokens) as by_token, EmbeddingsFile(vectors) as by_sentence:
        assert not by_token.sentence_vectors and by_sentence.sentence_vectors
        assert len(by_sentence) == len(lines)
        for index, line in enumerate(lines):
            token_vectors = by_token[index].astype(np.float64)
            assert token_vectors.shape[-2] == len(line.split())
            expected = token_vectors.sum(axis=-2) / token_vectors.shape[-2]  # by hand
            got = by_sentence[index]
            assert got.dtype == np.float32 and got.shape == expected.shape
            np.testing.assert_allclose(got, expected, rtol=0, atol=1e-5)
        if layout == "flat":
            assert by_sentence.sentences() == lines
    with h5py.File(vectors, "r") as file:  # as plain h5py sees it
        assert file.attrs[SENTENCE_VECTORS_ATTRIBUTE] == 1
        if layout == "per-sentence":
            dims = (3, 32) if output_format == "all" else (32,)
            assert file["0"].shape == dims
            assert "sentence_to_index" in file
        else:
            np.testing.assert_array_equal(file["offsets"][()], np.arange(len(lines) + 1))
    with h5py.File(tokens, "r") as file:  # token outputs do not get the attribute
        assert SENTENCE_VECTORS_ATTRIBUTE not in file.attrs


def test_float16_sentence_vectors(tmp_path):
    input_file = write_lines(tmp_path / "in.txt", corpus(10, seed=5))
    args = ["--top", "--layout", "flat", "--sentence-vectors"]
    full = embed(tmp_path, "full.hdf5", input_file, *args)
    half = embed(tmp_path, "half.hdf5", input_file, *args, "--float16")
    with EmbeddingsFile(full) as left, EmbeddingsFile(half) as right:
        for index in range(len(left)):
            assert right[index].dtype == np.float16
            np.testing.assert_array_equal(right[index], left[index].astype(np.float16))


def test_python_api_equals_the_command(tmp_path):
    lines = corpus(12, seed=6)
    input_file = write_lines(tmp_path / "in.txt", lines)
    command = embed(tmp_path, "command.hdf5", input_file, "--all", "--sentence-vectors")
    embedder = ElmoEmbedder(str(FIXTURE_OPTIONS), str(FIXTURE_WEIGHTS))
    output = tmp_path / "python.hdf5"
    embedder.embed_file(
        input_file, output, "all", batch_size=3, sentence_vectors=True, progress=False
    )
    assert_same_output(command, output)
    batch = [line.split() for line in lines[:4]] + [[]]
    vectors = embedder.embed_sentence_vectors(batch)  # the mean of all layers by default
    for sentence, vector in zip(batch[:4], vectors):
        layers = embedder.embed_sentence(sentence)
        np.testing.assert_allclose(vector, layers.mean(axis=0).mean(axis=0), atol=1e-5)
    np.testing.assert_array_equal(vectors[4], np.zeros(32, dtype=np.float32))
    tops = embedder.embed_sentence_vectors(batch[:2], "top")
    np.testing.assert_allclose(tops[0], embedder.embed_sentence(batch[0])[-1].mean(0), atol=1e-5)
    with pytest.raises(Exception, match="output_format must be one of"):
        embedder.embed_sentence_vectors(batch, "first")


def test_token_mean_of_nothing_is_zeros():
    assert token_mean(np.ones((3, 0, 4), dtype=np.float32)).tolist() == [[0.0] * 4] * 3
    np.testing.assert_array_equal(
        token_mean(np.array([[1, 2], [3, 5]], dtype=np.float32)), [2.0, 3.5]
    )


@pytest.fixture
def one_rank(monkeypatch):
    monkeypatch.setenv("WORLD_SIZE", "1")
    monkeypatch.setenv("RANK", "0")
    monkeypatch.setenv("LOCAL_RANK", "0")
    monkeypatch.setenv("MASTER_ADDR", "127.0.0.1")
    monkeypatch.setenv("MASTER_PORT", str(free_port()))


@pytest.mark.parametrize("layout", ["per-sentence", "flat"])
def test_one_rank_sharded_equals_one_process(tmp_path, one_rank, capsys, layout):
    input_file = write_lines(tmp_path / "in.txt", corpus(200, repeat_every=17))
    args = ["--all", "--layout", layout, "--sentence-vectors", "--shard-tokens", "200"]
    with pytest.MonkeyPatch.context() as patch:
        patch.delenv("WORLD_SIZE", raising=False)
        expected = embed(tmp_path, "plain.hdf5", input_file, *args)
    output = embed(tmp_path, "sharded.hdf5", input_file, *args)
    assert len(list(Path(f"{output}.shards").glob("lines-*.hdf5"))) > 1
    assert_same_output(expected, output)
    with EmbeddingsFile(expected) as left, EmbeddingsFile(output) as right:
        assert right.sentence_vectors
        for index in range(len(left)):
            np.testing.assert_array_equal(left[index], right[index])
    # Reused as they are by the same command again.
    capsys.readouterr()
    embed(tmp_path, "sharded.hdf5", input_file, *args, "--overwrite")
    assert "200 of them reused" in capsys.readouterr().out
    assert_same_output(expected, output)


@pytest.mark.slow
@pytest.mark.parametrize("layout", ["per-sentence", "flat"])
def test_two_processes_equal_one(tmp_path, layout):
    input_file = write_lines(tmp_path / "in.txt", corpus(300, repeat_every=23))
    args = ["--top", "--batch-size", "2", "--layout", layout, "--shard-tokens", "300"]
    args += ["--sentence-vectors"]
    expected = tmp_path / "plain.hdf5"
    assert run_elmo(input_file, expected, *args) == 0
    output = tmp_path / "out.hdf5"
    result = torchrun([input_file, output, *args])
    assert result.returncode == 0, result.stderr[-3000:]
    assert "300 sentences by 2 processes" in result.stdout
    assert_same_output(expected, output)
