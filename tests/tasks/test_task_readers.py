"""
The downstream-task dataset readers: ``token_tag_conll`` (NER), ``conllu_tagging`` (POS),
``conllu_sentence_genre`` (sentence classification) and ``universal_propbank_srl`` (SRL).

Each has a hand-written fixture with every field checked, its errors (which name the file and
line), counts on the shared data sets when they are there, and a forward pass of the
allennlp(-models) model it is meant for (tiny models) on a batch of its instances.
"""
import math
import re
import shutil
from pathlib import Path
from typing import Dict, List

import pytest
import torch
from allennlp.common import Params
from allennlp.common.checks import ConfigurationError
from allennlp.data import Batch, DatasetReader, Instance, Vocabulary
from allennlp.data.dataset_readers.dataset_reader import WorkerInfo
from allennlp.models import BasicClassifier
from allennlp.modules.seq2seq_encoders import PytorchSeq2SeqWrapper
from allennlp.modules.seq2vec_encoders import BagOfEmbeddingsEncoder
from allennlp.modules.text_field_embedders import BasicTextFieldEmbedder
from allennlp.modules.token_embedders import Embedding

from elmo_plugin.tasks.srl.universal_propbank_srl import (
    PropBankReadStats,
    UniversalPropBankSrlReader,
    propbank_frame_to_bio,
)
from elmo_plugin.tasks.tagging.token_tag_conll import TokenTagConllReader
from elmo_plugin.tasks.universal_dependencies.conllu import (
    ConlluSentenceGenreReader,
    ConlluTaggingReader,
    read_conllu_sentences,
)
from tests.helpers import SHARED_DATA, requires_shared_data

needs_shared_data = requires_shared_data()


def _write(path: Path, text: str) -> str:
    path.write_text(text, encoding="utf-8")
    return str(path)


def _texts(instance: Instance, name: str = "tokens") -> List[str]:
    return [token.text for token in instance[name].tokens]


def _at(path: str, line: int) -> str:
    """The ``path:line:`` an error message must start with, as a regular expression."""
    return "^" + re.escape(f"{path}:{line}:")


def _tiny_embedder(vocab: Vocabulary) -> BasicTextFieldEmbedder:
    return BasicTextFieldEmbedder(
        {"tokens": Embedding(embedding_dim=4, num_embeddings=vocab.get_vocab_size("tokens"))}
    )


def _tensors(instances: List[Instance]):
    """The vocabulary of ``instances`` and their batch, indexed, as tensors."""
    vocab = Vocabulary.from_instances(instances)
    batch = Batch(instances)
    batch.index_instances(vocab)
    return vocab, batch.as_tensor_dict()


def _tab(*rows: List[str]) -> str:
    return "".join("\t".join(row) + "\n" for row in rows)


# -- token_tag_conll ------------------------------------------------------------------------------

TOKEN_TAG_TEXT = (
    "Ann\tB-PER\n"
    "Smith\tI-PER\n"
    "lives\tO\n"
    "in\tO\n"
    "Paris\tB-LOC\n"
    "\n"
    "\n"  # several blank lines are one break
    "Hi\tO\n"
    "\t\n"  # a line holding only a TAB separates sentences too
    "IBM\tB-ORG\n"
    "café\u200b\tO\n"  # tokens are kept exactly (an invisible character included)
)  # the last sentence has no blank line after it


def test_token_tag_fixture(tmp_path):
    path = _write(tmp_path / "ner.txt", TOKEN_TAG_TEXT)
    instances = list(TokenTagConllReader().read(path))
    assert [_texts(i) for i in instances] == [
        ["Ann", "Smith", "lives", "in", "Paris"],
        ["Hi"],
        ["IBM", "café\u200b"],
    ]
    assert [i["tags"].labels for i in instances] == [
        ["B-PER", "I-PER", "O", "O", "B-LOC"],
        ["O"],
        ["B-ORG", "O"],
    ]
    assert [i["metadata"].metadata for i in instances] == [
        {"words": ["Ann", "Smith", "lives", "in", "Paris"]},
        {"words": ["Hi"]},
        {"words": ["IBM", "café\u200b"]},
    ]
    assert set(instances[0].fields) == {"tokens", "tags", "metadata"}
    assert instances[0]["tags"]._label_namespace == "labels"
    # A trailing blank line (and CRLF line ends) change nothing.
    crlf = _write(tmp_path / "crlf.txt", (TOKEN_TAG_TEXT + "\n").replace("\n", "\r\n"))
    assert [_texts(i) for i in TokenTagConllReader().read(crlf)] == [_texts(i) for i in instances]


def test_token_tag_from_params_and_namespace(tmp_path):
    path = _write(tmp_path / "ner.txt", TOKEN_TAG_TEXT)
    reader = DatasetReader.from_params(
        Params({"type": "token_tag_conll", "label_namespace": "ner_tags"})
    )
    assert isinstance(reader, TokenTagConllReader)
    instance = next(iter(reader.read(path)))
    assert instance["tags"]._label_namespace == "ner_tags"
    # text_to_instance without tags (prediction), from strings.
    assert set(reader.text_to_instance(["a", "b"]).fields) == {"tokens", "metadata"}


@pytest.mark.parametrize(
    "line, line_number",
    [("Paris B-LOC", 3), ("Paris\tB-LOC\textra", 3), ("\tO", 3), ("Paris\t", 3)],
)
def test_token_tag_bad_line_names_file_and_line(tmp_path, line, line_number):
    path = _write(tmp_path / "bad.txt", f"Ann\tB-PER\n\n{line}\n")
    with pytest.raises(ConfigurationError, match=_at(path, line_number)):
        list(TokenTagConllReader().read(path))


@pytest.mark.parametrize("text", ["", "\n\n \n"])
def test_token_tag_empty_file_is_an_error(tmp_path, text):
    path = _write(tmp_path / "empty.txt", text)
    with pytest.raises(ConfigurationError, match=re.escape(f"{path}: no sentences")):
        list(TokenTagConllReader().read(path))


def test_token_tag_not_utf8_names_line(tmp_path):
    path = tmp_path / "latin1.txt"
    path.write_bytes("Ann\tB-PER\n\nCaf\xe9\tO\n".encode("latin-1"))
    with pytest.raises(ConfigurationError, match=_at(str(path), 3) + " not valid UTF-8"):
        list(TokenTagConllReader().read(str(path)))


@needs_shared_data
@pytest.mark.parametrize(
    "split, sentences, tokens",
    [("train", 20_000, 160_394), ("dev", 10_000, 80_536), ("test", 10_000, 80_326)],
)
def test_token_tag_wikiann_counts(split, sentences, tokens):
    instances = list(TokenTagConllReader().read(SHARED_DATA / "en/ner/wikiann" / f"{split}.txt"))
    assert len(instances) == sentences
    assert sum(len(i["tokens"]) for i in instances) == tokens
    tags = {tag for i in instances for tag in i["tags"].labels}
    assert tags == {"O", "B-PER", "I-PER", "B-ORG", "I-ORG", "B-LOC", "I-LOC"}


def test_crf_tagger_forward_on_token_tag_instances(tmp_path, single_thread):
    from allennlp_models.tagging.models.crf_tagger import CrfTagger

    path = _write(tmp_path / "ner.txt", TOKEN_TAG_TEXT)
    instances = list(TokenTagConllReader().read(path))[:2]
    vocab, tensors = _tensors(instances)
    torch.manual_seed(0)
    model = CrfTagger(
        vocab,
        _tiny_embedder(vocab),
        PytorchSeq2SeqWrapper(torch.nn.LSTM(4, 3, batch_first=True, bidirectional=True)),
        label_encoding="BIO",
        calculate_span_f1=True,
    )
    output = model(**tensors)
    assert math.isfinite(float(output["loss"].detach()))
    assert output["words"] == [i["metadata"]["words"] for i in instances]
    assert len(output["tags"]) == 2


# -- CoNLL-U: the shared parser -------------------------------------------------------------------

CONLLU_TEXT = _tab(
    ["# newpar"],
    ["# sent_id = weblog-blog_01-0001"],
    ["# text = I don't know."],
) + _tab(
    ["1", "I", "I", "PRON", "PRP", "_", "4", "nsubj", "_", "_"],
    ["2-3", "don't", "_", "_", "_", "_", "_", "_", "_", "_"],
    ["2", "do", "do", "AUX", "VBP", "_", "4", "aux", "_", "_"],
    ["3", "n't", "not", "PART", "RB", "_", "4", "advmod", "_", "_"],
    ["4", "know", "know", "VERB", "VB", "_", "0", "root", "_", "_"],
    ["4.1", "knew", "know", "VERB", "VBD", "_", "_", "_", "4:conj", "_"],
    ["5", ".", ".", "PUNCT", ".", "_", "4", "punct", "_", "_"],
) + "\n" + _tab(
    ["# sent_id = email-enron_7-0002"],
    ["1", "Thanks", "thanks", "NOUN", "UH", "_", "0", "root", "_", "_"],
)  # no blank line after the last sentence


def test_conllu_parser(tmp_path):
    path = _write(tmp_path / "a.conllu", CONLLU_TEXT)
    first, second = read_conllu_sentences(path)
    assert first.start_line == 1
    assert first.comments == {
        "newpar": None,
        "sent_id": "weblog-blog_01-0001",
        "text": "I don't know.",
    }
    # The multiword token (line 5) and the empty node (line 9) are skipped.
    assert first.words == ["I", "do", "n't", "know", "."]
    assert first.line_numbers == [4, 6, 7, 8, 10]
    assert first.rows[3][:4] == ["4", "know", "know", "VERB"]
    assert second.start_line == 12
    assert second.comments == {"sent_id": "email-enron_7-0002"}
    assert second.words == ["Thanks"]


@pytest.mark.parametrize(
    "bad_line, message",
    [
        ("2\tknow\tknow\tVERB\tVB\t_\t0\troot\t_", "at least 10 tab-separated columns"),
        ("x\tknow\tknow\tVERB\tVB\t_\t0\troot\t_\t_", "is not an integer"),
        ("1.x\tknow\tknow\tVERB\tVB\t_\t0\troot\t_\t_", "is not an integer"),
        ("3\tknow\tknow\tVERB\tVB\t_\t0\troot\t_\t_", "out of sequence"),
    ],
)
@pytest.mark.parametrize("reader_class", [ConlluTaggingReader, ConlluSentenceGenreReader])
def test_conllu_malformed_line_names_file_and_line(tmp_path, bad_line, message, reader_class):
    text = "# sent_id = answers-1-0001\n" + _tab(
        ["1", "I", "I", "PRON", "PRP", "_", "2", "nsubj", "_", "_"]
    ) + bad_line + "\n"
    path = _write(tmp_path / "bad.conllu", text)
    with pytest.raises(ConfigurationError, match=_at(path, 3) + ".*" + message):
        list(reader_class().read(path))


def test_conllu_comments_without_words_are_an_error(tmp_path):
    path = _write(tmp_path / "c.conllu", CONLLU_TEXT + "\n# sent_id = reviews-9-0003\n")
    with pytest.raises(ConfigurationError, match=_at(path, 15) + " comment lines without"):
        list(read_conllu_sentences(path))


@pytest.mark.parametrize("reader_class", [ConlluTaggingReader, ConlluSentenceGenreReader])
@pytest.mark.parametrize("text", ["", "\n\n"])
def test_conllu_empty_file_is_an_error(tmp_path, reader_class, text):
    path = _write(tmp_path / "empty.conllu", text)
    with pytest.raises(ConfigurationError, match=re.escape(f"{path}: no CoNLL-U sentences")):
        list(reader_class().read(path))


# -- conllu_tagging -------------------------------------------------------------------------------


def test_conllu_tagging_fixture(tmp_path):
    path = _write(tmp_path / "a.conllu", CONLLU_TEXT)
    upos = list(ConlluTaggingReader().read(path))
    assert [_texts(i) for i in upos] == [["I", "do", "n't", "know", "."], ["Thanks"]]
    assert [i["tags"].labels for i in upos] == [
        ["PRON", "AUX", "PART", "VERB", "PUNCT"],
        ["NOUN"],
    ]
    assert [i["metadata"].metadata for i in upos] == [
        {"words": ["I", "do", "n't", "know", "."]},
        {"words": ["Thanks"]},
    ]
    assert set(upos[0].fields) == {"tokens", "tags", "metadata"}
    reader = DatasetReader.from_params(
        Params({"type": "conllu_tagging", "tag_column": "xpos", "label_namespace": "xpos"})
    )
    xpos = list(reader.read(path))
    assert [i["tags"].labels for i in xpos] == [["PRP", "VBP", "RB", "VB", "."], ["UH"]]
    assert xpos[0]["tags"]._label_namespace == "xpos"


def test_conllu_tagging_rejects_unknown_tag_column():
    with pytest.raises(ConfigurationError, match="tag_column"):
        ConlluTaggingReader(tag_column="deprel")


@needs_shared_data
@pytest.mark.parametrize(
    "split, sentences, tokens",
    [("train", 12_544, 204_577), ("dev", 2_001, 25_147), ("test", 2_077, 25_094)],
)
def test_conllu_tagging_ewt_counts(split, sentences, tokens):
    path = SHARED_DATA / "en/pos" / f"en_ewt-ud-{split}.conllu"
    instances = list(ConlluTaggingReader().read(path))
    assert len(instances) == sentences
    assert sum(len(i["tokens"]) for i in instances) == tokens
    if split == "train":
        assert {tag for i in instances for tag in i["tags"].labels} == set(
            "ADJ ADP ADV AUX CCONJ DET INTJ NOUN NUM PART PRON PROPN PUNCT SCONJ SYM VERB X".split()
        )


# -- conllu_sentence_genre ------------------------------------------------------------------------


def test_conllu_genre_fixture(tmp_path):
    path = _write(tmp_path / "a.conllu", CONLLU_TEXT)
    reader = DatasetReader.from_params(Params({"type": "conllu_sentence_genre"}))
    instances = list(reader.read(path))
    assert [_texts(i) for i in instances] == [["I", "do", "n't", "know", "."], ["Thanks"]]
    assert [i["label"].label for i in instances] == ["weblog", "email"]
    assert instances[0]["label"]._label_namespace == "labels"
    assert [i["metadata"].metadata for i in instances] == [
        {"words": ["I", "do", "n't", "know", "."], "sent_id": "weblog-blog_01-0001"},
        {"words": ["Thanks"], "sent_id": "email-enron_7-0002"},
    ]
    assert set(instances[0].fields) == {"tokens", "label", "metadata"}


def test_conllu_genre_missing_sent_id_names_file_and_line(tmp_path):
    # The second sentence (from line 12) loses its sent_id; a "# text" comment stays.
    text = CONLLU_TEXT.replace("# sent_id = email-enron_7-0002", "# text = Thanks")
    path = _write(tmp_path / "a.conllu", text)
    with pytest.raises(ConfigurationError, match=_at(path, 12) + " the sentence has no"):
        list(ConlluSentenceGenreReader().read(path))
    no_dash = _write(tmp_path / "b.conllu", CONLLU_TEXT.replace("email-enron_7-0002", "enron7"))
    with pytest.raises(ConfigurationError, match=_at(no_dash, 12) + ".*no genre prefix"):
        list(ConlluSentenceGenreReader().read(no_dash))


@needs_shared_data
@pytest.mark.parametrize(
    "split, counts",
    [
        ("train", dict(answers=2631, email=3770, newsgroup=1833, reviews=2725, weblog=1585)),
        ("test", dict(answers=438, email=606, newsgroup=284, reviews=535, weblog=214)),
    ],
)
def test_conllu_genre_ewt_counts(split, counts):
    path = SHARED_DATA / "en/pos" / f"en_ewt-ud-{split}.conllu"
    labels: Dict[str, int] = {}
    for instance in ConlluSentenceGenreReader().read(path):
        labels[instance["label"].label] = labels.get(instance["label"].label, 0) + 1
    assert labels == counts


def test_basic_classifier_forward_on_genre_instances(tmp_path, single_thread):
    path = _write(tmp_path / "a.conllu", CONLLU_TEXT)
    instances = list(ConlluSentenceGenreReader().read(path))
    vocab, tensors = _tensors(instances)
    torch.manual_seed(0)
    model = BasicClassifier(vocab, _tiny_embedder(vocab), BagOfEmbeddingsEncoder(4))
    output = model(**tensors)
    assert math.isfinite(float(output["loss"].detach()))
    assert output["probs"].shape == (2, 2)


# -- universal_propbank_srl -----------------------------------------------------------------------


def _up_row(word_id, form, head, sense="_", *labels):
    """A Universal PropBank word line (placeholder lemma, tags and relation)."""
    conllu = [str(word_id), form, form.lower(), "X", "X", "_", str(head), "dep", "_", "_"]
    return conllu + [sense, *labels]


# The second sentence of en_ewt-up-dev.conllu (its first 10 columns shortened), two predicates.
BUSH = [
    _up_row(1, "President", 5, "_", "ARG0", "_"),
    _up_row(2, "Bush", 1, "_", "_", "_"),
    _up_row(3, "on", 4, "_", "_", "_"),
    _up_row(4, "Tuesday", 5, "_", "ARGM-TMP", "_"),
    _up_row(5, "nominated", 0, "nominate.01", "V", "_"),
    _up_row(6, "two", 7, "_", "_", "_"),
    _up_row(7, "individuals", 5, "_", "ARG1", "ARG0"),
    _up_row(8, "to", 9, "_", "_", "_"),
    _up_row(9, "replace", 5, "replace.01", "ARG2", "V"),
    _up_row(10, "retiring", 11, "_", "_", "_"),
    _up_row(11, "jurists", 9, "_", "_", "ARG1"),
    _up_row(12, "on", 14, "_", "_", "_"),
    _up_row(13, "federal", 14, "_", "_", "_"),
    _up_row(14, "courts", 11, "_", "_", "_"),
    _up_row(15, "in", 18, "_", "_", "_"),
    _up_row(16, "the", 18, "_", "_", "_"),
    _up_row(17, "Washington", 18, "_", "_", "_"),
    _up_row(18, "area", 14, "_", "_", "_"),
    _up_row(19, ".", 5, "_", "_", "_"),
]
BUSH_WORDS = [row[1] for row in BUSH]
BUSH_TAGS = [
    # nominated: [President Bush] [on Tuesday] nominated [two individuals] [to replace ... area] .
    ["B-ARG0", "I-ARG0", "B-ARGM-TMP", "I-ARGM-TMP", "B-V", "B-ARG1", "I-ARG1", "B-ARG2"]
    + ["I-ARG2"] * 10
    + ["O"],
    # replace: ... [two individuals] to replace [retiring jurists on ... area] .
    ["O"] * 5 + ["B-ARG0", "I-ARG0", "O", "B-V", "B-ARG1"] + ["I-ARG1"] * 8 + ["O"],
]

UP_TEXT = (
    "# sent_id = weblog-x-0002\n# text = President Bush on Tuesday nominated ...\n"
    + _tab(*BUSH)
    + "\n# propbank = no-up\n# sent_id = reviews-y-0001\n"
    + _tab(  # no-up: MISC "_=" and empty columns 11-12; skipped
        ["1", "unique", "unique", "ADJ", "JJ", "_", "2", "amod", "_", "_=", "", ""],
        ["2", "gifts", "gift", "NOUN", "NNS", "_", "0", "root", "_", "_=", "", ""],
    )
    + "\n# sent_id = email-z-0001\n"  # no predicate: 12 columns, the 12th empty; a multiword token
    + _tab(
        ["1-2", "Don't", "_", "_", "_", "_", "_", "_", "_", "_", "_", ""],
        _up_row(1, "Do", 0, "_", ""),
        _up_row(2, "n't", 1, "_", ""),
        _up_row(3, "!", 1, "_", ""),
    )
    # "called ... off": the particle says V (a source quirk), read as C-V. The relative
    # pronoun "who" under "man" is an argument of its own (R-ARG0), not part of ARG0.
    + "\n# sent_id = answers-w-0001\n"
    + _tab(
        _up_row(1, "The", 2, "_", "_", "_"),
        _up_row(2, "man", 7, "_", "ARG0", "ARG0"),
        _up_row(3, "who", 4, "_", "R-ARG0", "_"),
        _up_row(4, "called", 2, "call_off.02", "V", "_"),
        _up_row(5, "it", 4, "_", "ARG1", "_"),
        _up_row(6, "off", 4, "_", "V", "_"),
        _up_row(7, "left", 0, "leave.01", "_", "V"),
        _up_row(8, ".", 7, "_", "_", "_"),
    )
    # "He , she thinks , left .": the subtree of "left" for "thinks" is "He left ." around the
    # predicate, so the span is cut to "left ."; for "left", the predicate's own row says ARG1
    # (a quirk): it still gets B-V and the label is dropped.
    + "\n# sent_id = newsgroup-v-0001\n"
    + _tab(
        _up_row(1, "He", 6, "_", "_", "ARG0"),
        _up_row(2, ",", 4, "_", "_", "_"),
        _up_row(3, "she", 4, "_", "ARG0", "_"),
        _up_row(4, "thinks", 6, "think.01", "V", "_"),
        _up_row(5, ",", 4, "_", "_", "_"),
        _up_row(6, "left", 0, "leave.01", "ARG1", "ARG1"),
        _up_row(7, ".", 6, "_", "_", "_"),
    )
)

THINKS = ["He", ",", "she", "thinks", ",", "left", "."]
UP_EXPECTED = [
    # (words, verb index or None, tags)
    (BUSH_WORDS, 4, BUSH_TAGS[0]),
    (BUSH_WORDS, 8, BUSH_TAGS[1]),
    (["Do", "n't", "!"], None, ["O", "O", "O"]),
    (
        ["The", "man", "who", "called", "it", "off", "left", "."],
        3,
        ["B-ARG0", "I-ARG0", "B-R-ARG0", "B-V", "B-ARG1", "B-C-V", "O", "O"],
    ),
    (
        ["The", "man", "who", "called", "it", "off", "left", "."],
        6,
        ["B-ARG0"] + ["I-ARG0"] * 5 + ["B-V", "O"],
    ),
    (THINKS, 3, ["O", "O", "B-ARG0", "B-V", "O", "B-ARG1", "I-ARG1"]),
    (THINKS, 5, ["B-ARG0", "O", "O", "O", "O", "B-V", "O"]),
]


def test_propbank_frame_to_bio_on_the_bush_sentence():
    heads = [int(row[6]) for row in BUSH]
    for j, predicate in enumerate([4, 8]):
        conversion = propbank_frame_to_bio(heads, predicate, [row[11 + j] for row in BUSH])
        assert conversion.tags == BUSH_TAGS[j]
        assert conversion.dropped == [] and conversion.cut_spans == 0


def test_universal_propbank_fixture(tmp_path):
    path = _write(tmp_path / "up.conllu", UP_TEXT)
    reader = DatasetReader.from_params(Params({"type": "universal_propbank_srl"}))
    instances = list(reader.read(path))
    assert len(instances) == len(UP_EXPECTED)
    for instance, (words, verb_index, tags) in zip(instances, UP_EXPECTED):
        assert set(instance.fields) == {"tokens", "verb_indicator", "tags", "metadata"}
        assert _texts(instance) == words
        assert instance["tags"].labels == tags
        assert instance["verb_indicator"].labels == [
            int(index == verb_index) for index in range(len(words))
        ]
        assert instance["metadata"].metadata == {
            "words": words,
            "verb": None if verb_index is None else words[verb_index],
            "verb_index": verb_index,
            "gold_tags": tags,
        }
    assert reader.last_read_stats == PropBankReadStats(
        sentences=5,
        skipped_no_up=1,
        sentences_without_predicate=1,
        predicates=6,
        arguments=14,
        dropped_arguments=1,
        v_on_other_rows=1,
        cut_spans=1,
    )


def test_universal_propbank_matches_srl_reader_text_to_instance():
    """Same fields, labels and metadata as allennlp-models' SrlReader for the same input."""
    from allennlp.data.tokenizers import Token
    from allennlp_models.structured_prediction.dataset_readers.srl import SrlReader

    tokens = [Token(word) for word in BUSH_WORDS]
    verb_label = [int(index == 4) for index in range(len(tokens))]
    ours = UniversalPropBankSrlReader().text_to_instance(tokens, verb_label, BUSH_TAGS[0])
    theirs = SrlReader().text_to_instance(tokens, verb_label, BUSH_TAGS[0])
    assert set(ours.fields) == set(theirs.fields)
    for name in ("verb_indicator", "tags"):
        assert ours[name].labels == theirs[name].labels
        assert ours[name]._label_namespace == theirs[name]._label_namespace
    assert ours["metadata"].metadata == theirs["metadata"].metadata


@pytest.mark.parametrize(
    "old, new, line, message",
    [
        (  # the line of "on" loses a column
            "\t4\tdep\t_\t_\t_\t_\t_\n4\tTuesday\t",
            "\t4\tdep\t_\t_\t_\t_\n4\tTuesday\t",
            5,
            "12 tab-separated columns, but the sentence has 2 predicate",
        ),
        ("3\ton\ton\tX\tX\t_\t4", "3\ton\ton\tX\tX\t_\t40", 5, "HEAD '40' is not a word"),
        ("3\ton\ton\tX\tX\t_\t4", "3\ton\ton\tX\tX\t_\tx", 5, "HEAD 'x' is not a word"),
        ("3\ton\ton\t", "3.x\ton\ton\t", 5, "is not an integer"),
    ],
)
def test_universal_propbank_errors_name_file_and_line(tmp_path, old, new, line, message):
    assert UP_TEXT.count(old) == 1
    path = _write(tmp_path / "bad.conllu", UP_TEXT.replace(old, new))
    with pytest.raises(ConfigurationError, match=_at(path, line) + ".*(" + message + ")"):
        list(UniversalPropBankSrlReader().read(path))


def test_universal_propbank_plain_conllu_is_an_error(tmp_path):
    path = _write(tmp_path / "plain.conllu", CONLLU_TEXT)
    with pytest.raises(ConfigurationError, match=_at(path, 4) + " 10 tab-separated columns"):
        list(UniversalPropBankSrlReader().read(path))


@pytest.mark.parametrize("only_no_up", [False, True])
def test_universal_propbank_file_without_instances_is_an_error(tmp_path, only_no_up):
    text = UP_TEXT[UP_TEXT.index("# propbank = no-up") : UP_TEXT.index("# sent_id = email")]
    path = _write(tmp_path / "none.conllu", text if only_no_up else "")
    with pytest.raises(ConfigurationError, match=re.escape(f"{path}: no SRL instances")):
        list(UniversalPropBankSrlReader().read(path))


def _is_bio(tags: List[str]) -> bool:
    previous = "O"
    for tag in tags:
        if tag.startswith("I-") and previous[2:] != tag[2:]:
            return False
        previous = tag
    return True


@needs_shared_data
@pytest.mark.parametrize(
    "split, sentences, no_up, predicates, without_predicate, dropped",
    [("dev", 2_002, 28, 4_977, 438, 1), ("test", 2_077, 15, 4_799, 524, 0)],
)
def test_universal_propbank_ewt_counts(
    split, sentences, no_up, predicates, without_predicate, dropped
):
    reader = UniversalPropBankSrlReader()
    instances = list(reader.read(SHARED_DATA / "en/srl/up_ewt" / f"en_ewt-up-{split}.conllu"))
    stats = reader.last_read_stats
    assert stats.sentences == sentences
    assert stats.skipped_no_up == no_up
    assert stats.predicates == predicates
    # 1,536 (dev) and 1,538 (test) sentences have predicates (shared/data/README.md).
    assert stats.sentences_without_predicate == without_predicate
    assert len(instances) == predicates + without_predicate
    assert stats.dropped_arguments == dropped
    with_verb = [i for i in instances if i["metadata"]["verb_index"] is not None]
    assert len(with_verb) == predicates
    for instance in with_verb:
        tags = instance["tags"].labels
        assert tags.count("B-V") == 1 and tags[instance["metadata"]["verb_index"]] == "B-V"
        assert sum(instance["verb_indicator"].labels) == 1
        assert _is_bio(tags)


def test_semantic_role_labeler_forward_on_propbank_instances(tmp_path, single_thread):
    from allennlp_models.structured_prediction.models.srl import SemanticRoleLabeler

    path = _write(tmp_path / "up.conllu", UP_TEXT)
    instances = list(UniversalPropBankSrlReader().read(path))
    vocab = Vocabulary.from_instances(instances)
    assert "B-R-ARG0" in vocab.get_token_to_index_vocabulary("labels")
    # Lengths 19 and 3 (padding); the second has no predicate (verb_index None).
    batch = Batch([instances[0], instances[2]])
    batch.index_instances(vocab)
    tensors = batch.as_tensor_dict()
    assert tensors["verb_indicator"].tolist()[1] == [0] * 19
    torch.manual_seed(0)
    model = SemanticRoleLabeler(
        vocab,
        _tiny_embedder(vocab),
        PytorchSeq2SeqWrapper(torch.nn.LSTM(4 + 2, 3, batch_first=True, bidirectional=True)),
        binary_feature_dim=2,
        ignore_span_metric=shutil.which("perl") is None,
    )
    output = model(**tensors)
    assert math.isfinite(float(output["loss"].detach()))
    if shutil.which("perl"):
        # Evaluation mode runs the official srl-eval.pl on the metadata (verb_index, gold_tags).
        model.eval()
        with torch.no_grad():
            output = model(**tensors)
        assert math.isfinite(float(output["loss"].detach()))
        assert "f1-measure-overall" in model.get_metrics(reset=True)


def test_readers_shard_over_workers(tmp_path):
    files = {
        "token_tag_conll": _write(tmp_path / "ner.txt", TOKEN_TAG_TEXT),
        "conllu_tagging": _write(tmp_path / "a.conllu", CONLLU_TEXT),
        "conllu_sentence_genre": _write(tmp_path / "a.conllu", CONLLU_TEXT),
        "universal_propbank_srl": _write(tmp_path / "up.conllu", UP_TEXT),
    }
    for name, path in files.items():
        everything = [
            (_texts(i), i["metadata"]["words"]) for i in DatasetReader.by_name(name)().read(path)
        ]
        shards = []
        for worker in range(2):
            reader = DatasetReader.by_name(name)()
            reader._set_worker_info(WorkerInfo(2, worker))
            shards.append([(_texts(i), i["metadata"]["words"]) for i in reader.read(path)])
        assert shards[0] == everything[0::2] and shards[1] == everything[1::2], name
