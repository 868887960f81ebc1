"""
Tests of `ElmoEmbedder` and of the sentence-file reader it streams from.

References: the biLM run directly, the TensorFlow biLM's top layer for the golden fixture model
(elmo-facts §4), and hand-computed reductions of the layers.
"""
import json
import os
from typing import List

import h5py
import numpy as np
import pytest
import torch
from allennlp.common.checks import ConfigurationError

from elmo_plugin.data.sentence_file import check_sentence_file, read_sentences
from elmo_plugin.elmo_embedder import ElmoEmbedder
from elmo_plugin.model_files.bilm_tf.directory import write_bilm_tf_directory
from elmo_plugin.model_files.bilm_tf.options import BilmOptions
from elmo_plugin.modules.bilm import ElmoBiLm
from tests.helpers import FIXTURES, read_output, write_lines

OPTIONS_FILE = FIXTURES / "options.json"
WEIGHT_FILE = FIXTURES / "lm_weights.hdf5"

# Float noise of batching (different matmul shapes) is about 1e-6 on this model.
BATCH_TOLERANCE = 1e-5

# conftest.py: one intra-op thread for the tiny model (spinning OpenMP threads on a busy 2-core
# machine made these tests many times slower).
pytestmark = pytest.mark.usefixtures("single_thread")


def golden_sentences_and_top_layers():
    """
    The 30 fixture sentences in the order the TensorFlow biLM saw them (10 batches of 3, row k of
    batch i is sentence i of list k) and its top layer for each, forward and backward halves
    concatenated.
    """
    with open(FIXTURES / "sentences.json", encoding="utf-8") as handle:
        by_row = json.load(handle)
    sentences: List[List[str]] = []
    expected: List[np.ndarray] = []
    for batch_index in range(len(by_row[0])):
        for row in range(len(by_row)):
            sentences.append(by_row[row][batch_index].split())
            with h5py.File(FIXTURES / f"lm_embeddings_{row}.hdf5", "r") as handle:
                halves = handle[str(batch_index)][...]
            expected.append(np.concatenate([halves[0], halves[1]], axis=-1))
    return sentences, expected


SENTENCES = [
    ["The", "cat", "sat", "on", "the", "mat", "."],
    ["Hello", "!"],
    ["ELMo", "vectors", "depend", "on", "context", ",", "not", "only", "on", "the", "word", "."],
    ["밥", "을", "먹었다"],
    ["one"],
    ["Short", "again", "."],
    ["A", "much", "longer", "sentence", "that", "needs", "padding", "for", "all", "the", "others",
     "in", "its", "batch", "."],
]


@pytest.fixture(scope="module")
def embedder() -> ElmoEmbedder:
    return ElmoEmbedder(OPTIONS_FILE, WEIGHT_FILE)


@pytest.fixture(scope="module")
def direct_bilm() -> ElmoBiLm:
    return ElmoBiLm.from_files(OPTIONS_FILE, WEIGHT_FILE).eval()


def direct_layers(bilm: ElmoBiLm, tokens: List[str]) -> np.ndarray:
    """The biLM's layers for one sentence, boundaries cut off by hand: (layers, tokens, dim)."""
    with torch.no_grad():
        output = bilm(bilm.character_ids.batch_to_ids([tokens]))
    return np.stack([layer[0, 1 : len(tokens) + 1].numpy() for layer in output["activations"]])


# ----------------------------------------------------------------------------------------------
# The sentence file


def test_check_sentence_file_counts_lines_and_read_sentences_splits_on_whitespace(tmp_path):
    path = tmp_path / "in.txt"
    path.write_bytes("\ufeffa b\r\n  c\td  \n밥 을\n".encode("utf-8"))
    assert check_sentence_file(path) == 3
    # The byte order mark is not part of the first token, \r\n and tabs are whitespace.
    assert list(read_sentences(path)) == [(0, ["a", "b"]), (1, ["c", "d"]), (2, ["밥", "을"])]


def test_check_sentence_file_names_every_blank_line_but_caps_the_list(tmp_path):
    lines = ["a"] * 60
    blank_lines = [3, 5] + list(range(10, 40))  # 1-based
    for number in blank_lines:
        lines[number - 1] = "  \t" if number == 5 else ""
    path = write_lines(tmp_path / "in.txt", lines)
    with pytest.raises(ConfigurationError) as error:
        check_sentence_file(path, max_listed=20)
    message = str(error.value)
    assert str(path) in message
    assert "line(s) 3, 5, 10, 11," in message
    assert "27, ... (32 in all)" in message  # the 20th listed is line 27
    assert "28," not in message


def test_check_sentence_file_reports_invalid_utf8_with_line_and_byte_offset(tmp_path):
    path = tmp_path / "in.txt"
    # Line 1 is 6 bytes ("ab cd\n"), line 2 starts at byte 6, its bad byte is at 6 + 2 = 8.
    path.write_bytes(b"ab cd\nx \xff y\nmore\n")
    with pytest.raises(ConfigurationError) as error:
        check_sentence_file(path)
    message = str(error.value)
    assert f"{path}:2: not valid UTF-8" in message
    assert "byte offset 8" in message
    assert "ff" in message


def test_read_sentences_streams_lazily(tmp_path):
    path = tmp_path / "in.txt"
    path.write_bytes(b"first line\nsecond\n\xff broken\n")
    sentences = read_sentences(path)
    # The lines before the broken one come out before the generator reaches it: it does not
    # read (or decode) the whole file up front.
    assert next(sentences) == (0, ["first", "line"])
    assert next(sentences) == (1, ["second"])
    with pytest.raises(ConfigurationError, match=":3: not valid UTF-8"):
        next(sentences)


def test_read_sentences_can_skip_blank_lines_but_keeps_line_indices(tmp_path):
    path = write_lines(tmp_path / "in.txt", ["a", "", "b c", "   "])
    assert list(read_sentences(path)) == [(0, ["a"]), (1, []), (2, ["b", "c"]), (3, [])]
    assert list(read_sentences(path, skip_blank_lines=True)) == [(0, ["a"]), (2, ["b", "c"])]


def test_check_sentence_file_rejects_missing_and_empty_files(tmp_path):
    with pytest.raises(ConfigurationError, match="input file not found: .*nowhere.txt"):
        check_sentence_file(tmp_path / "nowhere.txt")
    with pytest.raises(ConfigurationError, match="input file not found"):
        read_sentences(tmp_path / "nowhere.txt")
    (tmp_path / "empty.txt").write_bytes(b"")
    with pytest.raises(ConfigurationError, match="empty.txt: the file is empty"):
        check_sentence_file(tmp_path / "empty.txt")


def test_check_sentence_file_rejects_duplicates_only_with_sentence_keys(tmp_path):
    # Line 4 repeats line 1 with different whitespace: the same tokens, the same key.
    path = write_lines(tmp_path / "in.txt", ["a b", "c", "d", "a  b", "c", "e"])
    assert check_sentence_file(path) == 6
    with pytest.raises(ConfigurationError) as error:
        check_sentence_file(path, use_sentence_keys=True)
    expected = "2 line(s) repeat an earlier sentence: line 4 repeats line 1, line 5 repeats line 2."
    assert expected in str(error.value)


# ----------------------------------------------------------------------------------------------
# Embedding in memory


def test_embed_sentence_equals_the_bilm_run_directly(embedder, direct_bilm):
    for tokens in SENTENCES:
        embedding = embedder.embed_sentence(tokens)
        assert isinstance(embedding, np.ndarray)
        assert embedding.dtype == np.float32
        assert embedding.shape == (3, len(tokens), 32)
        np.testing.assert_allclose(embedding, direct_layers(direct_bilm, tokens), rtol=0, atol=1e-7)


def test_embedder_follows_the_models_max_characters_per_token(tmp_path):
    # A Korean-style model: 30 characters per token (AllenNLP's core hard-codes 50).
    options = BilmOptions.from_dict(
        {
            "char_cnn": {
                "activation": "relu",
                "embedding": {"dim": 4},
                "filters": [[1, 4], [2, 8]],
                "max_characters_per_token": 30,
                "n_characters": 262,
                "n_highway": 1,
            },
            "lstm": {"dim": 16, "projection_dim": 6, "n_layers": 2, "cell_clip": 3,
                     "proj_clip": 3, "use_skip_connections": True},
        }
    )
    torch.manual_seed(0)
    bilm = ElmoBiLm(options)
    write_bilm_tf_directory(str(tmp_path / "ko"), options, bilm.state_dict())
    korean = ElmoEmbedder(model=str(tmp_path / "ko"))
    tokens = ["아버지", "가", "방", "에", "들어가신다", "."]
    embedding = korean.embed_sentence(tokens)
    assert embedding.shape == (3, 6, 12)
    np.testing.assert_allclose(embedding, direct_layers(bilm.eval(), tokens), rtol=0, atol=1e-6)


def test_stateful_embedder_reproduces_the_tensorflow_top_layer():
    sentences, expected = golden_sentences_and_top_layers()
    stateful = ElmoEmbedder(OPTIONS_FILE, WEIGHT_FILE, stateful=True)
    computed = list(stateful.embed_sentences(sentences, batch_size=3))
    assert len(computed) == 30
    for tokens, embedding, reference in zip(sentences, computed, expected):
        assert embedding.shape == (3, len(tokens), 32)
        np.testing.assert_allclose(embedding[2], reference, rtol=0, atol=2e-6)


def test_stateless_embedder_does_not_carry_state(embedder):
    sentences, expected = golden_sentences_and_top_layers()
    # The first batch starts from zero in both modes, so it matches TensorFlow ...
    first_batch = embedder.embed_batch(sentences[:3])
    for embedding, reference in zip(first_batch, expected[:3]):
        np.testing.assert_allclose(embedding[2], reference, rtol=0, atol=2e-6)
    # ... but later ones do not (TensorFlow carried the state), which shows that the golden test
    # above really depends on the carried state.
    later = embedder.embed_batch(sentences[3:6])
    assert max(np.abs(e[2] - r).max() for e, r in zip(later, expected[3:6])) > 1e-3


def test_stateless_gives_a_sentence_the_same_vectors_alone_and_in_any_batch(embedder):
    target = SENTENCES[0]
    alone = embedder.embed_sentence(target)
    for neighbours in ([SENTENCES[6], SENTENCES[1]], [SENTENCES[4]], [[], SENTENCES[2]]):
        in_batch = embedder.embed_batch(neighbours + [target])[-1]
        np.testing.assert_allclose(in_batch, alone, rtol=0, atol=BATCH_TOLERANCE)
    # And again after other batches: nothing is carried over.
    np.testing.assert_array_equal(embedder.embed_sentence(target), alone)


def test_stateful_embedder_carries_state_until_reset():
    stateful = ElmoEmbedder(OPTIONS_FILE, WEIGHT_FILE, stateful=True)
    assert stateful.stateful
    first = stateful.embed_sentence(SENTENCES[0])
    second = stateful.embed_sentence(SENTENCES[0])
    # Layer 0 (the character CNN) has no state; the LSTM layers do.
    np.testing.assert_array_equal(first[0], second[0])
    assert np.abs(first[1:] - second[1:]).max() > 1e-4
    stateful.reset_states()
    np.testing.assert_array_equal(stateful.embed_sentence(SENTENCES[0]), first)


def test_empty_sentences(embedder):
    assert embedder.embed_sentence([]).shape == (3, 0, 32)
    assert embedder.embed_batch([]) == []
    only_empty = embedder.embed_batch([[], []])
    assert [e.shape for e in only_empty] == [(3, 0, 32), (3, 0, 32)]
    mixed = embedder.embed_batch([[], SENTENCES[1], []])
    assert [e.shape for e in mixed] == [(3, 0, 32), (3, 2, 32), (3, 0, 32)]
    np.testing.assert_allclose(
        mixed[1], embedder.embed_sentence(SENTENCES[1]), rtol=0, atol=BATCH_TOLERANCE
    )


def test_batch_to_embeddings_removes_boundaries_and_masks_padding(embedder, direct_bilm):
    batch = [SENTENCES[1], SENTENCES[0], []]
    activations, mask = embedder.batch_to_embeddings(batch)
    assert activations.shape == (3, 3, 7, 32)
    assert mask.tolist() == [[True] * 2 + [False] * 5, [True] * 7, [False] * 7]
    # Beyond each sentence (where </S> and padding were) everything is zero.
    assert activations[0, :, 2:].abs().max() == 0
    assert activations[2].abs().max() == 0
    expected = direct_layers(direct_bilm, SENTENCES[0])
    np.testing.assert_allclose(activations[1].numpy(), expected, rtol=0, atol=BATCH_TOLERANCE)


def test_embed_sentences_is_lazy_and_keeps_input_order(embedder):
    consumed = []

    def stream():
        for tokens in SENTENCES:
            consumed.append(tokens)
            yield tokens

    embeddings = embedder.embed_sentences(stream(), batch_size=3)
    first = next(embeddings)
    assert len(consumed) == 3  # one batch read ahead, not the whole stream
    rest = list(embeddings)
    assert len(consumed) == len(SENTENCES)
    for tokens, embedding in zip(SENTENCES, [first] + rest):
        np.testing.assert_allclose(
            embedding, embedder.embed_sentence(tokens), rtol=0, atol=BATCH_TOLERANCE
        )


def test_embed_sentences_rejects_a_bad_batch_size_at_the_call(embedder):
    with pytest.raises(ConfigurationError, match="batch_size must be a positive integer"):
        embedder.embed_sentences(SENTENCES, batch_size=0)


def test_a_string_is_not_taken_for_a_list_of_tokens(embedder):
    with pytest.raises(ConfigurationError, match="lists of tokens, got a string"):
        embedder.embed_sentence("The cat sat .")


@pytest.mark.parametrize(
    "batch, error, message",
    [
        ([["a"], None], TypeError, "sentence 1: a sentence must be a list of string tokens, got "
         "NoneType None"),
        ([["a", "b"], 5], TypeError, "sentence 1: a sentence must be a list of string tokens, got "
         "int 5"),
        ([["a"], b"a b"], TypeError, "sentence 1: a sentence must be a list of string tokens, got "
         "bytes b'a b'"),
        ([["a", None]], TypeError, "sentence 0, token 1: tokens must be strings, got NoneType "
         "None"),
        ([["a"], ["b", 3]], TypeError, "sentence 1, token 1: tokens must be strings, got int 3"),
        ([["a", b"cat"]], TypeError, "sentence 0, token 1: tokens must be strings, got bytes "
         "b'cat' (decode it first, e.g. token.decode('utf-8'))"),
        ([["a", ""]], ValueError, "sentence 0, token 1: '' is an empty or whitespace-only token"),
        ([[" ", "a"]], ValueError, "sentence 0, token 0: ' ' is an empty or whitespace-only "
         "token"),
    ],
)
def test_bad_sentences_and_tokens_name_their_position(embedder, batch, error, message):
    # These used to fail deep in the character ids with an AttributeError naming nothing.
    with pytest.raises(error) as raised:
        embedder.embed_batch(batch)
    assert str(raised.value).startswith(message)
    with pytest.raises(error):
        embedder.batch_to_embeddings(batch)


def test_embed_sentences_names_the_position_in_the_whole_stream(embedder):
    sentences = [["a", "b"]] * 5 + [["c", None]]
    with pytest.raises(TypeError, match=r"^sentence 5, token 1: tokens must be strings"):
        list(embedder.embed_sentences(iter(sentences), batch_size=2))


def test_a_token_with_inner_whitespace_is_one_token_with_a_space_character(embedder):
    # Documented (check_sentences): accepted and embedded as one token, spaces included; tuples
    # are sentences too.
    one = embedder.embed_sentence(("New York", "is", "big"))
    assert one.shape == (embedder.num_layers, 3, embedder.get_output_dim())
    assert not np.allclose(one[0, 0], embedder.embed_sentence(["New", "York"])[0, 0])


def test_unavailable_cuda_device_is_a_configuration_error():
    # One past the last visible GPU: unavailable with or without CUDA.
    device = torch.cuda.device_count()
    with pytest.raises(ConfigurationError, match=f"cuda_device={device} was requested, but"):
        ElmoEmbedder(OPTIONS_FILE, WEIGHT_FILE, cuda_device=device)


# ----------------------------------------------------------------------------------------------
# embed_file


@pytest.mark.parametrize("output_format", ["all", "top", "average"])
def test_embed_file_formats_match_embed_sentence(embedder, tmp_path, output_format):
    input_file = write_lines(tmp_path / "in.txt", [" ".join(tokens) for tokens in SENTENCES])
    output_file = tmp_path / "out.hdf5"
    embedder.embed_file(input_file, output_file, output_format, batch_size=3, progress=False)
    datasets, mapping = read_output(output_file)
    assert sorted(datasets) == sorted(str(i) for i in range(len(SENTENCES)))
    for index, tokens in enumerate(SENTENCES):
        layers = embedder.embed_sentence(tokens)
        expected = {
            "all": layers,
            "top": layers[2],
            "average": (layers[0] + layers[1] + layers[2]) / 3,
        }[output_format]
        assert datasets[str(index)].dtype == np.float32
        assert datasets[str(index)].shape == expected.shape
        np.testing.assert_allclose(datasets[str(index)], expected, rtol=0, atol=BATCH_TOLERANCE)
    assert mapping == {" ".join(tokens): str(index) for index, tokens in enumerate(SENTENCES)}
    assert sorted(os.listdir(tmp_path)) == ["in.txt", "out.hdf5"]  # no temporary file left


def test_embed_file_sorting_chunks_by_length_changes_nothing(embedder, tmp_path):
    rng = np.random.RandomState(3)
    vocabulary = ["w%d" % i for i in range(50)] + ["밥", "Zürich", ","]
    lines = [" ".join(rng.choice(vocabulary, size=rng.randint(1, 25))) for _ in range(37)]
    lines[20] = lines[5]  # a duplicate: sentence_to_index must still map it to its last line
    input_file = write_lines(tmp_path / "in.txt", lines)
    # batch_size 4 and chunks of 2 batches: several chunks, each reordered.
    embedder.embed_file(input_file, tmp_path / "sorted.hdf5", "all", batch_size=4,
                        progress=False, sort_chunk_batches=2)
    embedder.embed_file(input_file, tmp_path / "in_order.hdf5", "all", batch_size=4,
                        progress=False, sort_chunk_batches=1)
    sorted_datasets, sorted_mapping = read_output(tmp_path / "sorted.hdf5")
    ordered_datasets, ordered_mapping = read_output(tmp_path / "in_order.hdf5")
    assert sorted(sorted_datasets) == sorted(ordered_datasets) == sorted(map(str, range(37)))
    for key, value in ordered_datasets.items():
        assert sorted_datasets[key].shape == value.shape
        np.testing.assert_allclose(sorted_datasets[key], value, rtol=0, atol=BATCH_TOLERANCE)
    assert sorted_mapping[lines[5]] == "20"
    # The same JSON text, not only the same mapping.
    with h5py.File(tmp_path / "sorted.hdf5", "r") as sorted_file:
        with h5py.File(tmp_path / "in_order.hdf5", "r") as ordered_file:
            assert sorted_file["sentence_to_index"][0] == ordered_file["sentence_to_index"][0]


def test_stateful_embed_file_follows_file_order(tmp_path):
    sentences, expected = golden_sentences_and_top_layers()
    input_file = write_lines(tmp_path / "in.txt", [" ".join(tokens) for tokens in sentences])
    stateful = ElmoEmbedder(OPTIONS_FILE, WEIGHT_FILE, stateful=True)
    stateful.embed_file(input_file, tmp_path / "out.hdf5", "top", batch_size=3, progress=False)
    datasets, _ = read_output(tmp_path / "out.hdf5")
    for index, reference in enumerate(expected):
        np.testing.assert_allclose(datasets[str(index)], reference, rtol=0, atol=2e-6)


def test_embed_file_with_sentence_keys(embedder, tmp_path):
    input_file = write_lines(tmp_path / "in.txt", ["a b", "밥 을", "c"])
    embedder.embed_file(input_file, tmp_path / "out.hdf5", "top", use_sentence_keys=True,
                        progress=False)
    datasets, mapping = read_output(tmp_path / "out.hdf5")
    assert mapping is None
    assert sorted(datasets) == sorted(["a b", "밥 을", "c"])
    expected = embedder.embed_sentence(["밥", "을"])[2]
    np.testing.assert_allclose(datasets["밥 을"], expected, rtol=0, atol=BATCH_TOLERANCE)


def test_embed_file_rejects_slashes_in_sentence_keys(embedder, tmp_path):
    input_file = write_lines(tmp_path / "in.txt", ["a", "1 / 2", "b", "and/or"])
    with pytest.raises(ConfigurationError, match=r"contain '/'.*line\(s\) 2, 4"):
        embedder.embed_file(input_file, tmp_path / "out.hdf5", use_sentence_keys=True,
                            progress=False)
    assert os.listdir(tmp_path) == ["in.txt"]


def test_failed_embed_file_leaves_no_output_and_no_temporary_file(embedder, tmp_path, monkeypatch):
    input_file = write_lines(tmp_path / "in.txt", [" ".join(t) for t in SENTENCES])
    old_output = tmp_path / "old.hdf5"
    old_output.write_bytes(b"an earlier result")
    calls = []
    original_forward = ElmoBiLm.forward

    def forward_that_breaks(self, character_ids):
        calls.append(1)
        if len(calls) == 3:
            raise KeyboardInterrupt
        return original_forward(self, character_ids)

    monkeypatch.setattr(ElmoBiLm, "forward", forward_that_breaks)
    with pytest.raises(KeyboardInterrupt):
        embedder.embed_file(input_file, tmp_path / "new.hdf5", batch_size=2, progress=False)
    assert len(calls) == 3
    calls.clear()
    with pytest.raises(KeyboardInterrupt):
        embedder.embed_file(input_file, old_output, batch_size=2, progress=False)
    # No new file, no temporary file, and the earlier output is untouched.
    assert sorted(os.listdir(tmp_path)) == ["in.txt", "old.hdf5"]
    assert old_output.read_bytes() == b"an earlier result"


def test_embed_file_checks_its_arguments_before_any_work(embedder, tmp_path):
    input_file = write_lines(tmp_path / "in.txt", ["a"])
    with pytest.raises(ConfigurationError, match="output_format must be one of"):
        embedder.embed_file(input_file, tmp_path / "out.hdf5", "middle")
    with pytest.raises(ConfigurationError, match="output directory does not exist"):
        embedder.embed_file(input_file, tmp_path / "no" / "out.hdf5")
    with pytest.raises(ConfigurationError, match="would replace the input"):
        embedder.embed_file(input_file, input_file)
    assert os.listdir(tmp_path) == ["in.txt"]


def test_embed_file_refuses_another_name_of_the_input(embedder, tmp_path):
    input_file = write_lines(tmp_path / "in.txt", ["a"])
    (tmp_path / "link.hdf5").symlink_to(input_file)
    os.link(input_file, tmp_path / "hard.hdf5")
    for name in ("link.hdf5", "hard.hdf5"):
        with pytest.raises(ConfigurationError, match="would replace the input"):
            embedder.embed_file(input_file, tmp_path / name)
    assert input_file.read_text() == "a\n"
