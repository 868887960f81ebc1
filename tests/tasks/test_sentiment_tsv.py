"""
The ``sentiment_tsv`` reader: a hand-written TSV with every field checked (Mecab morphemes), the
column options, ``max_tokens``, skipped rows and their count, errors naming the file and line,
sharding, and the first rows of the shared NSMC-style set when it is there.
"""
import logging
import re
from pathlib import Path
from typing import List

import pytest
import torch
from allennlp.common import Params
from allennlp.common.checks import ConfigurationError
from allennlp.data import Batch, DatasetReader, Instance, Vocabulary
from allennlp.data.dataset_readers.dataset_reader import WorkerInfo
from allennlp.data.tokenizers import WhitespaceTokenizer

from elmo_plugin.tasks.sentiment.sentiment_tsv import SentimentTsvReader
from tests.helpers import SHARED_DATA, requires_shared_data

pytest.importorskip("mecab_ko", reason="the default tokenizer needs requirements/korean.txt")

# Line 1 the header; line 5 a blank text (skipped); line 6 a " inside the text (no quoting).
TSV_TEXT = (
    "id\ttext\tlabel\n"
    "1\t아버지가방에들어가신다.\t1\n"
    "2\t괜찮고 스토리 좋은 영화\t1\n"
    "3\t김희철 닮았다\t0\n"
    "4\t \t0\n"
    '5\t"최고" 입니다\t1\n'
)
EXPECTED_TOKENS = [
    ["아버지", "가", "방", "에", "들어가", "신다", "."],
    ["괜찮", "고", "스토리", "좋", "은", "영화"],
    ["김희철", "닮", "았", "다"],
    ['"', "최고", '"', "입", "니다"],
]


def _write(path: Path, text: str) -> str:
    path.write_bytes(text.encode("utf-8"))
    return str(path)


def _texts(instance: Instance) -> List[str]:
    return [token.text for token in instance["tokens"].tokens]


def _at(path: str, line: int) -> str:
    """The ``path:line:`` an error message must start with, as a regular expression."""
    return "^" + re.escape(f"{path}:{line}:")


def test_fixture_from_params(tmp_path, caplog):
    path = _write(tmp_path / "a.tsv", TSV_TEXT)
    reader = DatasetReader.from_params(
        Params({"type": "sentiment_tsv", "tokenizer": {"type": "korean"}})
    )
    assert isinstance(reader, SentimentTsvReader)
    with caplog.at_level(logging.INFO, logger="elmo_plugin.tasks.sentiment.sentiment_tsv"):
        instances = list(reader.read(path))
    assert [_texts(i) for i in instances] == EXPECTED_TOKENS
    assert [i["label"].label for i in instances] == ["1", "1", "0", "1"]
    assert instances[0]["label"]._label_namespace == "labels"
    assert [i["metadata"].metadata for i in instances] == [
        {"words": words, "id": row_id} for words, row_id in zip(EXPECTED_TOKENS, "1235")
    ]
    assert set(instances[0].fields) == {"tokens", "label", "metadata"}
    # Mecab's character offsets come with the tokens.
    assert [(t.idx, t.idx_end) for t in instances[0]["tokens"].tokens][:3] == [
        (0, 3), (3, 4), (4, 5)
    ]
    # The blank text at line 5 is skipped, counted and logged.
    assert any(
        "read 4 instance(s)" in record.getMessage()
        and "skipped 1 row(s) whose text gives no token (first at line 5)" in record.getMessage()
        for record in caplog.records
    ), [record.getMessage() for record in caplog.records]


def test_default_tokenizer_is_mecab(tmp_path):
    path = _write(tmp_path / "a.tsv", TSV_TEXT)
    assert [_texts(i) for i in SentimentTsvReader().read(path)] == EXPECTED_TOKENS


def test_max_tokens_cuts_texts(tmp_path, caplog):
    path = _write(tmp_path / "a.tsv", TSV_TEXT)
    reader = SentimentTsvReader(max_tokens=5)
    with caplog.at_level(logging.INFO, logger="elmo_plugin.tasks.sentiment.sentiment_tsv"):
        instances = list(reader.read(path))
    assert [_texts(i) for i in instances] == [tokens[:5] for tokens in EXPECTED_TOKENS]
    assert instances[0]["metadata"]["words"] == ["아버지", "가", "방", "에", "들어가"]
    assert any("cut 2 text(s) to max_tokens=5" in r.getMessage() for r in caplog.records)
    # text_to_instance on raw text cuts too; on tokens, takes them as they are.
    assert _texts(reader.text_to_instance("아버지가방에들어가신다.")) == EXPECTED_TOKENS[0][:5]
    instance = reader.text_to_instance(["a", "b"], "1", "7")
    assert _texts(instance) == ["a", "b"] and instance["metadata"]["id"] == "7"
    assert "label" not in reader.text_to_instance("영화")
    with pytest.raises(ConfigurationError, match="max_tokens must be at least 1"):
        SentimentTsvReader(max_tokens=0)


def test_column_options_extra_columns_and_no_id(tmp_path):
    text = "sentiment\tsource\treview\n" "pos\tweb\t좋은 영화\n" "neg\tapp\t별로\n"
    path = _write(tmp_path / "b.tsv", text)
    reader = SentimentTsvReader(
        tokenizer=WhitespaceTokenizer(), text_column="review", label_column="sentiment"
    )
    instances = list(reader.read(path))
    assert [_texts(i) for i in instances] == [["좋은", "영화"], ["별로"]]
    assert [i["label"].label for i in instances] == ["pos", "neg"]
    assert [i["metadata"]["id"] for i in instances] == [None, None]
    by_source = SentimentTsvReader(
        text_column="review", label_column="sentiment", id_column="source"
    )
    assert [i["metadata"]["id"] for i in by_source.read(path)] == ["web", "app"]


def test_empty_lines_are_skipped_and_crlf_and_bom_are_read(tmp_path):
    text = "\ufeffid\ttext\tlabel\r\n1\t별로\t0\r\n\r\n2\t좋은 영화\t1\r\n\n"
    path = _write(tmp_path / "c.tsv", text)
    instances = list(SentimentTsvReader().read(path))
    assert [_texts(i) for i in instances] == [["별로"], ["좋", "은", "영화"]]
    assert [i["label"].label for i in instances] == ["0", "1"]


@pytest.mark.parametrize(
    "text, line, message",
    [
        ("id\treview\tlabel\n1\t좋다\t1\n", 1, "no column 'text' in the header"),
        ("id\ttext\n1\t좋다\n", 1, "no column 'label' in the header"),
        ("text\tlabel\ttext\n좋다\t1\t좋다\n", 1, "the header names the column\\(s\\) 'text'"),
        ("id\ttext\tlabel\n1\t좋다\t1\n2\t나쁘다\n", 3, "2 tab-separated field\\(s\\), but the header"),
        ("id\ttext\tlabel\n1\t좋다\t1\n2\t나\t쁘다\t0\n", 3, "4 tab-separated field\\(s\\)"),
        ("id\ttext\tlabel\n1\t좋다\t1\n2\t나쁘다\t \n", 3, "empty label \\(column 'label'\\)"),
        ("id\ttext\tlabel\n1\t좋다\t\n", 2, "empty label"),
    ],
)
def test_errors_name_file_and_line(tmp_path, text, line, message):
    path = _write(tmp_path / "bad.tsv", text)
    with pytest.raises(ConfigurationError, match=_at(path, line) + " " + message):
        list(SentimentTsvReader().read(path))


def test_not_utf8_names_file_and_line(tmp_path):
    path = tmp_path / "latin1.tsv"
    path.write_bytes(b"id\ttext\tlabel\n1\t" + "좋다".encode("utf-8") + b"\t1\n2\tcaf\xe9\t0\n")
    with pytest.raises(ConfigurationError, match=_at(str(path), 3) + " not valid UTF-8"):
        list(SentimentTsvReader().read(path))


@pytest.mark.parametrize(
    "text, message",
    [
        ("", "empty file"),
        ("id\ttext\tlabel\n", "no instance in the file: 0 row"),
        ("id\ttext\tlabel\n\n", "no instance in the file: 0 row.*1 empty line"),
        ("id\ttext\tlabel\n1\t \t0\n2\t\t1\n", "no instance in the file: 2 row.*every text blank"),
    ],
)
def test_a_file_without_instances_is_an_error(tmp_path, text, message):
    path = _write(tmp_path / "empty.tsv", text)
    with pytest.raises(ConfigurationError, match="^" + re.escape(path) + ": " + message):
        list(SentimentTsvReader().read(path))


def test_shards_over_workers(tmp_path):
    path = _write(tmp_path / "a.tsv", TSV_TEXT)
    everything = [(_texts(i), i["metadata"]["id"]) for i in SentimentTsvReader().read(path)]
    # The rows are sharded before they are tokenized: worker 0 gets ids 1, 3, 5, worker 1 ids 2
    # and 4, whose blank text it skips.
    shards = []
    for worker in range(2):
        reader = SentimentTsvReader()
        reader._set_worker_info(WorkerInfo(2, worker))
        shards.append([(_texts(i), i["metadata"]["id"]) for i in reader.read(path)])
    assert shards[0] == [everything[0], everything[2], everything[3]]
    assert shards[1] == [everything[1]]
    # A worker without a row of a tiny file warns instead of failing.
    one_row = _write(tmp_path / "one.tsv", "id\ttext\tlabel\n1\t좋다\t1\n")
    reader = SentimentTsvReader()
    reader._set_worker_info(WorkerInfo(2, 1))
    assert list(reader.read(one_row)) == []


def test_basic_classifier_batch(tmp_path, single_thread):
    path = _write(tmp_path / "a.tsv", TSV_TEXT)
    instances = list(SentimentTsvReader().read(path))
    vocab = Vocabulary.from_instances(instances)
    assert vocab.get_token_to_index_vocabulary("labels").keys() == {"0", "1"}
    batch = Batch(instances)
    batch.index_instances(vocab)
    tensors = batch.as_tensor_dict()
    assert tensors["tokens"]["tokens"]["tokens"].shape == (4, 7)
    labels = [vocab.get_token_index(label, "labels") for label in ["1", "1", "0", "1"]]
    assert torch.equal(tensors["label"], torch.tensor(labels))


@requires_shared_data("ko/sentiment/train.tsv")
def test_first_rows_of_the_shared_sentiment_set():
    # ko/sentiment/train.tsv, lines 2-4 (shared/data/README.md, section 7).
    reader = SentimentTsvReader(max_instances=3)
    instances = list(reader.read(SHARED_DATA / "ko" / "sentiment" / "train.tsv"))
    assert [i["metadata"]["id"] for i in instances] == ["4907061", "6080121", "6619534"]
    assert [i["label"].label for i in instances] == ["0", "0", "1"]
    assert [_texts(i) for i in instances] == [
        "재밌 다고 해서 보 았 으나 실망 입니다 . 고전 무협 영화 스타일 이 네요 .".split(),
        ["김희철", "닮", "았", "다"],
        ["괜찮", "고", "스토리", "좋", "은", "영화"],
    ]
