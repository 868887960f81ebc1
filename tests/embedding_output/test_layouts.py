"""
The flat layout and float16 storage of ``allennlp elmo`` (one process), and `EmbeddingsFile`
reading both layouts: values against the per-sentence layout and `ElmoEmbedder.embed_sentence`.
"""
import random

import h5py
import numpy as np
import pytest

from elmo_plugin import EmbeddingsFile, read_embeddings
from elmo_plugin.elmo_embedder import ElmoEmbedder
from elmo_plugin.embedding_output.flat_writer import FlatWriter
from tests.helpers import FIXTURE_OPTIONS, FIXTURE_WEIGHTS, run_elmo, write_lines

pytestmark = pytest.mark.usefixtures("single_thread")

WORDS = "the cat sat on mat dog ran far away 밥 을 hello world ELMo vectors , . !".split()


def corpus(count: int, seed: int = 0):
    generator = random.Random(seed)
    # A numbered last token keeps the sentences unique (sentence_to_index keeps only the last
    # line of a repeated sentence).
    return [
        " ".join([generator.choice(WORDS) for _ in range(generator.randint(0, 11))] + [f"w{index}"])
        for index in range(count)
    ]


@pytest.fixture(scope="module")
def embedder() -> ElmoEmbedder:
    return ElmoEmbedder(FIXTURE_OPTIONS, FIXTURE_WEIGHTS)


@pytest.mark.parametrize("mode", ["--all", "--top", "--average"])
def test_flat_layout_reads_as_per_sentence(tmp_path, mode):
    lines = corpus(150)
    input_file = write_lines(tmp_path / "in.txt", lines)
    assert run_elmo(input_file, tmp_path / "ps.hdf5", mode, "--batch-size", "3") == 0
    flat_args = [mode, "--batch-size", "3", "--layout", "flat"]
    assert run_elmo(input_file, tmp_path / "flat.hdf5", *flat_args) == 0
    with EmbeddingsFile(tmp_path / "ps.hdf5") as per_sentence, EmbeddingsFile(
        tmp_path / "flat.hdf5"
    ) as flat:
        assert (per_sentence.layout, flat.layout) == ("per-sentence", "flat")
        assert len(per_sentence) == len(flat) == len(lines)
        for index in range(len(lines)):
            # The same batches in both layouts: bitwise equal.
            np.testing.assert_array_equal(flat[index], per_sentence[index])
            assert flat[index].dtype == np.float32
        assert flat.sentences() == lines
        assert per_sentence.sentences() == lines
        np.testing.assert_array_equal(
            flat.by_sentence(lines[7]), per_sentence.by_sentence(lines[7])
        )
        for output in (per_sentence, flat):
            # Negative indices count from the end; anything else names the file.
            np.testing.assert_array_equal(output[-1], output[len(lines) - 1])
            with pytest.raises(IndexError, match=f"has {len(lines)} sentences; no index {len(lines)}"):
                output[len(lines)]
            with pytest.raises(TypeError, match="indexed by line number"):
                output["0"]
    with h5py.File(tmp_path / "flat.hdf5", "r") as handle:
        names = {
            "--all": ["layer_0", "layer_1", "layer_2"], "--top": ["top"], "--average": ["average"]
        }[mode]
        assert sorted(handle) == sorted(names + ["offsets", "sentences"])
        total = sum(len(line.split()) for line in lines)
        assert handle[names[0]].shape == (total, 32)
        offsets = handle["offsets"][()]
        assert offsets[0] == 0 and offsets[-1] == total
        assert list(np.diff(offsets)) == [len(line.split()) for line in lines]
    last = read_embeddings(tmp_path / "flat.hdf5", -1)
    np.testing.assert_array_equal(last, per_sentence_last(tmp_path))


def per_sentence_last(tmp_path):
    with h5py.File(tmp_path / "ps.hdf5", "r") as handle:
        return handle["149"][()]


def test_flat_values_are_the_embedders(tmp_path, embedder):
    lines = corpus(20, seed=1)
    input_file = write_lines(tmp_path / "in.txt", lines)
    assert run_elmo(input_file, tmp_path / "flat.hdf5", "--all", "--layout", "flat") == 0
    with EmbeddingsFile(tmp_path / "flat.hdf5") as flat:
        for index, line in enumerate(lines):
            expected = embedder.embed_sentence(line.split())
            np.testing.assert_allclose(flat[index], expected, atol=1e-5, rtol=0)


@pytest.mark.parametrize("layout", ["per-sentence", "flat"])
def test_float16_storage_is_float32_rounded(tmp_path, layout):
    lines = corpus(40, seed=2)
    input_file = write_lines(tmp_path / "in.txt", lines)
    common = ["--top", "--batch-size", "4", "--layout", layout]
    assert run_elmo(input_file, tmp_path / "32.hdf5", *common) == 0
    assert run_elmo(input_file, tmp_path / "16.hdf5", *common, "--float16") == 0
    with EmbeddingsFile(tmp_path / "32.hdf5") as full, EmbeddingsFile(tmp_path / "16.hdf5") as half:
        for index in range(len(lines)):
            assert half[index].dtype == np.float16
            np.testing.assert_array_equal(half[index], full[index].astype(np.float16))


def test_flat_refuses_sentence_keys(tmp_path, capsys):
    input_file = write_lines(tmp_path / "in.txt", ["a b", "c"])
    args = ["--top", "--layout", "flat", "--use-sentence-keys"]
    assert run_elmo(input_file, tmp_path / "o.hdf5", *args) == 1
    assert "flat layout" in capsys.readouterr().err
    assert not (tmp_path / "o.hdf5").exists()


def test_flat_writer_orders_lines_and_appends_in_blocks(tmp_path):
    # Lines added out of order (as a stateless run embeds them, sorted by length), flushed
    # every 5 rows: the rows end up in line order, offsets and sentences with them.
    arrays = {line: np.full((line % 3 + 1, 4), line, dtype=np.float32) for line in range(10)}
    with h5py.File(tmp_path / "f.hdf5", "w") as handle:
        writer = FlatWriter(handle, ["top"], 4, np.dtype(np.float32), flush_rows=5)
        for line in [2, 0, 1, 5, 4, 3, 9, 8, 7, 6]:
            writer.add(line, f"s{line}", arrays[line])
        writer.finish()
        top, offsets = handle["top"][()], handle["offsets"][()]
        sentences = [value.decode() for value in handle["sentences"][()]]
    np.testing.assert_array_equal(top, np.concatenate([arrays[line] for line in range(10)]))
    assert list(np.diff(offsets)) == [line % 3 + 1 for line in range(10)]
    assert sentences == [f"s{line}" for line in range(10)]
