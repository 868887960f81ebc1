"""
``character_span_crf_tagger``: allennlp-models' ``crf_tagger`` on tokens that are not the units
a data set is scored on. It tags tokens (e.g. Mecab morphemes, the Korean biLM's units) and is
also scored on the characters: its predicted entities are mapped back to the character spans
their tokens cover and compared with the gold character spans (`KlueNerF1`), as KLUE-NER scores
character taggers.
"""
from typing import Any, Dict, List, Optional

import torch
from allennlp.data import TextFieldTensors
from allennlp.data.dataset_readers.dataset_utils.span_utils import bio_tags_to_spans
from allennlp.models.model import Model
from allennlp_models.tagging.models.crf_tagger import CrfTagger

from elmo_plugin.tasks.klue_ner.metric import CharSpan, KlueNerF1


def token_tags_to_char_spans(tags: List[str], token_spans: List[List[int]]) -> List[CharSpan]:
    """
    The entities of BIO ``tags`` (one per token) as character spans: from the start of an
    entity's first token to the end of its last (spaces between them included), in text order.
    """
    return sorted(
        (token_spans[first][0], token_spans[last][1], kind)
        for kind, (first, last) in bio_tags_to_spans(tags)
    )


@Model.register("character_span_crf_tagger")
class CharacterSpanCrfTagger(CrfTagger):
    """
    A `CrfTagger` (all its parameters, e.g. ``label_encoding: "BIO"``) that also reports
    KLUE-NER's character-level scores (`KlueNerF1`: ``entity_macro_f1``, ``char_macro_f1``,
    ``entity_micro_f1``, ...) from the ``metadata`` of the ``klue_ner`` reader: ``token_spans``
    (each token's character span) and ``gold_spans`` (the gold entities' character spans).
    Use ``+entity_macro_f1`` as the trainer's ``validation_metric`` to select on KLUE's score.

    """

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self._character_metric = KlueNerF1()

    def forward(  # type: ignore
        self,
        tokens: TextFieldTensors,
        tags: torch.LongTensor = None,
        metadata: Optional[List[Dict[str, Any]]] = None,
        **kwargs,
    ) -> Dict[str, torch.Tensor]:
        output = super().forward(tokens, tags=tags, metadata=metadata, **kwargs)
        if metadata is not None and all(m.get("gold_spans") is not None for m in metadata):
            predicted = [
                token_tags_to_char_spans(
                    [self.vocab.get_token_from_index(t, self.label_namespace) for t in path],
                    m["token_spans"],
                )
                for path, m in zip(output["tags"], metadata)
            ]
            self._character_metric(
                predicted, [m["gold_spans"] for m in metadata], [m["text"] for m in metadata]
            )
        return output

    def get_metrics(self, reset: bool = False) -> Dict[str, float]:
        metrics = super().get_metrics(reset)
        metrics.update(self._character_metric.get_metric(reset))
        return metrics
