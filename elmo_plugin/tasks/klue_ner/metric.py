"""KLUE-NER's scores on character spans, comparable with published results whatever a tagger's units."""
from collections import Counter
from typing import Dict, List, Sequence, Set, Tuple

from allennlp.training.metrics.metric import Metric

# An entity as a character span of the sentence's text: (start, end exclusive, type).
CharSpan = Tuple[int, int, str]


def span_char_tags(length: int, spans: Sequence[CharSpan]) -> List[str]:
    """BIO tags of ``length`` characters from entity spans (``end`` exclusive)."""
    tags = ["O"] * length
    for start, end, kind in spans:
        for index in range(start, min(end, length)):
            tags[index] = ("B-" if index == start else "I-") + kind
    return tags


def _entity_chars(text: str, spans: Sequence[CharSpan]) -> Set[Tuple[int, str]]:
    """``(index, BIO tag)`` of the characters of ``text`` in an entity, spaces left out."""
    tags = span_char_tags(len(text), spans)
    return {(index, tag) for index, tag in enumerate(tags) if tag != "O" and not text[index].isspace()}


def _count(counts: Dict[str, Counter], predicted: Set[Tuple], gold: Set[Tuple]) -> None:
    """Adds the true and false positives and the false negatives by label, an item's last element."""
    counts["tp"].update(item[-1] for item in predicted & gold)
    counts["fp"].update(item[-1] for item in predicted - gold)
    counts["fn"].update(item[-1] for item in gold - predicted)


@Metric.register("klue_ner_f1")
class KlueNerF1(Metric):
    """
    KLUE-NER's scores (KLUE, Park et al. 2021, section 3.4), from gold and predicted entities as
    character spans: ``entity_macro_f1`` (KLUE's main score: exact type and span, F1 per type
    averaged over the types that occur), ``char_macro_f1`` (the BIO tag of every non-space
    character, F1 per tag other than ``O``), and ``entity_micro_f1``, ``entity_precision``,
    ``entity_recall`` from the pooled counts.
    """

    def __init__(self) -> None:
        self._entity: Dict[str, Counter] = {"tp": Counter(), "fp": Counter(), "fn": Counter()}
        self._char: Dict[str, Counter] = {"tp": Counter(), "fp": Counter(), "fn": Counter()}

    def __call__(  # type: ignore
        self, predicted: Sequence[Sequence[CharSpan]], gold: Sequence[Sequence[CharSpan]], texts: Sequence[str]
    ) -> None:
        """One list of spans per sentence in ``predicted`` and ``gold``; ``texts`` the sentences."""
        for predicted_spans, gold_spans, text in zip(predicted, gold, texts):
            _count(self._entity, set(predicted_spans), set(gold_spans))
            _count(self._char, _entity_chars(text, predicted_spans), _entity_chars(text, gold_spans))

    @staticmethod
    def _f1(tp: int, fp: int, fn: int) -> float:
        return 2 * tp / (2 * tp + fp + fn) if tp else 0.0

    def _macro(self, counts: Dict[str, Counter]) -> float:
        labels = set(counts["tp"]) | set(counts["fp"]) | set(counts["fn"])
        if not labels:
            return 0.0
        return sum(
            self._f1(counts["tp"][label], counts["fp"][label], counts["fn"][label]) for label in labels
        ) / len(labels)

    def get_metric(self, reset: bool = False) -> Dict[str, float]:
        tp, fp, fn = (sum(self._entity[key].values()) for key in ("tp", "fp", "fn"))
        metrics = {
            "entity_macro_f1": self._macro(self._entity),
            "char_macro_f1": self._macro(self._char),
            "entity_micro_f1": self._f1(tp, fp, fn),
            "entity_precision": tp / (tp + fp) if tp + fp else 0.0,
            "entity_recall": tp / (tp + fn) if tp + fn else 0.0,
        }
        if reset:
            self.reset()
        return metrics

    def reset(self) -> None:
        self.__init__()  # type: ignore[misc]
