"""
The biLM as a language model (`LanguageModelScorer`, what ``allennlp elmo-score`` runs): sentence
scores against the training model's own evaluation and a float64 full softmax by hand,
statelessness, substitutes against a hand computation (and which words each LM may see), the
models that have a softmax and those that do not. Slow: ``bilm.jsonnet`` trained one epoch, its
held-out file scored against ``allennlp evaluate`` and against the same words shuffled.
"""
import json
import math
import random
import subprocess
import sys
from pathlib import Path
from typing import List, Sequence

import pytest
import torch
from allennlp.common.checks import ConfigurationError

from elmo_plugin.models.language_model_scorer import (
    NO_SOFTMAX,
    BilmLanguageModel,
    CorpusScore,
    LanguageModelScorer,
    load_language_model,
)
from tests.helpers import FIXTURES, REPO_ROOT, config_calling, run_export, write_serialization_directory
from tests.models.test_elmo_language_model import (
    BOS,
    EOS,
    MORE_SENTENCES,
    PROJECTION_DIM,
    SENTENCES,
    VOCAB_TOKENS,
    make_model,
    reference_sentence_nll,
    sentence_tensors,
    tiny_options,
    vocab,  # noqa: F401 (the fixture)
)

pytestmark = pytest.mark.usefixtures("single_thread")

ALL_SENTENCES = SENTENCES + MORE_SENTENCES  # lengths 7, 4, 1, 6, 5; an OOV word


def scorer_of(model) -> LanguageModelScorer:
    return LanguageModelScorer(BilmLanguageModel(
        model.bilm, model.softmax.softmax_weight.detach(), model.softmax.softmax_bias.detach(),
        list(VOCAB_TOKENS), "the test model",
    ))


def test_scores_are_the_training_models_evaluation(vocab):  # noqa: F811
    model = make_model(vocab)
    scores = scorer_of(model).score(ALL_SENTENCES, batch_size=2)
    corpus = CorpusScore()
    for sentence, score in zip(ALL_SENTENCES, scores):
        forward, backward = reference_sentence_nll(model, sentence)  # float64, one sentence alone
        assert score.predictions == len(sentence) + 1 == forward.numel()
        assert score.forward_log_prob == pytest.approx(-float(forward.sum()), abs=1e-4)
        assert score.backward_log_prob == pytest.approx(-float(backward.sum()), abs=1e-4)
        assert score.forward_perplexity == pytest.approx(math.exp(float(forward.mean())), rel=1e-5)
        corpus.add(score)
    # The file's perplexities are evaluate's: the training model's metrics over the same sentences.
    with torch.no_grad():
        model(**sentence_tensors(vocab, SENTENCES))
        model(**sentence_tensors(vocab, MORE_SENTENCES))
    metrics = model.get_metrics(reset=True)
    assert corpus.forward_perplexity == pytest.approx(metrics["forward_ppl"], rel=1e-5)
    assert corpus.backward_perplexity == pytest.approx(metrics["backward_ppl"], rel=1e-5)
    assert corpus.perplexity == pytest.approx(metrics["ppl"], rel=1e-5)
    assert abs(corpus.forward_perplexity - corpus.backward_perplexity) > 1e-2  # directions not swapped


def test_a_sentence_scores_the_same_alone_and_in_any_batch(vocab):  # noqa: F811
    scorer = scorer_of(make_model(vocab))
    together = scorer.score(ALL_SENTENCES, batch_size=5)
    alone = [scorer.score([sentence])[0] for sentence in ALL_SENTENCES]
    for one, other in zip(together, alone):
        assert one.forward_log_prob == pytest.approx(other.forward_log_prob, abs=1e-5)
        assert one.backward_log_prob == pytest.approx(other.backward_log_prob, abs=1e-5)


def hand_substitutes(model, sentence: Sequence[str], k: int):
    """(forward, backward, both) top-k (ids, log-probabilities) per token, in float64, from the
    biLM's top layer and the softmax, without <S> and </S>."""
    from elmo_plugin.data.character_ids import ElmoCharacterIds

    with torch.no_grad():
        top = model.bilm(ElmoCharacterIds(50).batch_to_ids([list(sentence)]))["activations"][-1][0].double()
    weight, bias = model.softmax.softmax_weight.detach().double(), model.softmax.softmax_bias.detach().double()
    n = len(sentence)
    # Token i sits at position i + 1: the forward LM predicts it from position i, the backward
    # LM from position i + 2.
    forward = torch.log_softmax(top[0:n, :PROJECTION_DIM] @ weight.t() + bias, dim=-1)
    backward = torch.log_softmax(top[2 : n + 2, PROJECTION_DIM:] @ weight.t() + bias, dim=-1)
    result = []
    for log_probs in (forward, backward, forward + backward):
        log_probs = log_probs.clone()
        log_probs[:, [BOS, EOS]] = -math.inf
        best = log_probs.topk(k, dim=1)
        result.append((best.indices.tolist(), best.values.tolist()))
    return result


def test_substitutes_are_the_best_words_of_each_language_model(vocab):  # noqa: F811
    model = make_model(vocab)
    found = scorer_of(model).substitutes(ALL_SENTENCES, k=3, batch_size=2)
    for sentence, substitutes in zip(ALL_SENTENCES, found):
        expected = hand_substitutes(model, sentence, 3)
        assert [substitute.word for substitute in substitutes] == list(sentence)
        for position, substitute in enumerate(substitutes):
            for (ids, values), got in zip(expected, (substitute.forward, substitute.backward, substitute.both)):
                assert got.ids == ids[position]
                assert got.words == [VOCAB_TOKENS[index] for index in ids[position]]
                assert got.log_probs == pytest.approx(values[position], abs=1e-5)
                assert got.log_probs == sorted(got.log_probs, reverse=True)
                assert not {"<S>", "</S>"} & set(got.words)


def test_each_language_model_expects_a_word_from_its_own_side_only(vocab):  # noqa: F811
    scorer = scorer_of(make_model(vocab))
    original = ["the", "cat", "sat", "on", "the", "mat", "."]
    changed_after = original[:3] + ["ran", "a", "dog", "."]
    changed_before = ["a", "dog", "ran"] + original[3:]
    base, after, before = scorer.substitutes([original, changed_after, changed_before], k=4)
    # "sat" (position 2): the forward LM sees only "the cat", the backward LM "on the mat .".
    assert after[2].forward == base[2].forward and after[2].backward != base[2].backward
    assert before[3].backward == base[3].backward and before[3].forward != base[3].forward


def write_archive(model, directory: Path) -> Path:
    config = {"model": {"type": "elmo_bilm", "options": tiny_options(), "num_samples": 4}}
    return write_serialization_directory(directory, model, config)


def test_an_archive_and_its_export_with_the_softmax_score_alike(vocab, tmp_path):  # noqa: F811
    model = make_model(vocab)
    run = write_archive(model, tmp_path / "run")
    assert run_export(run, tmp_path / "bilm", "--include-softmax") == 0
    expected = scorer_of(model).score(ALL_SENTENCES)
    for source in (run, run / "model.tar.gz", tmp_path / "bilm"):
        language_model = load_language_model(source)
        assert language_model.vocabulary == VOCAB_TOKENS
        scores = LanguageModelScorer(language_model).score(ALL_SENTENCES)
        for score, reference in zip(scores, expected):
            assert score.forward_log_prob == pytest.approx(reference.forward_log_prob, abs=1e-5)
            assert score.backward_log_prob == pytest.approx(reference.backward_log_prob, abs=1e-5)


def test_a_model_without_its_softmax_is_one_line_saying_what_scoring_needs(vocab, tmp_path):  # noqa: F811
    run = write_archive(make_model(vocab), tmp_path / "run")
    assert run_export(run, tmp_path / "no_softmax") == 0
    cases = {
        "small": "small is a published bilm-tf model",
        str(FIXTURES): f"{FIXTURES} is bilm-tf files with no softmax.hdf5",
        str(tmp_path / "no_softmax"): "is bilm-tf files with no softmax.hdf5",
        str(REPO_ROOT / "tests" / "fixtures" / "tf_hub_elmo" / "tf1_hub_module"): "is a TF-Hub module",
        str(tmp_path / "nothing"): "no model at",
    }
    for model, start in cases.items():
        with pytest.raises(ConfigurationError) as error:
            load_language_model(model)
        message = str(error.value)
        assert start in message and message.endswith(NO_SOFTMAX) and "\n" not in message, message
    (tmp_path / "no_softmax" / "softmax.hdf5").write_bytes(b"")
    (tmp_path / "no_softmax" / "vocabulary.txt").unlink()
    with pytest.raises(ConfigurationError, match="has softmax.hdf5 but no vocabulary.txt"):
        load_language_model(tmp_path / "no_softmax")


def test_sentences_must_be_lists_of_tokens(vocab):  # noqa: F811
    scorer = scorer_of(make_model(vocab))
    for bad, message in [
        (["the cat"], "got a string; split it first"),
        ([[]], "sentence 0 has no tokens"),
        ([["the", ""]], "sentence 0, token 1: '' is not a token"),
    ]:
        with pytest.raises(ConfigurationError, match=message):
            scorer.score(bad)


# --- bilm.jsonnet, one epoch, against allennlp evaluate -------------------------------------------


def shuffled(tokens: List[str], generator: random.Random) -> List[str]:
    """The same words in another order (the same list where no other order exists)."""
    for _ in range(20):
        words = list(tokens)
        generator.shuffle(words)
        if words != tokens:
            return words
    return list(tokens)


@pytest.mark.slow
def test_a_trained_bilm_scores_its_held_out_file_as_allennlp_evaluate_does(tmp_path):
    from allennlp.commands.train import train_model_from_file

    config = config_calling(tmp_path / "bilm_one_epoch.jsonnet", "bilm.jsonnet", num_epochs=1)
    train_model_from_file(str(config), str(tmp_path / "run"))
    archive = tmp_path / "run" / "model.tar.gz"
    heldout = REPO_ROOT / "elmo_plugin" / "sample_corpus" / "heldout.txt"
    sentences = [line.split() for line in heldout.read_text(encoding="utf-8").splitlines()]

    scores_file = tmp_path / "scores.jsonl"
    scored = subprocess.run(
        [sys.executable, "-m", "allennlp", "elmo-score", str(archive), str(heldout), "--output", str(scores_file)],
        cwd=REPO_ROOT, capture_output=True, text=True, timeout=900,
    )
    assert scored.returncode == 0, scored.stderr[-3000:]
    lines = [json.loads(line) for line in scores_file.read_text(encoding="utf-8").splitlines()]
    assert len(lines) == len(sentences) == 400
    assert [line["line"] for line in lines] == list(range(1, 401))
    assert [line["tokens"] for line in lines] == [len(sentence) for sentence in sentences]

    # The mean over the file, weighted by tokens as perplexity is, against allennlp evaluate's.
    metrics_file = tmp_path / "metrics.json"
    evaluated = subprocess.run(
        [sys.executable, "-m", "allennlp", "evaluate", str(archive), str(heldout), "--output-file",
         str(metrics_file)],
        cwd=REPO_ROOT, capture_output=True, text=True, timeout=900,
    )
    assert evaluated.returncode == 0, evaluated.stderr[-3000:]
    metrics = json.loads(metrics_file.read_text(encoding="utf-8"))
    predictions = sum(line["tokens"] + 1 for line in lines)
    forward = math.exp(-sum(line["forward_log_prob"] for line in lines) / predictions)
    backward = math.exp(-sum(line["backward_log_prob"] for line in lines) / predictions)
    print(f"elmo-score: forward {forward:.3f}, backward {backward:.3f}; evaluate: {metrics}")
    assert forward == pytest.approx(metrics["forward_ppl"], rel=0.01)
    assert backward == pytest.approx(metrics["backward_ppl"], rel=0.01)
    assert 0.5 * (forward + backward) == pytest.approx(metrics["ppl"], rel=0.01)
    assert f"ppl {metrics['ppl']:.2f}" in scored.stdout

    # Held-out sentences score better than the same words shuffled.
    scorer = LanguageModelScorer(archive)
    generator = random.Random(0)
    pairs = [(sentence, shuffled(sentence, generator)) for sentence in sentences]
    pairs = [(sentence, other) for sentence, other in pairs if other != sentence]
    originals = scorer.score([sentence for sentence, _ in pairs])
    others = scorer.score([other for _, other in pairs])
    better = sum(
        original.forward_log_prob + original.backward_log_prob > other.forward_log_prob + other.backward_log_prob
        for original, other in zip(originals, others)
    )
    print(f"{better} of {len(pairs)} held-out sentences score better than their words shuffled")
    assert len(pairs) >= 350 and better >= 0.8 * len(pairs)
