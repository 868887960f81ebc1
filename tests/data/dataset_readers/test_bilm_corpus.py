"""
The ``bilm_corpus`` dataset reader: sentences mode, bilm-tf stream packing, shuffling, sharding
over loader workers and (faked) distributed ranks, and its errors.
"""
import copy
import logging
from collections import Counter
from pathlib import Path
from typing import Dict, List

import pytest
from allennlp.common import Params
from allennlp.common.checks import ConfigurationError
from allennlp.data import Batch, DatasetReader
from allennlp.data.data_loaders import MultiProcessDataLoader
from allennlp.data.dataset_readers.dataset_reader import DistributedInfo, WorkerInfo

import elmo_plugin.data.dataset_readers.sharded_reader as sharded_reader
from elmo_plugin.data.dataset_readers.bilm_corpus import BilmCorpusReader, pack_windows
from elmo_plugin.data.vocabulary import BilmTfVocabulary, build_lm_vocabulary


def _write(path: Path, lines: List[str]) -> None:
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")


def _make_corpus(directory: Path, num_files: int, sentences_per_file: int) -> List[List[str]]:
    """Files f00.txt, ... with distinct sentences (some blank lines in between)."""
    directory.mkdir(parents=True, exist_ok=True)
    sentences = []
    for f in range(num_files):
        lines = []
        for s in range(sentences_per_file):
            tokens = [f"w{f}_{s}_{k}" for k in range(1 + (f + s) % 5)] + ["common"]
            sentences.append(tokens)
            lines.append(" ".join(tokens))
            if s % 4 == 3:
                lines.append("")
        _write(directory / f"f{f:02d}.txt", lines)
    return sentences


def _texts(instance, field="tokens") -> List[str]:
    return [token.text for token in instance[field].tokens]


def _sentence_key(tokens: List[str]) -> str:
    return " ".join(tokens)


@pytest.fixture
def vocab(tmp_path: Path) -> BilmTfVocabulary:
    directory = tmp_path / "vocab"
    directory.mkdir()
    _write(directory / "corpus.txt", ["the cat sat", "the dog"])
    build_lm_vocabulary(str(directory / "corpus.txt"), directory / "vocab.txt", progress=False)
    # <S> 0, </S> 1, <UNK> 2, the 3, cat 4, dog 5, sat 6
    return BilmTfVocabulary.from_bilm_tf_file(str(directory / "vocab.txt"))


# -- sentences mode ---------------------------------------------------------------------------


def test_sentences_mode_content_and_indexing(tmp_path: Path, vocab):
    _write(tmp_path / "a.txt", ["the cat sat", "", "the  unknownword\tdog "])
    (tmp_path / "b.txt").write_text("\ufeffdog dog\n", encoding="utf-8")
    reader = BilmCorpusReader(shuffle=False, max_characters_per_token=30)
    instances = list(reader.read(str(tmp_path / "*.txt")))
    assert [_texts(i) for i in instances] == [
        ["the", "cat", "sat"],
        ["the", "unknownword", "dog"],
        ["dog", "dog"],
    ]
    assert reader.last_pass_stats.blank_lines == 1
    assert reader.last_pass_stats.sentences == 3
    batch = Batch(instances)
    batch.index_instances(vocab)
    tensors = batch.as_tensor_dict()["tokens"]
    assert tensors["lm_targets"]["tokens"].tolist() == [[3, 4, 6], [3, 2, 5], [5, 5, 0]]
    chars = tensors["elmo_characters"]["elmo_tokens"]
    assert chars.shape == (3, 3, 30)
    assert (chars > 0).any(-1).tolist() == [[True] * 3, [True] * 3, [True, True, False]]
    # "the": begin-of-word 258, bytes, end-of-word 259, then padding 260, all +1.
    assert chars[0, 0, :6].tolist() == [259, 117, 105, 102, 260, 261]

    single = reader.text_to_instance(["the", "cat"])
    assert set(single.fields) == {"tokens"}
    assert set(single["tokens"].token_indexers) == {"elmo_characters", "lm_targets"}
    assert reader.text_to_instance(["a", "b", "c"])["tokens"].sequence_length() == 3


def test_blank_lines_and_overlong_sentences(tmp_path: Path, caplog):
    _write(tmp_path / "a.txt", ["1 2 3 4 5", "", "   ", "1 2", "1 2 3 4 5 6"])
    _write(tmp_path / "b.txt", ["", "a b c d"])
    reader = BilmCorpusReader(shuffle=False, max_sentence_length=3)
    with caplog.at_level(logging.INFO, logger="elmo_plugin.data.dataset_readers.bilm_corpus"):
        texts = [_texts(i) for i in reader.read(str(tmp_path / "*.txt"))]
    assert texts == [["1", "2", "3"], ["1", "2"], ["1", "2", "3"], ["a", "b", "c"]]
    stats = reader.last_pass_stats
    assert (stats.blank_lines, stats.cut_sentences, stats.sentences) == (3, 3, 4)
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 2  # one per file
    assert f"{tmp_path / 'a.txt'}:1 has 5 tokens" in warnings[0]
    assert f"{tmp_path / 'b.txt'}:2 has 4 tokens" in warnings[1]
    summaries = [r.getMessage() for r in caplog.records if "skipped" in r.getMessage()]
    assert len(summaries) == 1
    assert "skipped 3 blank line(s); cut 3 sentence(s)" in summaries[0]
    assert reader.text_to_instance("1 2 3 4".split())["tokens"].sequence_length() == 3


def test_shuffle_is_deterministic_and_complete(tmp_path: Path):
    sentences = _make_corpus(tmp_path / "c", num_files=3, sentences_per_file=20)
    expected = sorted(_sentence_key(s) for s in sentences)
    pattern = str(tmp_path / "c" / "*.txt")

    def epochs(reader, count):
        return [[_sentence_key(_texts(i)) for i in reader.read(pattern)] for _ in range(count)]

    first = epochs(BilmCorpusReader(seed=7, shuffle_buffer_size=8), 3)
    again = epochs(BilmCorpusReader(seed=7, shuffle_buffer_size=8), 3)
    other_seed = epochs(BilmCorpusReader(seed=8, shuffle_buffer_size=8), 1)
    assert first == again
    for order in first + other_seed:
        assert sorted(order) == expected  # every sentence exactly once per epoch
    assert first[0] != first[1] != first[2]
    assert other_seed[0] != first[0]
    unshuffled = epochs(BilmCorpusReader(shuffle=False), 1)[0]
    assert unshuffled == [_sentence_key(s) for s in sentences]
    assert first[0] != unshuffled

    pinned = BilmCorpusReader(seed=7, shuffle_buffer_size=8)
    pinned.set_epoch(2)
    assert epochs(pinned, 2) == [first[2], first[2]]
    # Copies (no shared pass counter) still work.
    assert epochs(copy.deepcopy(BilmCorpusReader(seed=7, shuffle_buffer_size=8)), 1) == first[:1]


# -- stream mode ------------------------------------------------------------------------------


def _stream_fields(instance) -> Dict[str, List[str]]:
    return {name: _texts(instance, name) for name in instance.fields}


def test_stream_windows_match_a_hand_built_stream(tmp_path: Path, vocab):
    _write(tmp_path / "s.txt", ["a b c", "d e", "", "f", "g h i j"])
    reader = BilmCorpusReader(mode="stream", batch_size=2, unroll_steps=3, shuffle=False)
    instances = list(reader.read(str(tmp_path / "s.txt")))
    # Rows take the next sentence when they need one: row 0 gets "a b c" then "f", row 1 gets
    # "d e" then "g h i j"; the forward stream writes <S> ... </S>, the backward one reverses it.
    expected = [
        # step 0, row 0
        dict(fi="<S> a b", ft="a b c", bi="</S> c b", bt="c b a"),
        # step 0, row 1
        dict(fi="<S> d e", ft="d e </S>", bi="</S> e d", bt="e d <S>"),
        # step 1, row 0: the rest of "a b c", then "f"
        dict(fi="c <S> f", ft="</S> f </S>", bi="a </S> f", bt="<S> f <S>"),
        # step 1, row 1
        dict(fi="<S> g h", ft="g h i", bi="</S> j i", bt="j i h"),
        # step 2, row 0: no sentences left -> empty window
        dict(fi="", ft="", bi="", bt=""),
        # step 2, row 1: a short window
        dict(fi="i j", ft="j </S>", bi="h g", bt="g <S>"),
    ]
    got = [_stream_fields(i) for i in instances]
    assert got == [
        {
            "forward_tokens": e["fi"].split(),
            "forward_targets": e["ft"].split(),
            "backward_tokens": e["bi"].split(),
            "backward_targets": e["bt"].split(),
        }
        for e in expected
    ]

    # Through a data loader: batch b row i continues batch b - 1 row i; fixed shapes.
    loader = MultiProcessDataLoader(
        reader, str(tmp_path / "s.txt"), batch_size=2, shuffle=False, quiet=True
    )
    loader.index_with(vocab)
    batches = list(loader)
    assert len(batches) == 3
    for batch in batches:
        assert batch["forward_tokens"]["elmo_characters"]["elmo_tokens"].shape == (2, 3, 50)
        assert batch["backward_tokens"]["lm_targets"]["tokens"].shape == (2, 3)
        assert batch["forward_targets"]["lm_targets"]["tokens"].shape == (2, 3)
        assert set(batch["forward_targets"]) == {"lm_targets"}
    last = batches[2]
    mask = (last["forward_tokens"]["elmo_characters"]["elmo_tokens"] > 0).any(-1)
    assert mask.tolist() == [[False, False, False], [True, True, False]]
    # "j" is unknown -> <UNK> (2), </S> is 1; padding is 0 (masked).
    assert last["forward_targets"]["lm_targets"]["tokens"].tolist() == [[0, 0, 0], [2, 1, 0]]
    assert batches[0]["forward_tokens"]["lm_targets"]["tokens"][0].tolist() == [0, 2, 2]


def test_pack_windows_direct():
    steps = list(pack_windows([["x"], ["y", "z"]], batch_size=3, unroll_steps=10))
    # Row 0 fills its window with both sentences; the others run dry at once.
    assert steps == [
        [
            (["<S>", "x", "<S>", "y", "z"], ["x", "</S>", "y", "z", "</S>"]),
            ([], []),
            ([], []),
        ]
    ]
    steps = list(pack_windows([["x"], ["y", "z"]], batch_size=2, unroll_steps=2, reverse=True))
    assert steps == [
        [(["</S>", "x"], ["x", "<S>"]), (["</S>", "z"], ["z", "y"])],
        [([], []), (["y"], ["<S>"])],
    ]
    assert list(pack_windows([], batch_size=2, unroll_steps=4)) == []


def _rows(instances, batch_size: int, direction: str):
    """Each row's continuous (inputs, targets) stream for one direction."""
    rows = [([], []) for _ in range(batch_size)]
    for index, instance in enumerate(instances):
        inputs = _texts(instance, f"{direction}_tokens")
        targets = _texts(instance, f"{direction}_targets")
        assert len(inputs) == len(targets)
        rows[index % batch_size][0].extend(inputs)
        rows[index % batch_size][1].extend(targets)
    return rows


def _row_sentences(inputs: List[str], targets: List[str], start: str, end: str) -> List[List[str]]:
    """Splits a row's stream back into sentences (as read in that direction)."""
    assert len(inputs) == len(targets)
    sentences, current = [], None
    for position, (token, target) in enumerate(zip(inputs, targets)):
        if token == start:
            assert current is None
            current = []
        else:
            current.append(token)
        if target == end:
            sentences.append(current)
            current = None
        elif position + 1 < len(inputs):
            assert inputs[position + 1] == target  # targets are the inputs shifted by one
    assert current is None
    return sentences


def test_stream_covers_the_corpus_once_per_direction(tmp_path: Path):
    sentences = _make_corpus(tmp_path / "c", num_files=3, sentences_per_file=12)
    pattern = str(tmp_path / "c" / "*.txt")
    batch_size = 4
    reader = BilmCorpusReader(mode="stream", batch_size=batch_size, unroll_steps=5, seed=3)
    words = Counter(token for sentence in sentences for token in sentence)
    orders = {}
    for epoch in range(2):
        instances = list(reader.read(pattern))
        assert len(instances) % batch_size == 0
        for direction, start, end in (("forward", "<S>", "</S>"), ("backward", "</S>", "<S>")):
            rows = _rows(instances, batch_size, direction)
            inputs = Counter(token for row in rows for token in row[0])
            targets = Counter(token for row in rows for token in row[1])
            assert inputs == words + Counter({start: len(sentences)})
            assert targets == words + Counter({end: len(sentences)})
            read = [s for row in rows for s in _row_sentences(row[0], row[1], start, end)]
            if direction == "backward":
                read = [list(reversed(s)) for s in read]
            assert sorted(map(_sentence_key, read)) == sorted(map(_sentence_key, sentences))
            orders[epoch, direction] = [
                _sentence_key(s) for row in rows for s in _row_sentences(row[0], row[1], start, end)
            ]
    # The directions are shuffled independently, and differently in each epoch.
    assert orders[0, "forward"] != [
        " ".join(reversed(s.split())) for s in orders[0, "backward"]
    ]
    assert orders[0, "forward"] != orders[1, "forward"]


# -- multi-process loading and distributed sharding --------------------------------------------


def _loader_sentences(reader, pattern, vocab, **kwargs) -> List[str]:
    loader = MultiProcessDataLoader(reader, pattern, batch_size=4, quiet=True, **kwargs)
    loader.index_with(vocab)
    return [_sentence_key(_texts(i)) for i in loader.iter_instances()]


@pytest.mark.parametrize("num_files", [5, 1])  # sharded by file / by line
def test_multiprocess_loader_sees_every_sentence_once(tmp_path: Path, vocab, num_files):
    sentences = _make_corpus(tmp_path / "c", num_files=num_files, sentences_per_file=30 // num_files)
    expected = sorted(_sentence_key(s) for s in sentences)
    pattern = str(tmp_path / "c" / "*.txt")
    reader = BilmCorpusReader(seed=1)
    for _ in range(2):  # max_instances_in_memory: the loader reads again each epoch
        seen = _loader_sentences(reader, pattern, vocab, num_workers=2, max_instances_in_memory=8)
        assert sorted(seen) == expected


def test_worker_pass_counter_advances_across_epochs(tmp_path: Path, vocab):
    _make_corpus(tmp_path / "c", num_files=2, sentences_per_file=15)
    pattern = str(tmp_path / "c" / "*.txt")
    in_process = BilmCorpusReader(seed=5)
    expected = [[_sentence_key(_texts(i)) for i in in_process.read(pattern)] for _ in range(2)]
    worker_reader = BilmCorpusReader(seed=5)
    loader = MultiProcessDataLoader(
        worker_reader, pattern, batch_size=4, quiet=True, num_workers=1, max_instances_in_memory=8
    )
    loader.index_with(vocab)
    # One worker: the same shard as the main process; a new worker process each epoch.
    got = [[_sentence_key(_texts(i)) for i in loader.iter_instances()] for _ in range(2)]
    assert got == expected
    assert got[0] != got[1]


def test_stream_mode_refuses_loader_workers(tmp_path: Path, vocab):
    _make_corpus(tmp_path / "c", num_files=2, sentences_per_file=4)
    reader = BilmCorpusReader(mode="stream", batch_size=2)
    loader = MultiProcessDataLoader(
        reader, str(tmp_path / "c" / "*.txt"), batch_size=2, num_workers=2,
        max_instances_in_memory=4, quiet=True,
    )
    loader.index_with(vocab)
    with pytest.raises(Exception, match="stream mode needs num_workers 0"):
        list(loader)


def _read_sharded(pattern: str, world_size: int, num_workers: int, **reader_kwargs):
    shards = []
    for rank in range(world_size):
        for worker in range(num_workers):
            reader = BilmCorpusReader(**reader_kwargs)
            reader._set_distributed_info(DistributedInfo(world_size, rank))
            if num_workers > 1:
                reader._set_worker_info(WorkerInfo(num_workers, worker))
            shards.append(list(reader.read(pattern)))
    return shards


@pytest.mark.parametrize("num_files", [7, 2])  # by file (7 >= 6 shards), by line
def test_distributed_shards_are_disjoint_and_complete(tmp_path: Path, num_files):
    sentences = _make_corpus(tmp_path / "c", num_files=num_files, sentences_per_file=42 // num_files)
    pattern = str(tmp_path / "c" / "*.txt")
    expected = sorted(_sentence_key(s) for s in sentences)
    shards = _read_sharded(pattern, world_size=3, num_workers=2, seed=4)
    keys = [[_sentence_key(_texts(i)) for i in shard] for shard in shards]
    assert all(keys)  # every shard got something
    assert sorted(k for shard in keys for k in shard) == expected

    # Stream mode: each rank has its own streams; together they cover every token once.
    stream_shards = _read_sharded(
        pattern, world_size=3, num_workers=1, seed=4, mode="stream", batch_size=2, unroll_steps=4
    )
    targets = Counter()
    for shard in stream_shards:
        assert len(shard) % 2 == 0
        targets.update(t for i in shard for t in _texts(i, "forward_targets"))
    assert targets == Counter(t for s in sentences for t in s) + Counter({"</S>": len(sentences)})


def test_faked_torch_distributed(tmp_path: Path, monkeypatch):
    """The reader also finds rank and world size the way `DatasetReader.shard_iterable` does."""
    sentences = [[f"s{i}", "x"] for i in range(10)]
    _write(tmp_path / "one.txt", [" ".join(s) for s in sentences])
    pattern = str(tmp_path / "one.txt")
    monkeypatch.setattr(sharded_reader.common_util, "is_distributed", lambda: True)
    monkeypatch.setattr(sharded_reader.dist, "get_world_size", lambda *a, **k: 2)
    seen = []
    for rank in range(2):
        monkeypatch.setattr(sharded_reader.dist, "get_rank", lambda *a, r=rank, **k: r)
        reader = BilmCorpusReader(shuffle=False)
        reader._distributed_info = None  # only torch.distributed tells the rank
        seen.append([_sentence_key(_texts(i)) for i in reader.read(pattern)])
    assert seen[0] == [_sentence_key(s) for s in sentences[0::2]]
    assert seen[1] == [_sentence_key(s) for s in sentences[1::2]]


def test_shard_without_sentences_only_warns(tmp_path: Path, caplog):
    _write(tmp_path / "one.txt", ["only sentence"])
    with caplog.at_level(logging.WARNING, logger="elmo_plugin.data.dataset_readers.bilm_corpus"):
        shards = _read_sharded(str(tmp_path / "one.txt"), world_size=2, num_workers=1)
    assert [len(s) for s in shards] == [1, 0]
    assert any("shard 1 of 2" in r.getMessage() for r in caplog.records)


# -- configuration and errors -----------------------------------------------------------------


def test_from_params_and_errors(tmp_path: Path):
    reader = DatasetReader.from_params(
        Params({"type": "bilm_corpus", "mode": "stream", "batch_size": 3, "unroll_steps": 7})
    )
    assert isinstance(reader, BilmCorpusReader)
    assert (reader.batch_size, reader.unroll_steps) == (3, 7)
    assert reader.manual_distributed_sharding and reader.manual_multiprocess_sharding

    with pytest.raises(ConfigurationError, match="mode must be one of"):
        BilmCorpusReader(mode="windows")
    with pytest.raises(ConfigurationError, match="stream mode needs batch_size"):
        BilmCorpusReader(mode="stream")
    with pytest.raises(ConfigurationError, match="max_sentence_length"):
        BilmCorpusReader(max_sentence_length=0)

    missing = str(tmp_path / "none" / "*.txt")
    with pytest.raises(ConfigurationError, match="no files match") as error:
        list(BilmCorpusReader().read(missing))
    assert missing in str(error.value)

    _write(tmp_path / "blank1.txt", ["", "  "])
    _write(tmp_path / "blank2.txt", [])
    blank = str(tmp_path / "blank*.txt")
    for mode in ("sentences", "stream"):
        with pytest.raises(ConfigurationError, match="contains no sentences") as error:
            list(BilmCorpusReader(mode=mode, batch_size=2).read(blank))
        assert blank in str(error.value)
    # Sharded: every shard's pass finds no sentence anywhere.
    with pytest.raises(ConfigurationError, match="contains no sentences"):
        _read_sharded(blank, world_size=3, num_workers=1)

    bad = tmp_path / "bad.txt"
    bad.write_bytes(b"good line\nalso good\n\xe9t\xe9\n")
    with pytest.raises(ConfigurationError, match=rf"{bad}:3: not valid UTF-8"):
        list(BilmCorpusReader().read(str(bad)))


def test_data_errors_in_allennlp_train_are_only_the_problem(tmp_path: Path):
    # `allennlp train` with the plugin checks the corpus glob before it creates the run directory
    # and removes the directory when the reader finds a problem later
    # (elmo_plugin.commands.train_command, tests/commands/test_user_mistakes.py), so the
    # reader's message, with or without a serialization directory, is only the problem.
    run = tmp_path / "run"
    reader = DatasetReader.from_params(Params({"type": "bilm_corpus"}), serialization_dir=str(run))
    assert reader.serialization_dir == str(run)
    missing = str(tmp_path / "none" / "*.txt")
    with pytest.raises(ConfigurationError) as error:
        list(reader.read(missing))
    assert str(error.value) == f"bilm_corpus: no files match the corpus glob {missing!r}"
    _write(tmp_path / "blank.txt", ["", " "])
    with pytest.raises(ConfigurationError) as error:
        list(reader.read(str(tmp_path / "blank.txt")))
    assert str(error.value).endswith("contains no sentences: every line is blank")
    (tmp_path / "latin1.txt").write_bytes(b"caf\xe9\n")
    with pytest.raises(ConfigurationError) as error:
        list(reader.read(str(tmp_path / "latin1.txt")))
    assert str(error.value).startswith(f"{tmp_path / 'latin1.txt'}:1: not valid UTF-8")
    assert "rerun" not in str(error.value)
    with pytest.raises(ConfigurationError, match=r"every line is blank$"):
        list(BilmCorpusReader().read(str(tmp_path / "blank.txt")))


def test_a_utf16_corpus_is_refused_instead_of_read_as_garbage_tokens(tmp_path: Path):
    corpus = tmp_path / "utf16.txt"
    corpus.write_bytes("the cat sat\n".encode("utf-16-le"))
    with pytest.raises(ConfigurationError, match=rf"^{corpus}:1: NUL byte .* UTF-16"):
        list(BilmCorpusReader().read(str(corpus)))
