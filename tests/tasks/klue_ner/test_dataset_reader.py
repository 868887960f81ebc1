"""
The ``klue_ner`` reader: KLUE's character tags become morpheme tags; the gold entities stay
character spans; parts of a file for model selection; both file layouts; errors name file:line.
"""
from pathlib import Path

import pytest
from allennlp.common.checks import ConfigurationError

from elmo_plugin.tasks.klue_ner.dataset_reader import (
    KlueNerReader,
    MorphemeTagStats,
    char_tags_to_spans,
    morpheme_tags,
    read_klue_ner,
    select_part,
)
from elmo_plugin.tasks.klue_ner.model import token_tags_to_char_spans
from tests.helpers import SHARED_DATA, requires_shared_data

SHARED_KLUE = SHARED_DATA / "ko" / "ner" / "klue"

# KLUE's layout: comment lines, "## id<TAB>marked-up text", a character per line (spaces too).
KLUE_TSV = """## 토큰, 레이블 구분자 : \\t
## 컬럼명 : CHAR\tNE_TAG
## s1\t<박:PS>씨는 <서울:LC>에 산다
박\tB-PS
씨\tO
는\tO
 \tO
서\tB-LC
울\tI-LC
에\tO
 \tO
산\tO
다\tO

## s2\t<2019년 1월:DT> 개봉
2\tB-DT
0\tI-DT
1\tI-DT
9\tI-DT
년\tI-DT
 \tI-DT
1\tI-DT
월\tI-DT
 \tO
개\tO
봉\tO
"""


def write(tmp_path: Path, name: str, text: str) -> str:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return str(path)


def test_char_tags_to_spans_by_hand():
    tags = ["B-PS", "O", "O", "B-LC", "I-LC", "O", "I-QT", "I-QT", "B-DT", "B-DT"]
    assert char_tags_to_spans(tags) == [(0, 1, "PS"), (3, 5, "LC"), (6, 8, "QT"), (8, 9, "DT"), (9, 10, "DT")]
    with pytest.raises(ConfigurationError, match="unknown tag 'X-PS'"):
        char_tags_to_spans(["X-PS"])


def test_morpheme_tags_by_hand():
    # Text "박씨는 서울에": morphemes 박씨 | 는 | 서울 | 에 (a made-up analysis where the name
    # and the title are one morpheme, so the entity 박 crosses a morpheme boundary).
    spans = [(0, 2), (2, 3), (4, 6), (6, 7)]
    entities = [(0, 1, "PS"), (4, 6, "LC")]
    stats = MorphemeTagStats()
    tags = morpheme_tags(spans, entities, stats)
    assert tags == ["B-PS", "O", "B-LC", "O"]
    assert (stats.morphemes, stats.entities, stats.crossing_morphemes, stats.unreachable_entities) == (4, 2, 1, 1)
    # Mapped back, the crossing entity is wider than the gold one; the other is exact.
    assert token_tags_to_char_spans(tags, spans) == [(0, 2, "PS"), (4, 6, "LC")]
    # A morpheme over two entities keeps the first; the second starts at its next morpheme.
    assert morpheme_tags([(0, 2), (2, 3)], [(0, 1, "PS"), (1, 3, "OG")]) == ["B-PS", "B-OG"]


def test_reads_klue_layout_into_morphemes(tmp_path):
    path = write(tmp_path, "klue.tsv", KLUE_TSV)
    sentences = list(read_klue_ner(path))
    assert [s.sentence_id for s in sentences] == ["s1", "s2"]
    assert sentences[0].text == "박씨는 서울에 산다" and sentences[1].text == "2019년 1월 개봉"
    instances = list(KlueNerReader().read(path))
    first = instances[0]
    words = [t.text for t in first["tokens"].tokens]
    assert words == ["박", "씨", "는", "서울", "에", "산다"]
    assert first["tags"].labels == ["B-PS", "O", "O", "B-LC", "O", "O"]
    assert first["metadata"]["gold_spans"] == [(0, 1, "PS"), (4, 6, "LC")]
    second = instances[1]
    assert second["metadata"]["gold_spans"] == [(0, 8, "DT")]
    # The date's morphemes map back to exactly the gold span, the inner space included.
    tags = second["tags"].labels
    assert token_tags_to_char_spans(tags, second["metadata"]["token_spans"]) == [(0, 8, "DT")]


def test_conll_layout_gives_the_same_sentences(tmp_path):
    conll = "\n".join(
        line.replace(" \t", "\u2581\t") for line in KLUE_TSV.splitlines() if not line.startswith("##")
    )
    tsv = [(s.text, s.char_tags) for s in read_klue_ner(write(tmp_path, "a.tsv", KLUE_TSV))]
    txt = [(s.text, s.char_tags) for s in read_klue_ner(write(tmp_path, "b.txt", conll))]
    assert tsv == txt


def test_parts_of_a_file_are_disjoint_and_complete(tmp_path):
    items = list(range(100))
    train, held = select_part(items, None, 90), select_part(items, 90, None)
    assert len(train) == 90 and len(held) == 10
    assert sorted(train + held) == items and train == sorted(train)
    assert held != items[90:]  # a permutation, not the file's last tenth
    path = write(tmp_path, "klue.tsv", KLUE_TSV)
    reader = KlueNerReader()
    first = [i["metadata"]["sentence_id"] for i in reader.read(path + "[:50%]")]
    second = [i["metadata"]["sentence_id"] for i in reader.read(path + "[50%:]")]
    assert sorted(first + second) == ["s1", "s2"] and len(first) == 1


def test_bad_lines_name_the_file_and_line(tmp_path):
    path = write(tmp_path, "bad.tsv", "박\tB-PS\n씨는\tO\n")
    with pytest.raises(ConfigurationError, match=r"bad.tsv:2: expected one character"):
        list(read_klue_ner(path))
    empty = write(tmp_path, "empty.tsv", "## only a comment\n")
    with pytest.raises(ConfigurationError, match="empty.tsv: no sentences"):
        list(KlueNerReader().read(empty))


@requires_shared_data("ko/ner/klue")
def test_real_klue_test_split_maps_back_almost_exactly():
    """
    The oracle: gold morpheme tags mapped back to characters, scored as KLUE scores. It bounds
    what a morpheme tagger can reach (measured: entity macro F1 0.981, micro 0.977 on the test split).
    """
    from elmo_plugin.tasks.klue_ner.metric import KlueNerF1

    metric = KlueNerF1()
    for instance in KlueNerReader().read(str(SHARED_KLUE / "original" / "test.tsv")):
        meta = instance["metadata"]
        mapped = token_tags_to_char_spans(instance["tags"].labels, meta["token_spans"])
        metric([mapped], [meta["gold_spans"]], [meta["text"]])
    scores = metric.get_metric()
    assert 0.97 < scores["entity_macro_f1"] < 1.0
    assert 0.97 < scores["entity_micro_f1"] < 1.0
