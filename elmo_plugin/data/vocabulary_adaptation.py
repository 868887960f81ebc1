"""
A source biLM's vocabulary made right for a new corpus (`adapt_vocabulary`): the source's words
re-sorted by the new corpus's counts, the order that the sampled softmax's log-uniform sampler
assumes, and optionally extended with the new corpus's frequent words. The model keeps every
word's softmax row whatever its new place (`elmo_plugin.models.language_model_source`), so the
re-sorted model is the source model exactly.
"""
import logging
import math
from dataclasses import dataclass
from typing import Dict, List, Optional, Sequence

from allennlp.common.checks import ConfigurationError

from elmo_plugin.data.vocabulary import ALLENNLP_NEWLINE_MARKER, SPECIAL_TOKENS, UNK_TOKEN, CorpusCounts

logger = logging.getLogger(__name__)


@dataclass
class AdaptedVocabulary:
    """
    What `adapt_vocabulary` made.

    # Parameters

    tokens : `List[str]`
        The adapted vocabulary in id order: the special tokens, then every word by descending
        count in the new corpus (the source's words it lacks last, in the source's order).
    source_rows : `List[Optional[int]]`
        For each of ``tokens``, its line in the source vocabulary (its softmax row), None for an
        added word.
    num_corpus_tokens : `int`
        Tokens of the new corpus.
    num_unknown_to_source : `int`
        Of them, those the source vocabulary lacks (``<UNK>`` for the source model).
    num_unknown : `int`
        Of them, those the adapted vocabulary lacks.
    """

    tokens: List[str]
    source_rows: List[Optional[int]]
    num_corpus_tokens: int
    num_unknown_to_source: int
    num_unknown: int

    @property
    def num_added(self) -> int:
        return sum(row is None for row in self.source_rows)

    @property
    def source_oov_rate(self) -> float:
        return self.num_unknown_to_source / self.num_corpus_tokens

    @property
    def oov_rate(self) -> float:
        return self.num_unknown / self.num_corpus_tokens

    def describe(self, corpus: str) -> str:
        """One line: the out-of-vocabulary rates of ``corpus`` (how the caller names it)."""
        line = (
            f"{corpus}: {self.num_corpus_tokens} tokens, {100 * self.source_oov_rate:.2f}% out of the "
            f"source's vocabulary of {len(self.tokens) - self.num_added} words"
        )
        if self.num_added:
            line += f"; {self.num_added} words added, {100 * self.oov_rate:.2f}% out of the vocabulary now"
        return line


def adapt_vocabulary(
    source_tokens: Sequence[str], corpus: CorpusCounts, extend_min_count: Optional[int] = None
) -> AdaptedVocabulary:
    """
    The source vocabulary ``source_tokens`` (a bilm-tf vocabulary, the special tokens anywhere)
    re-sorted by ``corpus``'s counts: ``<S>``, ``</S>``, ``<UNK>`` first (their counts are not the
    corpus's), then the other words by descending count, ties and unseen words in the source's
    order. With ``extend_min_count``, the corpus's words seen at least that many times that the
    source lacks are added, sorted among the others by their counts.
    """
    if extend_min_count is not None and extend_min_count < 1:
        raise ConfigurationError(f"extend_vocabulary: the minimum count must be at least 1, got {extend_min_count}")
    source_index: Dict[str, int] = {token: index for index, token in enumerate(source_tokens)}
    missing = [token for token in SPECIAL_TOKENS if token not in source_index]
    if missing:
        raise ConfigurationError(f"the source vocabulary lacks {', '.join(missing)}")
    counts = corpus.counts
    words = [token for token in source_tokens if token not in SPECIAL_TOKENS]
    added: List[str] = []
    if extend_min_count is not None:
        added = [
            token for token, count in counts.items()
            if count >= extend_min_count and token not in source_index and ALLENNLP_NEWLINE_MARKER not in token
        ]
    # A source word before an added one of the same count, each group in a fixed order.
    order = sorted(
        [(-counts.get(token, 0), 0, source_index[token], token) for token in words]
        + [(-counts[token], 1, 0, token) for token in added]
    )
    tokens = [token for token in source_tokens if token in SPECIAL_TOKENS] + [entry[3] for entry in order]
    rows: List[Optional[int]] = [source_index.get(token) for token in tokens]
    known = set(tokens)
    unknown_to_source = sum(count for token, count in counts.items() if token not in source_index)
    unknown = sum(count for token, count in counts.items() if token not in known)
    adapted = AdaptedVocabulary(tokens, rows, corpus.num_tokens, unknown_to_source, unknown)
    logger.info("vocabulary: %s", adapted.describe("the new corpus"))
    return adapted


def added_row_log_shares(tokens: Sequence[str], source_rows: Sequence[Optional[int]]) -> Dict[int, float]:
    """
    For each added word (a None in ``source_rows``), by its id: the log of its share of ``<UNK>``'s
    probability, by the log-uniform (Zipf) distribution over the ids that the sampler assumes,
    normalised over the added words. An added word starts as ``<UNK>``'s softmax row with its bias
    raised by this log share: together the added words take what ``<UNK>`` had (every known word's
    probability is divided by at most ``1 + p(<UNK>)``), each by its rank in the new corpus.
    """
    added = [index for index, row in enumerate(source_rows) if row is None]
    if UNK_TOKEN not in tokens:
        raise ConfigurationError("the vocabulary lacks <UNK>, whose softmax row the added words start from")
    # log P(id) of the log-uniform distribution: log((id + 2) / (id + 1)), up to a constant.
    weights = [math.log((index + 2) / (index + 1)) for index in added]
    total = sum(weights)
    return {index: math.log(weight / total) for index, weight in zip(added, weights)}
