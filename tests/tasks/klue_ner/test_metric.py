"""KLUE-NER's scores, checked against hand computations."""
import pytest

from elmo_plugin.tasks.klue_ner.metric import KlueNerF1, span_char_tags


def test_span_char_tags():
    assert span_char_tags(5, [(1, 3, "PS")]) == ["O", "B-PS", "I-PS", "O", "O"]


def test_scores_by_hand():
    metric = KlueNerF1()
    text = "ab cd ef"
    gold = [(0, 2, "PS"), (3, 5, "LC"), (6, 8, "LC")]
    # PS exact; the first LC one character short; the second LC labelled OG.
    predicted = [(0, 2, "PS"), (3, 4, "LC"), (6, 8, "OG")]
    metric([predicted], [gold], [text])
    scores = metric.get_metric(reset=True)
    # Entities: PS tp 1 (F1 1); LC fp 1 fn 2 (F1 0); OG fp 1 (F1 0): macro 1/3.
    assert scores["entity_macro_f1"] == pytest.approx(1 / 3)
    # Pooled: tp 1, fp 2, fn 2: P = R = F1 = 1/3.
    assert scores["entity_micro_f1"] == pytest.approx(1 / 3)
    assert scores["entity_precision"] == pytest.approx(1 / 3)
    # Characters (spaces left out): B-PS tp 1; I-PS tp 1; B-LC tp 1 (c), fn 1 (e);
    # I-LC fn 2 (d, f); B-OG fp 1 (e); I-OG fp 1 (f).
    # F1: B-PS 1, I-PS 1, B-LC 2/3, I-LC 0, B-OG 0, I-OG 0 -> macro (1 + 1 + 2/3) / 6.
    assert scores["char_macro_f1"] == pytest.approx((2 + 2 / 3) / 6)
    assert metric.get_metric()["entity_macro_f1"] == 0.0  # reset
