"""
``universal_propbank_srl``: Universal PropBank (UP 1.0) CoNLL-U files read as span-based semantic
role labelling instances laid out as allennlp-models' ``srl`` reader lays out CoNLL-2012, for its
``srl`` model unchanged. `propbank_frame_to_bio` turns UP's head labels into spans.
"""
import logging
from dataclasses import dataclass
from typing import Dict, Iterator, List, Optional, Sequence, Set, Tuple

from allennlp.common.checks import ConfigurationError
from allennlp.data.dataset_readers.dataset_reader import DatasetReader
from allennlp.data.fields import Field, MetadataField, SequenceLabelField
from allennlp.data.instance import Instance
from allennlp.data.token_indexers import TokenIndexer
from allennlp.data.tokenizers import Token

from elmo_plugin.tasks.common.sharded_task_reader import ShardedTaskReader, no_instance_error, tokens_and_metadata
from elmo_plugin.tasks.common.task_data import task_data_path
from elmo_plugin.tasks.universal_dependencies.conllu import CONLLU_COLUMNS, HEAD, ConlluSentence, read_conllu_sentences

logger = logging.getLogger(__name__)

# 0-based column of the predicate sense (column 11); predicate j's labels are in SENSE + 1 + j.
SENSE = CONLLU_COLUMNS
NO_LABEL = ("_", "")
VERB = "V"
SPLIT_VERB = "C-V"


@dataclass
class PropBankReadStats:
    """What the last pass of `UniversalPropBankSrlReader` saw of the whole file, whatever the shard."""

    sentences: int = 0
    skipped_no_up: int = 0
    sentences_without_predicate: int = 0
    predicates: int = 0
    arguments: int = 0
    # Labels that gave no span: the predicate's own row labelled something other than V.
    dropped_arguments: int = 0
    # A V label on a row other than the predicate's (a phrasal verb's particle), read as C-V.
    v_on_other_rows: int = 0
    # Arguments whose (pruned) subtree is not contiguous, so the span is shorter than it.
    cut_spans: int = 0


@dataclass
class FrameConversion:
    """`propbank_frame_to_bio`'s result: the tags and what did not go smoothly."""

    tags: List[str]
    arguments: int
    dropped: List[Tuple[int, str]]  # (word index, label) of labels that gave no span
    v_on_other_rows: int
    cut_spans: int


def propbank_frame_to_bio(heads: Sequence[int], predicate: int, labels: Sequence[str]) -> FrameConversion:
    """
    One predicate's UP labels as BIO span tags (the heuristic of `UniversalPropBankSrlReader`), from
    ``heads`` (the HEAD column: 1-based, 0 for the root), the ``predicate``'s 0-based word index and
    its ``labels``, one per word (``_`` or empty for none).
    """
    num_words = len(heads)
    tags = ["O"] * num_words
    tags[predicate] = f"B-{VERB}"
    arguments: List[Tuple[int, str]] = []
    dropped: List[Tuple[int, str]] = []
    v_on_other_rows = cut_spans = 0
    for index, label in enumerate(labels):
        if label in NO_LABEL:
            continue
        if index == predicate:
            if label != VERB:  # a source quirk: the predicate row carries another label
                dropped.append((index, label))
            continue
        if label == VERB:  # the other part of a phrasal verb ("break ... through"), elsewhere C-V
            label = SPLIT_VERB
            v_on_other_rows += 1
        arguments.append((index, label))

    children: List[List[int]] = [[] for _ in range(num_words)]
    for index, head in enumerate(heads):
        if head > 0:
            children[head - 1].append(index)
    # Arguments do not nest: a labelled word in another head's subtree (a relative pronoun under its
    # noun) is an argument of its own.
    stops: Set[int] = {predicate, *(index for index, _ in arguments)}
    taken = [False] * num_words
    taken[predicate] = True
    for head, label in arguments:  # in sentence order
        if taken[head]:  # cannot happen on a tree; guards against cyclic HEAD columns
            dropped.append((head, label))
            continue
        subtree, stack = {head}, [head]
        while stack:
            for child in children[stack.pop()]:
                if child not in subtree and child not in stops:
                    subtree.add(child)
                    stack.append(child)
        start = end = head
        while start > 0 and start - 1 in subtree and not taken[start - 1]:
            start -= 1
        while end + 1 < num_words and end + 1 in subtree and not taken[end + 1]:
            end += 1
        if end - start + 1 < len(subtree):
            cut_spans += 1
        for index in range(start, end + 1):
            taken[index] = True
            tags[index] = ("B-" if index == start else "I-") + label
    return FrameConversion(tags, len(arguments), dropped, v_on_other_rows, cut_spans)


@DatasetReader.register("universal_propbank_srl")
class UniversalPropBankSrlReader(ShardedTaskReader):
    """
    Reads Universal PropBank CoNLL-U files (column 11 the predicate sense, column 11 + j the labels
    of the j-th predicate), one instance per predicate, with `SrlReader`'s fields: ``tokens``,
    ``verb_indicator``, ``tags`` (BIO, ``labels`` namespace) and ``metadata``. A sentence without
    predicates gives one all-``O`` instance; ``# propbank = no-up`` ones are skipped (counts in
    ``last_read_stats``). From heads to spans, a heuristic, for each predicate:

    1. The predicate's word gets ``B-V`` (another label on its own row is dropped and counted).
    2. Every other labelled word is an argument head; a ``V`` on another row (a phrasal verb's
       particle) is read as ``C-V``, as the data labels it elsewhere; ``C-``/``R-`` labels stay.
    3. In sentence order, a head's span is its dependency subtree, not descending into the
       predicate or another argument head (arguments do not nest), cut to the contiguous run
       around the head free of the predicate and of earlier spans (the rest: cut spans, ``O``).

    The ``verb_indicator`` marks the predicate only (`SrlReader` marks ``C-V`` words too, which
    would give the model part of the answer; the ``srl`` predictor marks just the verb).

    # Parameters

    token_indexers : `Dict[str, TokenIndexer]`, optional (default = `{"tokens": SingleIdTokenIndexer()}`)
        How to index the words.
    **kwargs
        `DatasetReader`'s ``max_instances`` and ``serialization_dir``; the reader shards itself.

    # Raises

    `ConfigurationError` ``path:line: ...`` for format errors, columns that do not fit the
    sentence's predicates, or a HEAD outside the sentence; ``path: ...`` for no instance at all.
    """

    def __init__(self, token_indexers: Optional[Dict[str, TokenIndexer]] = None, **kwargs) -> None:
        # No label_namespace: the srl model reads "labels", so a config's label_namespace is an error.
        super().__init__(token_indexers, label_namespace="labels", **kwargs)
        self.last_read_stats = PropBankReadStats()

    def _read(self, file_path) -> Iterator[Instance]:
        path = task_data_path(file_path)
        for words, verb_label, tags in self.shard_iterable(self._frames(path)):
            yield self.text_to_instance([Token(word) for word in words], verb_label, tags)

    def _frames(self, path: str) -> Iterator[Tuple[List[str], List[int], List[str]]]:
        # Converted before sharding (cheap), so that every shard checks the whole file and counts it.
        stats = PropBankReadStats()
        self.last_read_stats = stats
        for sentence in read_conllu_sentences(path):
            stats.sentences += 1
            if sentence.comments.get("propbank") == "no-up":
                stats.skipped_no_up += 1
                continue
            words = sentence.words
            heads = _heads(path, sentence)
            predicates = [i for i, row in enumerate(sentence.rows) if len(row) > SENSE and row[SENSE] not in NO_LABEL]
            _check_columns(path, sentence, len(predicates))
            if not predicates:
                stats.sentences_without_predicate += 1
                yield words, [0] * len(words), ["O"] * len(words)
                continue
            for j, predicate in enumerate(predicates):
                labels = [row[SENSE + 1 + j] for row in sentence.rows]
                conversion = propbank_frame_to_bio(heads, predicate, labels)
                stats.predicates += 1
                stats.arguments += conversion.arguments
                stats.dropped_arguments += len(conversion.dropped)
                stats.v_on_other_rows += conversion.v_on_other_rows
                stats.cut_spans += conversion.cut_spans
                for index, label in conversion.dropped:
                    logger.debug(
                        "%s:%d: predicate %d's label %s on word %d gave no span",
                        path, sentence.line_numbers[index], j + 1, label, index + 1,
                    )
                yield words, [int(index == predicate) for index in range(len(words))], conversion.tags
        if stats.sentences == stats.skipped_no_up:  # no instance
            raise no_instance_error(path, "SRL instances", " (no sentences, or only '# propbank = no-up' ones)")
        logger.info(
            "%s: %d sentences, %d skipped as '# propbank = no-up', %d predicates, %d "
            "sentences without predicates; %d argument labels, %d dropped (on the predicate's "
            "own row), %d V labels on other rows read as C-V, %d spans cut short "
            "(non-contiguous subtree)", path, stats.sentences, stats.skipped_no_up, stats.predicates,
            stats.sentences_without_predicate, stats.arguments, stats.dropped_arguments, stats.v_on_other_rows,
            stats.cut_spans,
        )

    def text_to_instance(  # type: ignore
        self, tokens: List[Token], verb_label: List[int], tags: Optional[List[str]] = None
    ) -> Instance:
        """`SrlReader.text_to_instance` (non-BERT): ``verb_label`` the 0/1 predicate indicator, ``tags``
        the gold BIO tags (none when predicting)."""
        text_field, metadata = tokens_and_metadata(tokens)
        fields: Dict[str, Field] = {"tokens": text_field, "verb_indicator": SequenceLabelField(verb_label, text_field)}
        verb_index = verb_label.index(1) if 1 in verb_label else None
        metadata["verb"] = None if verb_index is None else tokens[verb_index].text
        metadata["verb_index"] = verb_index
        if tags:
            fields["tags"] = SequenceLabelField(tags, text_field)
            metadata["gold_tags"] = tags
        fields["metadata"] = MetadataField(metadata)
        return Instance(fields)


def _heads(path: str, sentence: ConlluSentence) -> List[int]:
    heads = []
    for row, line_number in zip(sentence.rows, sentence.line_numbers):
        head = row[HEAD]
        if not head.isdigit() or int(head) > len(sentence.rows):
            raise ConfigurationError(
                f"{path}:{line_number}: HEAD {head!r} is not a word of the sentence (0 to "
                f"{len(sentence.rows)})"
            )
        heads.append(int(head))
    return heads


def _check_columns(path: str, sentence: ConlluSentence, num_predicates: int) -> None:
    """Every word line must have exactly the columns of the sentence's predicates (one too few or too
    many would give labels silently to the wrong predicate)."""
    # Without predicates, an empty 12th column (a trailing TAB) may follow the sense column.
    expected = f"{SENSE + 1 + num_predicates}" if num_predicates else f"{SENSE + 1} (or {SENSE + 2}, the last empty)"
    for row, line_number in zip(sentence.rows, sentence.line_numbers):
        empty_12th = not num_predicates and len(row) == SENSE + 2 and row[SENSE + 1] in NO_LABEL
        if len(row) != SENSE + 1 + num_predicates and not empty_12th:
            raise ConfigurationError(
                f"{path}:{line_number}: {len(row)} tab-separated columns, but the sentence "
                f"has {num_predicates} predicate(s), so Universal PropBank needs {expected} "
                "(10 CoNLL-U columns, the predicate sense, one label column per predicate)"
            )
