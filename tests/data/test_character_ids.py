"""
The character-id contract (bilm-tf's UnicodeCharsVocabulary: UTF-8 bytes + 1, begin and end of
word, padding) and the ``elmo_characters`` token indexer.
"""
import pytest
import torch
from allennlp.common import Params
from allennlp.data import Batch, Instance, Token, Vocabulary
from allennlp.data.fields import TextField
from allennlp.data.token_indexers import TokenIndexer
from allennlp.data.token_indexers.elmo_indexer import ELMoTokenCharactersIndexer

import elmo_plugin  # noqa: F401  (registers the plugin's "elmo_characters")
from elmo_plugin.data.character_ids import ElmoCharacterIds, batch_to_ids
from elmo_plugin.data.token_indexers.elmo_characters_indexer import ElmoCharactersIndexer
from tests.helpers import KOREAN_LONG, LONG_TOKEN, VARIED_BATCH

# +1-shifted special ids: BOW 258 -> 259, EOW 259 -> 260, PAD 260 -> 261, <S> 256 -> 257, </S> 258.
BOW, EOW, PAD = 259, 260, 261


def padded(ids, width):
    return ids + [PAD] * (width - len(ids))


def test_hello_by_hand():
    # h e l l o = 104 101 108 108 111, each +1
    expected = padded([BOW, 105, 102, 109, 109, 112, EOW], 50)
    assert ElmoCharacterIds(50).token_to_ids("hello") == expected
    assert ElmoCharacterIds(30).token_to_ids("hello") == padded([BOW, 105, 102, 109, 109, 112, EOW], 30)


def test_korean_is_encoded_as_utf8_bytes():
    # 밥 = U+BC25 = bytes EB B0 A5 = 235 176 165 (not the code point 48165)
    assert "밥".encode("utf-8") == bytes([235, 176, 165])
    assert ElmoCharacterIds(50).token_to_ids("밥") == padded([BOW, 236, 177, 166, EOW], 50)
    assert ElmoCharacterIds(30).token_to_ids("밥") == padded([BOW, 236, 177, 166, EOW], 30)


def test_sentence_markers():
    for width in (50, 30):
        mapper = ElmoCharacterIds(width)
        assert mapper.token_to_ids("<S>") == padded([BOW, 257, EOW], width)
        assert mapper.token_to_ids("</S>") == padded([BOW, 258, EOW], width)
        assert mapper.beginning_of_sentence_ids == padded([BOW, 257, EOW], width)
        assert mapper.end_of_sentence_ids == padded([BOW, 258, EOW], width)


@pytest.mark.parametrize("width", [50, 30])
def test_truncation_keeps_max_chars_minus_2_bytes(width):
    mapper = ElmoCharacterIds(width)
    for token in [LONG_TOKEN, KOREAN_LONG * 2, "a" * (width - 2), "a" * (width - 1)]:
        data = token.encode("utf-8")
        kept = data[: width - 2]
        ids = mapper.token_to_ids(token)
        assert len(ids) == width
        assert ids == padded([BOW] + [b + 1 for b in kept] + [EOW], width)
        if len(data) >= width - 2:
            assert ids[-1] == EOW and PAD not in ids  # completely filled
    # Exactly max_chars - 2 bytes: nothing cut; one more: the last byte is dropped.
    assert mapper.token_to_ids("a" * (width - 2)) == mapper.token_to_ids("a" * (width + 5))
    assert mapper.token_to_ids("a" * (width - 3)) != mapper.token_to_ids("a" * (width - 2))


def test_truncation_may_cut_a_korean_character_at_30():
    ids = ElmoCharacterIds(30).token_to_ids(KOREAN_LONG)  # 33 bytes
    body = bytes(i - 1 for i in ids[1:29])
    assert body == KOREAN_LONG.encode("utf-8")[:28]  # 9 syllables and 1 byte of the 10th
    assert ids[29] == EOW


def test_tokens_to_add():
    mapper = ElmoCharacterIds(30, tokens_to_add={"@@UNKNOWN@@": 7})
    assert mapper.token_to_ids("@@UNKNOWN@@") == padded([BOW, 8, EOW], 30)
    assert mapper.token_to_ids("other") == ElmoCharacterIds(30).token_to_ids("other")


def test_batch_to_ids_pads_with_zero_rows():
    batch = [["hello", "밥"], [], ["a"]]
    for width in (50, 30):
        ids = ElmoCharacterIds(width).batch_to_ids(batch)
        assert ids.dtype == torch.long and ids.shape == (3, 2, width)
        mapper = ElmoCharacterIds(width)
        assert ids[0, 0].tolist() == mapper.token_to_ids("hello")
        assert ids[0, 1].tolist() == mapper.token_to_ids("밥")
        assert ids[2, 0].tolist() == mapper.token_to_ids("a")
        assert not ids[1].any() and not ids[2, 1].any()  # padding: all zeros
        # No sentence boundaries are added here.
        assert ids[0, 0].tolist() != mapper.beginning_of_sentence_ids
    assert torch.equal(batch_to_ids(batch), ElmoCharacterIds(50).batch_to_ids(batch))
    assert batch_to_ids([]).shape == (0, 0, 50)


def test_too_small_width_is_rejected():
    with pytest.raises(ValueError):
        ElmoCharacterIds(3)


# -- the elmo_characters indexer -------------------------------------------------------------


def tokens(words):
    return [Token(w) for w in words]


def test_registered_name_is_ours():
    assert TokenIndexer.by_name("elmo_characters") is ElmoCharactersIndexer
    indexer = TokenIndexer.from_params(Params({"type": "elmo_characters"}))
    assert isinstance(indexer, ElmoCharactersIndexer)
    assert indexer.max_characters_per_token == 50


def test_from_params_with_30_characters_pads_with_zero_rows():
    indexer = TokenIndexer.from_params(
        Params({"type": "elmo_characters", "max_characters_per_token": 30})
    )
    assert isinstance(indexer, ElmoCharactersIndexer)
    words = ["아버지가방에들어가신다", "밥", "."]
    indexed = indexer.tokens_to_indices(tokens(words), Vocabulary())
    mapper = ElmoCharacterIds(30)
    assert indexed["elmo_tokens"] == [mapper.token_to_ids(w) for w in words]
    assert all(len(row) == 30 for row in indexed["elmo_tokens"])
    assert indexer.get_padding_lengths(indexed) == {"elmo_tokens": 3}
    tensor = indexer.as_padded_tensor_dict(indexed, {"elmo_tokens": 5})["elmo_tokens"]
    assert tensor.shape == (5, 30) and tensor.dtype == torch.long
    assert tensor[:3].tolist() == indexed["elmo_tokens"]
    assert not tensor[3:].any()
    # Through a TextField and a Batch: the same as batch_to_ids.
    sentences = [words, ["짧다"]]
    instances = [Instance({"text": TextField(tokens(s), {"elmo": indexer})}) for s in sentences]
    batch = Batch(instances)
    batch.index_instances(Vocabulary())
    tensors = batch.as_tensor_dict()["text"]["elmo"]["elmo_tokens"]
    assert torch.equal(tensors, mapper.batch_to_ids(sentences))


def test_same_output_as_allennlps_indexer_at_50():
    words = ["hello", "밥", KOREAN_LONG, LONG_TOKEN, "<S>", "</S>", "@@PADDING@@", "😀", "special"]
    ours = ElmoCharactersIndexer(tokens_to_add={"special": 3})
    theirs = ELMoTokenCharactersIndexer(tokens_to_add={"special": 3})
    vocab = Vocabulary()
    ours_indexed = ours.tokens_to_indices(tokens(words), vocab)
    theirs_indexed = theirs.tokens_to_indices(tokens(words), vocab)
    assert ours_indexed == theirs_indexed
    assert ours.get_padding_lengths(ours_indexed) == theirs.get_padding_lengths(theirs_indexed)
    lengths = {"elmo_tokens": len(words) + 3}
    a = ours.as_padded_tensor_dict(ours_indexed, lengths)
    b = theirs.as_padded_tensor_dict(theirs_indexed, lengths)
    assert a.keys() == b.keys()
    assert torch.equal(a["elmo_tokens"], b["elmo_tokens"])
    assert ours.get_empty_token_list() == theirs.get_empty_token_list()
    # And on the shared test batch.
    for sentence in VARIED_BATCH:
        assert ours.tokens_to_indices(tokens(sentence), vocab) == theirs.tokens_to_indices(
            tokens(sentence), vocab
        )
