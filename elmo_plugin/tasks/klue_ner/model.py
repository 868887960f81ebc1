"""
``character_span_crf_tagger``: allennlp-models' ``crf_tagger`` tagging tokens (Mecab morphemes)
and scored on the characters they cover, as KLUE-NER scores character taggers (`KlueNerF1`).
"""
from typing import Any, Dict, List, Optional

import torch
from allennlp.data import TextFieldTensors
from allennlp.data.dataset_readers.dataset_utils.span_utils import bio_tags_to_spans
from allennlp.models.model import Model
from allennlp_models.tagging.models.crf_tagger import CrfTagger

from elmo_plugin.tasks.klue_ner.metric import CharSpan, KlueNerF1


def token_tags_to_char_spans(tags: List[str], token_spans: List[List[int]]) -> List[CharSpan]:
    """The entities of BIO ``tags`` (one per token) as character spans of their tokens, in text order."""
    spans = bio_tags_to_spans(tags)
    return sorted((token_spans[first][0], token_spans[last][1], kind) for kind, (first, last) in spans)


@Model.register("character_span_crf_tagger")
class CharacterSpanCrfTagger(CrfTagger):
    """
    A `CrfTagger` (all its parameters) that also reports KLUE-NER's character-level scores
    (`KlueNerF1`) from the ``klue_ner`` reader's ``token_spans`` and ``gold_spans``; select on
    ``+entity_macro_f1``, KLUE's score.
    """

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self._character_metric = KlueNerF1()

    def forward(  # type: ignore
        self, tokens: TextFieldTensors, tags: torch.LongTensor = None, metadata: Optional[List[Dict[str, Any]]] = None,
        **kwargs,
    ) -> Dict[str, torch.Tensor]:
        output = super().forward(tokens, tags=tags, metadata=metadata, **kwargs)
        if metadata is not None and all(m.get("gold_spans") is not None for m in metadata):
            label = self.vocab.get_index_to_token_vocabulary(self.label_namespace)
            paths = [[label[index] for index in path] for path in output["tags"]]
            predicted = [token_tags_to_char_spans(labels, m["token_spans"]) for labels, m in zip(paths, metadata)]
            self._character_metric(predicted, [m["gold_spans"] for m in metadata], [m["text"] for m in metadata])
        return output

    def get_metrics(self, reset: bool = False) -> Dict[str, float]:
        metrics = super().get_metrics(reset)
        metrics.update(self._character_metric.get_metric(reset))
        return metrics
