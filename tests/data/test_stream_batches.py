"""
The ``bilm_stream`` data loader against its reference, AllenNLP's loader over the same
``bilm_corpus`` reader in stream mode (``batch_size`` rows, ``shuffle: false``): the same
batches, tensor for tensor, over whole shuffled epochs with unknown, long and non-ASCII tokens
and the short and empty windows of an epoch's end.
"""
import json
from pathlib import Path
from typing import Dict, List

import pytest
import torch
from allennlp.common import Params
from allennlp.common.checks import ConfigurationError
from allennlp.data import DataLoader
from allennlp.nn.util import move_to_device

from elmo_plugin.data.dataset_readers.bilm_corpus import BilmCorpusReader
from elmo_plugin.data.stream_batches import BilmStreamDataLoader
from elmo_plugin.data.vocabulary import BilmTfVocabulary
from tests.helpers import REPO_ROOT

SAMPLE = REPO_ROOT / "elmo_plugin" / "sample_corpus"


def _corpus(tmp_path: Path) -> Path:
    lines = (SAMPLE / "train.txt").read_text(encoding="utf-8").splitlines()[:60]
    lines += [
        "the zebra ate a supercalifragilisticexpialidocious-and-then-some-more-bytes-than-fifty word",
        "밥 을 먹었다 .",  # multi-byte UTF-8, all out of the vocabulary
        "<S> in the middle , and </S> too",
        "",
        "x",
    ]
    # More distinct tokens than the loader's tables start with (1024): they grow.
    lines += [" ".join(f"w{line}x{k}" for k in range(30)) for line in range(40)]
    path = tmp_path / "corpus.txt"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def _batches(loader) -> List[Dict]:
    return [move_to_device(batch, torch.device("cpu")) for batch in loader]


def _flat(batch: Dict, prefix: str = "") -> Dict[str, torch.Tensor]:
    flat = {}
    for key, value in batch.items():
        if isinstance(value, dict):
            flat.update(_flat(value, f"{prefix}{key}."))
        else:
            flat[prefix + key] = value
    return flat


@pytest.mark.parametrize("parallel_directions", [False, True], ids=["one_process", "parallel"])
@pytest.mark.parametrize("batch_size, unroll_steps, max_characters", [(4, 7, 50), (3, 20, 30)])
def test_the_same_batches_as_allennlp_s_loader(tmp_path, batch_size, unroll_steps, max_characters,
                                               parallel_directions):
    corpus = _corpus(tmp_path)
    vocab = BilmTfVocabulary.from_bilm_tf_file(str(SAMPLE / "vocabulary.txt"))

    def reader() -> BilmCorpusReader:
        return BilmCorpusReader(mode="stream", batch_size=batch_size, unroll_steps=unroll_steps,
                                max_characters_per_token=max_characters, seed=7)

    reference = DataLoader.from_params(
        Params({"batch_size": batch_size, "shuffle": False,
                "max_instances_in_memory": 10 * batch_size}),
        reader=reader(), data_path=str(corpus),
    )
    fast = DataLoader.from_params(
        Params({"type": "bilm_stream", "batch_size": batch_size,
                "parallel_directions": parallel_directions}),
        reader=reader(), data_path=str(corpus),
    )
    assert isinstance(fast, BilmStreamDataLoader)
    for loader in (reference, fast):
        loader.index_with(vocab)
    for epoch in range(2):  # the second pass is shuffled anew, the same way in both
        expected, got = _batches(reference), _batches(fast)
        assert len(got) == len(expected) > 3
        for number, (a, b) in enumerate(zip(expected, got)):
            a, b = _flat(a), _flat(b)
            assert a.keys() == b.keys()
            for key in a:
                assert a[key].dtype == b[key].dtype, key
                assert torch.equal(a[key], b[key]), (epoch, number, key)
        # The epoch's end: rows run dry, the last window of one direction is empty.
        last = _flat(got[-1])
        assert not last["forward_tokens.elmo_characters.elmo_tokens"].any(-1).all()
    if not parallel_directions:
        assert fast._tokens._size > 1024  # the tables grew
    # The pass's counts, from the forward direction (made in another process, or here).
    assert fast.reader.last_pass_stats.sentences == reference.reader.last_pass_stats.sentences > 60


def test_it_counts_its_batches_without_using_a_pass(tmp_path):
    corpus = _corpus(tmp_path)
    loader = BilmStreamDataLoader(
        BilmCorpusReader(mode="stream", batch_size=4, unroll_steps=6, seed=3), str(corpus), 4
    )
    loader.index_with(BilmTfVocabulary.from_bilm_tf_file(str(SAMPLE / "vocabulary.txt")))
    counted = loader.count_batches()
    first = _batches(loader)
    assert counted == len(first)
    # The count used no pass: the first epoch has pass 0's order, as without counting.
    fresh = BilmStreamDataLoader(
        BilmCorpusReader(mode="stream", batch_size=4, unroll_steps=6, seed=3), str(corpus), 4
    )
    fresh.index_with(loader._vocab)
    assert all(torch.equal(_flat(a)[key], _flat(b)[key])
               for a, b in zip(first, _batches(fresh)) for key in _flat(a))


@pytest.mark.parametrize(
    "reader_arguments, batch_size, message",
    [
        ({"mode": "sentences"}, 4, "needs a 'bilm_corpus' dataset reader in stream mode, got "
                                   "BilmCorpusReader in mode 'sentences'"),
        ({"mode": "stream", "batch_size": 8}, 4,
         r"data_loader.batch_size \(4\) must equal dataset_reader.batch_size \(8\)"),
    ],
)
def test_a_loader_that_cannot_keep_the_streams_is_refused(reader_arguments, batch_size, message):
    with pytest.raises(ConfigurationError, match=message):
        BilmStreamDataLoader(BilmCorpusReader(**reader_arguments), "corpus.txt", batch_size)


def test_the_stream_configs_use_it(tmp_path):
    from tests.helpers import CONFIG_DIR, config_calling

    called = config_calling(tmp_path / "c.jsonnet", CONFIG_DIR / "bilm.jsonnet", batching="stream")
    params = json.loads(json.dumps(Params.from_file(str(called)).as_dict(quiet=True)))
    assert params["data_loader"] == {"type": "bilm_stream", "batch_size": 32}


def test_batches_per_epoch_goes_on_where_the_last_epoch_stopped(tmp_path):
    corpus = _corpus(tmp_path)
    vocab = BilmTfVocabulary.from_bilm_tf_file(str(SAMPLE / "vocabulary.txt"))

    def loader(batches_per_epoch):
        made = BilmStreamDataLoader(
            BilmCorpusReader(mode="stream", batch_size=4, unroll_steps=6, seed=3), str(corpus), 4,
            batches_per_epoch=batches_per_epoch,
        )
        made.index_with(vocab)
        return made

    one_pass = _batches(loader(None))
    limited = loader(3)
    assert len(limited) == 3
    epochs = [_batches(limited) for _ in range((len(one_pass) + 2) // 3 + 1)]
    assert all(len(epoch) == 3 for epoch in epochs)
    joined = [batch for epoch in epochs for batch in epoch]
    for a, b in zip(one_pass, joined):
        assert all(torch.equal(_flat(a)[key], _flat(b)[key]) for key in _flat(a))
    # Past the end of the first pass, a second pass (another shuffle) goes on.
    assert len(joined) > len(one_pass)


def test_an_error_in_a_direction_s_process_reaches_the_training_process(tmp_path):
    corpus = tmp_path / "blank.txt"
    corpus.write_text("\n\n", encoding="utf-8")
    loader = BilmStreamDataLoader(
        BilmCorpusReader(mode="stream", batch_size=2, unroll_steps=4), str(corpus), 2,
        parallel_directions=True,
    )
    loader.index_with(BilmTfVocabulary.from_bilm_tf_file(str(SAMPLE / "vocabulary.txt")))
    with pytest.raises(ConfigurationError, match="contains no sentences: every line is blank"):
        list(loader)
