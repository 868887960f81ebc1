"""
``klue_ner``: KLUE-NER (Korean named entities, BIO-tagged per character) read as Mecab morphemes,
the Korean biLM's tokens, tagged from the entities they overlap (`morpheme_tags`); the gold
entities stay character spans in the metadata, so that the model is scored on characters as KLUE
scores it (`elmo_plugin.tasks.klue_ner.metric`). docs/korean.md, "KLUE-NER", has the details.
"""
import logging
import random
import re
from dataclasses import dataclass
from typing import Dict, Iterator, List, Optional, Sequence, Tuple

from allennlp.common.checks import ConfigurationError
from allennlp.data.dataset_readers.dataset_reader import DatasetReader
from allennlp.data.instance import Instance
from allennlp.data.token_indexers import TokenIndexer
from allennlp.data.tokenizers import Token, Tokenizer

from elmo_plugin.common.text_files import decoded_lines
from elmo_plugin.korean.tokenizers import MecabKoTokenizer
from elmo_plugin.tasks.common.sharded_task_reader import ShardedTaskReader, at_least_one, no_instance_error
from elmo_plugin.tasks.common.task_data import task_data_path
from elmo_plugin.tasks.klue_ner.metric import CharSpan

logger = logging.getLogger(__name__)

# "train.tsv[:90%]", "train.tsv[90%:]": a part of a file's sentences (see `select_part`).
_PART = re.compile(r"^(?P<path>.*)\[(?P<start>\d*)%?:(?P<end>\d*)%?\]$")
# The order in which `select_part` cuts a file: a fixed permutation, so that the parts of a
# KLUE file (whose sentences are grouped by source, news then reviews) are alike.
PART_SEED = 13


@dataclass
class KlueSentence:
    """One sentence of a KLUE-NER file: its id (if the file has one), text and tags per character."""

    sentence_id: Optional[str]
    text: str
    char_tags: List[str]
    line: int  # the 1-based line of its first character, for messages


@dataclass
class MorphemeTagStats:
    """How well the morphemes of a pass fit KLUE's entities (logged after each pass)."""

    sentences: int = 0
    morphemes: int = 0
    entities: int = 0
    crossing_morphemes: int = 0  # holding characters of an entity and outside it (or of two entities)
    unreachable_entities: int = 0  # not the span of the morphemes tagged with it: a perfect tagger misses them


def char_tags_to_spans(char_tags: Sequence[str], where: str = "") -> List[CharSpan]:
    """
    The entities of BIO (IOB2) tags as ``(start, end exclusive, type)`` spans. An ``I-X`` that does
    not continue an ``X`` starts an entity (seqeval's strict IOB2 would drop it; KLUE's gold has none).
    """
    spans: List[CharSpan] = []
    start, kind = -1, None
    for index, tag in enumerate(list(char_tags) + ["O"]):
        if tag == "O" or tag.startswith("B-") or (tag.startswith("I-") and tag[2:] != kind):
            if kind is not None:
                spans.append((start, index, kind))
            start, kind = (index, tag[2:]) if tag != "O" else (-1, None)
        elif not tag.startswith("I-"):
            raise ConfigurationError(f"{where}unknown tag {tag!r} (expected O, B-TYPE or I-TYPE)")
    return spans


def morpheme_tags(
    token_spans: Sequence[Tuple[int, int]],
    entities: Sequence[CharSpan],
    stats: Optional[MorphemeTagStats] = None,
) -> List[str]:
    """
    BIO tags for the morphemes at character spans ``token_spans`` (``end`` exclusive): ``B-TYPE``
    for the first morpheme that overlaps an entity, ``I-TYPE`` for the others, ``O`` for none. A
    morpheme over two entities keeps the first's tag; one that also holds characters outside its
    entity (``박씨`` for the entity ``박``) crosses a boundary. ``stats`` counts both.
    """
    tags = ["O"] * len(token_spans)
    owner: List[Optional[int]] = [None] * len(token_spans)
    for number, (start, end, kind) in enumerate(entities):
        covering = [
            i for i, (token_start, token_end) in enumerate(token_spans)
            if token_start < end and start < token_end
        ]
        free = [i for i in covering if owner[i] is None]
        for position, i in enumerate(free):
            tags[i] = ("B-" if position == 0 else "I-") + kind
            owner[i] = number
        if stats is not None:
            stats.entities += 1
            mapped = (token_spans[free[0]][0], token_spans[free[-1]][1]) if free else None
            if mapped != (start, end) or len(free) != len(covering):
                stats.unreachable_entities += 1
    if stats is not None:
        stats.sentences += 1
        stats.morphemes += len(token_spans)
        for token_start, token_end in token_spans:
            inside = [(start, end) for start, end, _ in entities if token_start < end and start < token_end]
            if len(inside) > 1 or any(token_start < start or end < token_end for start, end in inside):
                stats.crossing_morphemes += 1
    return tags


def read_klue_ner(path: str) -> Iterator[KlueSentence]:
    """
    Yields the sentences of a KLUE-NER file, in KLUE's own layout (``## <id><TAB><text>``, then one
    ``character<TAB>tag`` line per character, spaces included) or CoNLL's (``▁`` for a space).

    # Raises

    `ConfigurationError` ``path:line: ...`` for a line that is not ``character<TAB>tag``.
    """
    sentence_id: Optional[str] = None
    chars: List[str] = []
    tags: List[str] = []
    first_line = 0
    for line_index, text, _ in decoded_lines(path):
        line = text.rstrip("\r\n")
        if line.startswith("## "):
            header = line[3:].split("\t", 1)
            if len(header) == 2:  # "## <id>\t<text>": the next sentence's id
                sentence_id = header[0]
            continue
        if line == "":
            if chars:
                yield KlueSentence(sentence_id, "".join(chars), tags, first_line)
                sentence_id, chars, tags = None, [], []
            continue
        # The character may itself be a space (KLUE's layout), so split on the last TAB.
        char, tab, tag = line.rpartition("\t")
        if not tab or len(char) != 1 or not tag:
            raise ConfigurationError(f"{path}:{line_index + 1}: expected one character, a TAB and a tag: {line[:80]!r}")
        if not chars:
            first_line = line_index + 1
        chars.append(" " if char == "\u2581" else char)
        tags.append(tag)
    if chars:
        yield KlueSentence(sentence_id, "".join(chars), tags, first_line)


def select_part(items: List, start: Optional[float], end: Optional[float]) -> List:
    """The items from ``start``% to ``end``% (`None`: 0 and 100) of a fixed permutation of ``items``,
    in their file order: ``[:90%]`` and ``[90%:]`` are disjoint and together the whole file."""
    order = list(range(len(items)))
    random.Random(PART_SEED).shuffle(order)
    low = round(len(items) * (start or 0) / 100)
    high = round(len(items) * (100 if end is None else end) / 100)
    return [items[i] for i in sorted(order[low:high])]


@DatasetReader.register("klue_ner")
class KlueNerReader(ShardedTaskReader):
    """
    Reads KLUE-NER (`read_klue_ner`) into one instance per sentence, with the fields
    ``character_span_crf_tagger`` takes: ``tokens`` (morphemes), ``tags`` (`morpheme_tags`) and
    ``metadata`` (with the text, the token and the gold character spans). A path may end in
    ``[A%:B%]`` to read part of a file (`select_part`; KLUE's split has no validation set).

    # Parameters

    tokenizer : `Tokenizer`, optional (default = `MecabKoTokenizer()`, i.e. ``{"type": "korean"}``)
        The biLM's morpheme tokenizer; its tokens must carry character offsets (``idx``).
    token_indexers : `Dict[str, TokenIndexer]`, optional (default = `{"tokens": SingleIdTokenIndexer()}`)
    label_namespace : `str`, optional (default = `"labels"`)
    **kwargs
        `DatasetReader`'s ``max_instances`` and ``serialization_dir``.
    """

    def __init__(
        self, tokenizer: Optional[Tokenizer] = None, token_indexers: Optional[Dict[str, TokenIndexer]] = None,
        label_namespace: str = "labels", **kwargs,
    ) -> None:
        super().__init__(token_indexers=token_indexers, label_namespace=label_namespace, **kwargs)
        self._tokenizer = tokenizer or MecabKoTokenizer()

    def _read(self, file_path) -> Iterator[Instance]:
        part = _PART.match(str(file_path))
        if part:
            file_path = part.group("path")
            start, end = (float(bound) if bound else None for bound in part.group("start", "end"))
        path = task_data_path(file_path)
        error = no_instance_error(path, "sentences", " (expected character<TAB>tag lines)")
        sentences = list(at_least_one(read_klue_ner(path), error))
        if part:
            sentences = select_part(sentences, start, end)
            logger.info("%s: sentences %s%% to %s%%: %d", path, start or 0, end or 100, len(sentences))
        stats = MorphemeTagStats()
        for sentence in self.shard_iterable(sentences):
            spans = char_tags_to_spans(sentence.char_tags, f"{path}:{sentence.line}: ")
            yield self.text_to_instance(sentence.text, spans, sentence.sentence_id, stats)
        if stats.sentences:
            logger.info(
                "%s: %d sentences, %d morphemes, %d entities; %d morphemes cross an entity "
                "boundary; %d entities (%.2f%%) do not map to whole morphemes",
                path, stats.sentences, stats.morphemes, stats.entities, stats.crossing_morphemes,
                stats.unreachable_entities, 100 * stats.unreachable_entities / max(stats.entities, 1),
            )

    def tokenize(self, text: str) -> Tuple[List[Token], List[Tuple[int, int]]]:
        """The morphemes of ``text`` and their character spans."""
        tokens = [token for token in self._tokenizer.tokenize(text) if token.idx is not None]
        return tokens, [
            (token.idx, token.idx + len(token.text) if token.idx_end is None else token.idx_end) for token in tokens
        ]

    def text_to_instance(  # type: ignore
        self, text: str, gold_spans: Optional[List[CharSpan]] = None, sentence_id: Optional[str] = None,
        stats: Optional[MorphemeTagStats] = None,
    ) -> Instance:
        """``text`` is a sentence; ``gold_spans`` its entities as character spans (none when predicting)."""
        tokens, spans = self.tokenize(text)
        if not tokens:
            raise ConfigurationError(f"the sentence {sentence_id or text[:40]!r} has no morpheme")
        tags = None if gold_spans is None else morpheme_tags(spans, gold_spans, stats)
        return super().text_to_instance(
            tokens, tags, text=text, token_spans=spans, gold_spans=gold_spans, sentence_id=sentence_id
        )

