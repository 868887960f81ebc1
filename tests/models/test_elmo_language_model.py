"""
The ``elmo_bilm`` training model: its losses against hand computations (full softmax in
evaluation, bilm-tf's sampled softmax in training), the perplexity metrics, causality of both
language models, learning, stream mode (state carried between windows, ``<S>`` targets counted)
and configuration errors.
"""
import copy
import logging
import math
import random
from typing import Dict, List, Sequence, Tuple

import pytest
import torch
from allennlp.common.checks import ConfigurationError
from allennlp.data import Batch, Instance, Vocabulary
from allennlp.data.fields import TextField
from allennlp.data.tokenizers import Token

from elmo_plugin.common import hardware
from elmo_plugin.data.character_ids import ElmoCharacterIds
from elmo_plugin.data.dataset_readers.bilm_corpus import BilmCorpusReader
from elmo_plugin.data.vocabulary import BilmTfVocabulary
from elmo_plugin.models.elmo_language_model import ElmoLanguageModel
from elmo_plugin.modules.sampled_softmax_loss import SampledCandidates
from tests.helpers import (
    FIXTURE_WEIGHTS,
    REPO_ROOT,
    randomize_bilm_,
    record_bfloat16_autocast,
    write_serialization_directory,
)

pytestmark = pytest.mark.usefixtures("single_thread")

ATOL = 1e-5

# bilm-tf order: <S>, </S>, <UNK>, then by descending frequency.
VOCAB_TOKENS = ["<S>", "</S>", "<UNK>", "the", ".", "a", "cat", "dog", "sat", "on", "mat", "ran"]
TOKEN_IDS = {token: index for index, token in enumerate(VOCAB_TOKENS)}
BOS, EOS, UNK = 0, 1, 2
PROJECTION_DIM = 8


def tiny_options(dropout: float = 0.0) -> Dict:
    return {
        "char_cnn": {
            "activation": "relu",
            "embedding": {"dim": 4},
            "filters": [[1, 4], [2, 8], [3, 8]],
            "max_characters_per_token": 50,
            "n_characters": 261,
            "n_highway": 1,
        },
        "lstm": {
            "dim": 16,
            "projection_dim": PROJECTION_DIM,
            "n_layers": 2,
            "cell_clip": 3,
            "proj_clip": 3,
            "use_skip_connections": True,
        },
        "dropout": dropout,
    }


@pytest.fixture(scope="module")
def vocab(tmp_path_factory) -> BilmTfVocabulary:
    path = tmp_path_factory.mktemp("vocab") / "vocabulary.txt"
    path.write_text("\n".join(VOCAB_TOKENS) + "\n", encoding="utf-8")
    return BilmTfVocabulary.from_bilm_tf_file(str(path))


def make_model(vocab, seed: int = 0, num_samples: int = 4, dropout: float = 0.0) -> ElmoLanguageModel:
    torch.manual_seed(seed)
    model = ElmoLanguageModel(vocab, tiny_options(dropout), num_samples=num_samples)
    randomize_bilm_(model.bilm, seed=seed)
    with torch.no_grad():  # a non-trivial softmax (random biases too)
        generator = torch.Generator().manual_seed(seed + 100)
        for parameter in (model.softmax.softmax_weight, model.softmax.softmax_bias):
            parameter.copy_(torch.randn(parameter.shape, generator=generator))
    return model.eval()


def sentence_tensors(vocab, sentences: Sequence[Sequence[str]]) -> Dict:
    reader = BilmCorpusReader(shuffle=False)
    batch = Batch([reader.text_to_instance(list(sentence)) for sentence in sentences])
    batch.index_instances(vocab)
    return batch.as_tensor_dict()


def target_ids(tokens: Sequence[str]) -> List[int]:
    return [TOKEN_IDS.get(token, UNK) for token in tokens]


def full_softmax_nll(model, outputs: torch.Tensor, targets: Sequence[int]) -> torch.Tensor:
    """-log p(target) under the full softmax, float64."""
    weight = model.softmax.softmax_weight.detach().double()
    bias = model.softmax.softmax_bias.detach().double()
    log_probs = torch.log_softmax(outputs.double() @ weight.t() + bias, dim=-1)
    return -log_probs[torch.arange(len(targets)), torch.tensor(targets)]


def reference_sentence_nll(model, sentence: Sequence[str]) -> Tuple[torch.Tensor, torch.Tensor]:
    """
    Per-token NLL of one sentence, run alone through the biLM: the forward half at positions
    0..n (<S> w1..wn) predicts w1..wn </S>, the backward half at positions 1..n+1 predicts
    <S> w1..wn.
    """
    n = len(sentence)
    ids = ElmoCharacterIds(50).batch_to_ids([list(sentence)])
    with torch.no_grad():
        top = model.bilm(ids)["activations"][-1][0]
    assert top.shape[0] == n + 2
    forward = full_softmax_nll(model, top[0 : n + 1, :PROJECTION_DIM], target_ids(sentence) + [EOS])
    backward = full_softmax_nll(
        model, top[1 : n + 2, PROJECTION_DIM:], [BOS] + target_ids(sentence)
    )
    return forward, backward


SENTENCES = [
    ["the", "cat", "sat", "on", "the", "mat", "."],
    ["a", "zebra", "ran", "."],  # "zebra" is out of the vocabulary
    ["dog"],
]
MORE_SENTENCES = [["a", "dog", "sat", "on", "a", "cat"], ["the", "mat", "ran", "away", "."]]


def test_sentences_mode_eval_loss_and_perplexity_match_a_full_softmax_reference(vocab):
    model = make_model(vocab)
    tensors = sentence_tensors(vocab, SENTENCES)
    # OOV tokens get the <UNK> target; padding is there (row lengths 7, 4, 1).
    assert tensors["tokens"]["lm_targets"]["tokens"][1].tolist()[:4] == [5, UNK, 11, 4]
    with torch.no_grad():
        output = model(**tensors)

    per_sentence = [reference_sentence_nll(model, sentence) for sentence in SENTENCES]
    forward_nll = torch.cat([f for f, _ in per_sentence])
    backward_nll = torch.cat([b for _, b in per_sentence])
    num_pairs = sum(len(sentence) + 1 for sentence in SENTENCES)
    assert forward_nll.numel() == backward_nll.numel() == num_pairs
    expected_forward, expected_backward = float(forward_nll.mean()), float(backward_nll.mean())
    print(
        f"eval losses: forward {float(output['forward_loss']):.6f} vs {expected_forward:.6f}, "
        f"backward {float(output['backward_loss']):.6f} vs {expected_backward:.6f}"
    )
    assert float(output["forward_loss"]) == pytest.approx(expected_forward, abs=ATOL)
    assert float(output["backward_loss"]) == pytest.approx(expected_backward, abs=ATOL)
    assert float(output["loss"]) == pytest.approx(
        0.5 * (expected_forward + expected_backward), abs=ATOL
    )
    # The two directions really differ (a swap of halves or targets would show).
    assert abs(expected_forward - expected_backward) > 1e-2

    metrics = model.get_metrics()
    assert metrics["forward_ppl"] == pytest.approx(math.exp(expected_forward), rel=1e-5)
    assert metrics["backward_ppl"] == pytest.approx(math.exp(expected_backward), rel=1e-5)
    assert metrics["ppl"] == pytest.approx(
        0.5 * (math.exp(expected_forward) + math.exp(expected_backward)), rel=1e-5
    )

    # A second batch: perplexity is per token over everything since the last reset.
    with torch.no_grad():
        model(**sentence_tensors(vocab, MORE_SENTENCES))
    more = [reference_sentence_nll(model, sentence) for sentence in MORE_SENTENCES]
    all_forward = torch.cat([forward_nll] + [f for f, _ in more])
    all_backward = torch.cat([backward_nll] + [b for _, b in more])
    metrics = model.get_metrics(reset=True)
    assert metrics["forward_ppl"] == pytest.approx(math.exp(float(all_forward.mean())), rel=1e-5)
    assert metrics["backward_ppl"] == pytest.approx(math.exp(float(all_backward.mean())), rel=1e-5)
    assert model.get_metrics() == {}


class SoftmaxRecorder:
    """Wraps ``model.softmax.forward`` to record what each direction passes to it."""

    def __init__(self, model, monkeypatch) -> None:
        self.calls: List[Dict] = []
        original = model.softmax.forward

        def recording_forward(embeddings, targets, sampled=None):
            losses = original(embeddings, targets, sampled=sampled)
            self.calls.append(
                dict(
                    embeddings=embeddings.detach().clone(),
                    targets=targets.clone(),
                    sampled=sampled,
                    losses=losses.detach().clone(),
                )
            )
            return losses

        monkeypatch.setattr(model.softmax, "forward", recording_forward)


def test_neither_language_model_sees_what_it_predicts(vocab, monkeypatch):
    model = make_model(vocab)
    recorder = SoftmaxRecorder(model, monkeypatch)
    original = ["the", "cat", "sat", "on", "the", "mat", "."]
    k = 3  # w_3 = "sat" (1-based), at position 3 after <S>
    changed = list(original)
    changed[k - 1] = "dog"
    with torch.no_grad():
        model(**sentence_tensors(vocab, [original]))
        model(**sentence_tensors(vocab, [changed]))
    assert len(recorder.calls) == 4
    fw_a, bw_a, fw_b, bw_b = recorder.calls
    n = len(original)
    # Forward row p is position p (p = 0..n) and predicts w_{p+1}; rows 0..k-1 predict w_1..w_k
    # and must not have seen w_k.
    assert fw_a["targets"].tolist() == target_ids(original) + [EOS]
    assert torch.equal(fw_a["embeddings"][:k], fw_b["embeddings"][:k])
    assert float((fw_a["embeddings"][k:] - fw_b["embeddings"][k:]).abs().max()) > 1e-4
    assert torch.equal(fw_a["losses"][: k - 1], fw_b["losses"][: k - 1])
    assert not torch.equal(fw_a["losses"][k - 1], fw_b["losses"][k - 1])  # the target changed
    # Backward row r is position r + 1 and predicts w_r (w_0 = <S>): rows k..n predict
    # w_k..w_n from positions k+1..n+1, which must not have seen w_k.
    assert bw_a["targets"].tolist() == [BOS] + target_ids(original)
    assert torch.equal(bw_a["embeddings"][k:], bw_b["embeddings"][k:])
    assert float((bw_a["embeddings"][:k] - bw_b["embeddings"][:k]).abs().max()) > 1e-4
    assert torch.equal(bw_a["losses"][k + 1 :], bw_b["losses"][k + 1 :])
    assert n + 1 == fw_a["losses"].numel() == bw_a["losses"].numel()


def log_uniform_log_q(ids: torch.Tensor, num_words: int, num_tries: float) -> torch.Tensor:
    """log of TensorFlow's expected count for unique log-uniform sampling, written out."""
    ids = ids.double()
    p = (torch.log(ids + 2) - torch.log(ids + 1)) / math.log(num_words + 1)
    return torch.log(1 - (1 - p) ** num_tries)


def reference_sampled_nll(model, embeddings, targets, sampled: SampledCandidates) -> torch.Tensor:
    weight = model.softmax.softmax_weight.detach().double()
    bias = model.softmax.softmax_bias.detach().double()
    num_words = weight.size(0)
    e = embeddings.double()
    true_logits = (e * weight[targets]).sum(-1) + bias[targets]
    true_logits = true_logits - log_uniform_log_q(targets, num_words, sampled.num_tries)
    sampled_logits = e @ weight[sampled.ids].t() + bias[sampled.ids]
    sampled_logits = sampled_logits - log_uniform_log_q(sampled.ids, num_words, sampled.num_tries)
    sampled_logits = sampled_logits.masked_fill(
        targets.unsqueeze(1) == sampled.ids.unsqueeze(0), -math.inf
    )
    logits = torch.cat([true_logits.unsqueeze(1), sampled_logits], dim=1)
    return -torch.log_softmax(logits, dim=1)[:, 0]


def test_training_uses_one_sampled_softmax_draw_for_both_directions(vocab, monkeypatch):
    # dropout 0: training-mode activations equal the evaluation ones, so the loss can be
    # recomputed by hand from the recorded sample.
    model = make_model(vocab, num_samples=4, dropout=0.0)
    tensors = sentence_tensors(vocab, SENTENCES)
    with torch.no_grad():
        model.eval()
        model(**tensors)
    model.get_metrics(reset=True)

    draws: List[SampledCandidates] = []
    original_sample = model.softmax.sample

    def counting_sample(*args, **kwargs):
        draws.append(original_sample(*args, **kwargs))
        return draws[-1]

    monkeypatch.setattr(model.softmax, "sample", counting_sample)
    recorder = SoftmaxRecorder(model, monkeypatch)
    with torch.no_grad():
        model.eval()
        model(**tensors)
        assert draws == []  # evaluation draws nothing: full softmax
        eval_calls = list(recorder.calls)
        assert all(call["sampled"] is None for call in eval_calls)
        recorder.calls.clear()

    model.train()
    output = model(**tensors)
    assert len(draws) == 1
    assert len(recorder.calls) == 2
    assert recorder.calls[0]["sampled"] is draws[0] and recorder.calls[1]["sampled"] is draws[0]
    sample = draws[0]
    assert sample.ids.numel() == 4 and len(set(sample.ids.tolist())) == 4
    # Training passes every position (padding too, masked out of the sum afterwards: shapes that
    # do not depend on the data); evaluation passes the real ones. Sentence of n tokens: n + 1
    # (position, next token) pairs per direction.
    lengths = (tensors["tokens"]["elmo_characters"]["elmo_tokens"] > 0).any(-1).sum(1)
    pairs = torch.arange(int(lengths.max()) + 1).unsqueeze(0) < (lengths + 1).unsqueeze(1)
    real = pairs.reshape(-1)
    assert int(real.sum()) == sum(len(sentence) + 1 for sentence in SENTENCES) < real.numel()
    expected = []
    for call, eval_call in zip(recorder.calls, eval_calls):
        assert call["embeddings"].shape[0] == real.numel()
        assert torch.allclose(call["embeddings"][real], eval_call["embeddings"], atol=1e-6)
        assert torch.equal(call["targets"][real], eval_call["targets"])
        nll = reference_sampled_nll(model, eval_call["embeddings"], eval_call["targets"], sample)
        expected.append(float(nll.mean()))
    print(f"sampled-softmax losses {output['forward_loss']:.6f}/{output['backward_loss']:.6f} "
          f"vs reference {expected[0]:.6f}/{expected[1]:.6f}")
    assert float(output["forward_loss"]) == pytest.approx(expected[0], abs=ATOL)
    assert float(output["backward_loss"]) == pytest.approx(expected[1], abs=ATOL)
    # The sampled estimate is not the full softmax loss.
    full = 0.5 * sum(float(call["losses"].mean()) for call in eval_calls)
    assert abs(float(output["loss"].detach()) - full) > 1e-3

    # A second batch draws a fresh sample.
    model(**tensors)
    assert len(draws) == 2


def test_a_few_optimizer_steps_lower_the_evaluation_loss(vocab):
    model = make_model(vocab, num_samples=4, dropout=0.1)
    tensors = sentence_tensors(vocab, SENTENCES + MORE_SENTENCES)

    def eval_loss() -> float:
        model.eval()
        with torch.no_grad():
            return float(model(**tensors)["loss"])

    before = eval_loss()
    torch.manual_seed(1)
    optimizer = torch.optim.Adagrad(model.parameters(), lr=0.2, initial_accumulator_value=1.0)
    model.train()
    # 30 steps: after 15, how far a 12-word model has got depends much on its 15 draws of 4
    # negatives (held-out loss from 2.6 to 3.9 across seeds); after 30 it is 2.3 to 2.9.
    for _ in range(30):
        optimizer.zero_grad()
        loss = model(**tensors)["loss"]
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 10.0)
        optimizer.step()
    after = eval_loss()
    print(f"eval loss before {before:.4f}, after 30 steps {after:.4f}")
    assert after < 0.7 * before


# -- mixed precision, by hardware -----------------------------------------------------------------

BFLOAT16_CPU = frozenset({"avx2", "avx512f", "avx512_bf16"})  # e.g. AMD Zen 4
AVX2_ONLY_CPU = frozenset({"avx", "avx2", "fma"})  # e.g. AMD EPYC 7B13 (Zen 3)
MODEL_LOGGER = "elmo_plugin.models.elmo_language_model"


@pytest.fixture
def cpu_with(monkeypatch):
    """
    Sets the CPU flags that `hardware.bfloat16_support` reads (and the model name it reports),
    so that both branches of ``mixed_precision`` run on any machine.
    """
    monkeypatch.setattr(hardware, "cpu_model_name", lambda: "AMD EPYC 7B13")

    def set_flags(flags: frozenset) -> None:
        monkeypatch.setattr(hardware, "cpu_flags", lambda: flags)

    return set_flags


def test_mixed_precision_trains_in_bfloat16_and_evaluates_in_float32(vocab, cpu_with, caplog):
    cpu_with(BFLOAT16_CPU)
    model = make_model(vocab, num_samples=4)
    mixed = copy.deepcopy(model)
    mixed._mixed_precision = True
    autocast = record_bfloat16_autocast(mixed.bilm)
    tensors = sentence_tensors(vocab, SENTENCES + MORE_SENTENCES)
    with torch.no_grad():
        assert torch.equal(model(**tensors)["loss"], mixed(**tensors)["loss"])

    losses, gradients = [], []
    for side in (model, mixed):
        side.train()
        torch.manual_seed(5)  # the same negative samples on both sides
        with caplog.at_level(logging.INFO, logger=MODEL_LOGGER):
            loss = side(**tensors)["loss"]
        assert loss.dtype == torch.float32
        loss.backward()
        losses.append(float(loss))
        gradients.append({name: p.grad for name, p in side.named_parameters() if p.grad is not None})
    assert autocast == [False, True]  # evaluation in float32, training in bfloat16
    assert not [r for r in caplog.records if r.name == MODEL_LOGGER and r.levelno >= logging.WARNING]
    assert "bfloat16 autocast in training (CPU 'AMD EPYC 7B13' has AVX512-BF16" in caplog.text
    # bfloat16's numbers (the loss differs), within its rounding of float32's.
    assert losses[0] != losses[1]
    assert abs(losses[0] - losses[1]) < 1e-2 * abs(losses[0])
    assert gradients[0].keys() == gradients[1].keys()
    for name, expected in gradients[0].items():
        got = gradients[1][name]
        assert got.dtype == torch.float32, name
        # Per parameter loosely: with 8 bits of mantissa some max-pooling windows tie or swap,
        # which moves a convolution's gradient to another window (measured: 11% for one of the
        # tiny model's filters, as much for nn.Conv1d under autocast as for our convolution).
        assert (got - expected).norm() <= 0.25 * expected.norm(), name
    everything = [torch.cat([g.flatten() for g in side.values()]) for side in gradients]
    assert (everything[1] - everything[0]).norm() <= 2e-2 * everything[0].norm()


def test_mixed_precision_without_native_bfloat16_warns_once_and_trains_in_float32(
    vocab, cpu_with, caplog
):
    # On an AVX2-only CPU bfloat16 is emulated: training ran 17 times slower than in float32.
    cpu_with(AVX2_ONLY_CPU)
    model = make_model(vocab, num_samples=4)
    mixed = copy.deepcopy(model)
    mixed._mixed_precision = True
    autocast = record_bfloat16_autocast(mixed.bilm)
    tensors = sentence_tensors(vocab, SENTENCES + MORE_SENTENCES)
    with caplog.at_level(logging.INFO, logger=MODEL_LOGGER):
        with torch.no_grad():
            mixed(**tensors)  # evaluation never uses autocast: nothing to decide or report
        assert caplog.records == []
        model.train()
        mixed.train()
        for step in range(3):
            torch.manual_seed(step)
            expected = model(**tensors)["loss"]
            torch.manual_seed(step)
            loss = mixed(**tensors)["loss"]
            assert torch.equal(loss, expected)  # float32's numbers, not bfloat16's
            loss.backward()
    assert autocast == [False] * 4
    assert [(r.levelno, r.getMessage()) for r in caplog.records if r.name == MODEL_LOGGER] == [
        (
            logging.WARNING,
            "CPU 'AMD EPYC 7B13' has no AVX512-BF16/AMX instructions; mixed_precision is off, "
            "training in float32",
        )
    ]


# -- stream mode --------------------------------------------------------------------------------

STREAM_CORPUS = [
    "the cat sat on the mat .",
    "a dog ran .",
    "the zebra sat .",
    "a cat ran on the mat .",
    "dog sat .",
    "the mat ran on a dog .",
    "a cat .",
]


@pytest.fixture(scope="module")
def stream_batches(vocab, tmp_path_factory) -> List[Dict]:
    path = tmp_path_factory.mktemp("stream") / "corpus.txt"
    path.write_text("\n".join(STREAM_CORPUS) + "\n", encoding="utf-8")
    reader = BilmCorpusReader(mode="stream", batch_size=2, unroll_steps=5, shuffle=False)
    instances = list(reader.read(str(path)))
    batches = []
    for start in range(0, 4, 2):
        batch = Batch(instances[start : start + 2])
        batch.index_instances(vocab)
        batches.append(batch.as_tensor_dict())
    return batches


def stream_concat(batches: List[Dict], field: str, indexer: str, key: str) -> torch.Tensor:
    """One tensor of consecutive stream batches, windows concatenated along time."""
    return torch.cat([tensors[field][indexer][key] for tensors in batches], dim=1)


def stream_mask(tensors: Dict, direction: str) -> torch.Tensor:
    return (tensors[f"{direction}_tokens"]["elmo_characters"]["elmo_tokens"] > 0).any(-1)


def full_stream_windows(vocab: Vocabulary, directory, count: int, repeats: int) -> List[Dict]:
    """The first ``count`` consecutive stream batches of 3 rows x 4 tokens over ``STREAM_CORPUS``
    written ``repeats`` times into ``directory``, keeping only windows that are full in both
    directions (what the fixed-shape stream step takes)."""
    path = directory / "corpus.txt"
    path.write_text("\n".join(STREAM_CORPUS * repeats) + "\n", encoding="utf-8")
    reader = BilmCorpusReader(mode="stream", batch_size=3, unroll_steps=4, shuffle=False)
    instances = list(reader.read(str(path)))
    batches = []
    for start in range(0, len(instances) - 2, 3):
        batch = Batch(instances[start : start + 3])
        batch.index_instances(vocab)
        tensors = batch.as_tensor_dict()
        if all(stream_mask(tensors, direction).all() for direction in ("forward", "backward")):
            batches.append(tensors)
    assert len(batches) >= count
    return batches[:count]


def test_stream_mode_carries_the_state_and_matches_a_continuous_run(vocab, stream_batches):
    for tensors in stream_batches:
        for direction in ("forward", "backward"):
            assert stream_mask(tensors, direction).all()  # two full windows per row
    # The backward stream predicts <S> (id 0) at the end of every reversed sentence; those
    # targets count.
    backward_targets = stream_concat(stream_batches, "backward_targets", "lm_targets", "tokens")
    assert int((backward_targets == BOS).sum()) >= 2

    model = make_model(vocab)
    fresh = copy.deepcopy(model)  # stateless, never run
    reset_between = copy.deepcopy(model)
    with torch.no_grad():
        carried = [model(**tensors) for tensors in stream_batches]
        first = reset_between(**stream_batches[0])
        reset_between.bilm.reset_states()
        second = reset_between(**stream_batches[1])
    for key in ("forward_loss", "backward_loss"):
        assert torch.equal(carried[0][key], first[key])
        assert abs(float(carried[1][key]) - float(second[key])) > 1e-4, key

    # Reference: each row's two windows as one continuous sequence through a stateless stack.
    expected_nll = {}
    with torch.no_grad():
        for direction_index, direction in enumerate(("forward", "backward")):
            ids = stream_concat(
                stream_batches, f"{direction}_tokens", "elmo_characters", "elmo_tokens"
            )
            targets = stream_concat(stream_batches, f"{direction}_targets", "lm_targets", "tokens")
            mask = torch.ones(ids.shape[:2], dtype=torch.bool)
            embedded = fresh.bilm.encode_tokens(ids, mask)
            top = fresh.bilm.lstm.run_direction(direction_index, embedded, mask)[-1]
            nll = full_softmax_nll(
                fresh, top.reshape(-1, PROJECTION_DIM), targets.reshape(-1).tolist()
            ).view(2, 10)
            expected_nll[direction] = nll
            for window, output in enumerate(carried):
                expected = float(nll[:, 5 * window : 5 * window + 5].mean())
                got = float(output[f"{direction}_loss"])
                print(f"stream {direction} window {window}: {got:.6f} vs {expected:.6f}")
                assert got == pytest.approx(expected, abs=ATOL)
    metrics = model.get_metrics()
    for direction in ("forward", "backward"):
        assert metrics[f"{direction}_ppl"] == pytest.approx(
            math.exp(float(expected_nll[direction].mean())), rel=1e-5
        )

    # Stream mode and sentences mode compute the same biLM: row 0 starts with the corpus's
    # first sentence, forward as <S> w1..wn, backward as </S> wn..w1.
    first_sentence = STREAM_CORPUS[0].split()
    n = len(first_sentence)
    with torch.no_grad():
        sentence_ids = ElmoCharacterIds(50).batch_to_ids([first_sentence])
        sentence_top = fresh.bilm(sentence_ids)["activations"][-1][0]
        for direction_index, direction in enumerate(("forward", "backward")):
            ids = stream_concat(
                stream_batches, f"{direction}_tokens", "elmo_characters", "elmo_tokens"
            )[:1, : n + 1]
            mask = torch.ones(ids.shape[:2], dtype=torch.bool)
            embedded = fresh.bilm.encode_tokens(ids, mask)
            top = fresh.bilm.lstm.run_direction(direction_index, embedded, mask)[-1][0]
            if direction_index == 0:
                expected = sentence_top[: n + 1, :PROJECTION_DIM]
            else:
                expected = sentence_top[1 : n + 2, PROJECTION_DIM:].flip(0)
            assert float((top - expected).abs().max()) < ATOL

    # Switching back to sentences mode forgets the stream state.
    with torch.no_grad():
        after_stream = model(**sentence_tensors(vocab, SENTENCES))
        reference = fresh(**sentence_tensors(vocab, SENTENCES))
    assert torch.equal(after_stream["forward_loss"], reference["forward_loss"])
    assert torch.equal(after_stream["backward_loss"], reference["backward_loss"])


def test_stream_batch_with_an_empty_direction(vocab):
    """
    At the end of an epoch one direction's rows can all be empty while the other still has
    data; the model must train on such a batch (the empty direction contributes loss 0).
    """
    reader = BilmCorpusReader(mode="stream", batch_size=2, unroll_steps=5, shuffle=False)
    instances = []
    for forward, targets in ((["<S>", "the", "cat"], ["the", "cat", "sat"]), ([], [])):
        instance = Instance(
            {
                "forward_tokens": TextField([Token(t) for t in forward]),
                "forward_targets": TextField([Token(t) for t in targets]),
                "backward_tokens": TextField([]),
                "backward_targets": TextField([]),
            }
        )
        reader.apply_token_indexers(instance)
        instances.append(instance)
    batch = Batch(instances)
    batch.index_instances(vocab)
    tensors = batch.as_tensor_dict()
    assert not stream_mask(tensors, "backward").any()
    model = make_model(vocab, dropout=0.1)
    model.train()
    output = model(**tensors)
    output["loss"].backward()
    assert float(output["backward_loss"]) == 0.0
    assert math.isfinite(float(output["loss"].detach())) and float(output["forward_loss"]) > 0


# -- configuration errors -----------------------------------------------------------------------


def plain_vocab(tokens: Sequence[str]) -> Vocabulary:
    vocab = Vocabulary(non_padded_namespaces=["lm_targets"])
    vocab.add_tokens_to_namespace(list(tokens), "lm_targets")
    return vocab


@pytest.mark.parametrize(
    "tokens, message",
    [
        (["</S>", "<UNK>", "the", "cat"], "lacks <S>"),
        (["<S>", "<UNK>", "the", "cat"], "lacks </S>"),
        (["<S>", "</S>", "<UNK>"], "has 3 entries"),
        ([], "has 0 entries"),
    ],
)
def test_vocabulary_errors(tokens, message):
    with pytest.raises(ConfigurationError, match=message):
        ElmoLanguageModel(plain_vocab(tokens), tiny_options())


def test_other_configuration_errors(vocab, tmp_path):
    bad = tiny_options()
    bad["char_cnn"]["n_characters"] = 300
    with pytest.raises(ConfigurationError, match="n_characters"):
        ElmoLanguageModel(vocab, bad)
    with pytest.raises(ConfigurationError, match="not found"):
        ElmoLanguageModel(vocab, tiny_options(), initial_weight_file=str(tmp_path / "missing.hdf5"))
    # The fixture's weights do not fit the tiny architecture: the dataset and shapes are named.
    message = r"dataset 'CNN/W_cnn_2' has shape \(1, 3, 4, 16\)"
    with pytest.raises(ConfigurationError, match=message):
        ElmoLanguageModel(vocab, tiny_options(), initial_weight_file=str(FIXTURE_WEIGHTS))
    with pytest.raises(ConfigurationError, match="either a 'tokens' field"):
        make_model(vocab)()


def _sample_corpus_vocab(tmp_path, order: str) -> BilmTfVocabulary:
    tokens = (REPO_ROOT / "elmo_plugin" / "sample_corpus" / "vocabulary.txt").read_text(
        encoding="utf-8"
    ).split()
    corpus_tokens = tokens[3:]
    if order == "shuffled":
        random.Random(0).shuffle(corpus_tokens)
    path = tmp_path / f"{order}.txt"
    path.write_text("\n".join(tokens[:3] + corpus_tokens) + "\n", encoding="utf-8")
    return BilmTfVocabulary.from_bilm_tf_file(str(path))


@pytest.mark.parametrize(
    "order, check, refused",
    [("sorted", True, False), ("shuffled", True, True), ("shuffled", False, False)],
)
def test_training_refuses_a_vocabulary_not_sorted_by_frequency(tmp_path, order, check, refused):
    # The log-uniform sampler of the sampled softmax assumes Zipf order; a shuffled vocabulary
    # used to train silently with a wrong perplexity. The sample corpus is smaller than the
    # check's 100,000 tokens, so it is judged at the end of the first epoch.
    vocab = _sample_corpus_vocab(tmp_path, order)
    lines = (REPO_ROOT / "elmo_plugin" / "sample_corpus" / "train.txt").read_text(
        encoding="utf-8"
    ).splitlines()[:160]
    model = ElmoLanguageModel(vocab, tiny_options(), num_samples=4, check_vocabulary_order=check)
    model.eval()
    model(**sentence_tensors(vocab, [line.split() for line in lines[:40]]))
    model.get_metrics(reset=True)  # validation neither counts nor judges
    model.train()
    for start in range(0, len(lines), 40):
        model(**sentence_tensors(vocab, [line.split() for line in lines[start : start + 40]]))
    if refused:
        with pytest.raises(ConfigurationError, match=rf"{tmp_path / order}.txt:4 .* comes before"):
            model.get_metrics(reset=True)
    else:
        model.get_metrics(reset=True)


def test_a_warm_restart_starts_from_every_weight_of_the_old_run_and_archives_without_it(
    vocab, tmp_path
):
    """
    ``initializer`` with AllenNLP's ``pretrained`` initializer (bilm_ko_small's
    ``continue_from``): the new model starts from all of the old run's weights, the softmax
    included; and the new run's archive loads after the old run is gone, because AllenNLP drops
    ``initializer`` when it loads an archive.
    """
    from allennlp.common import Params
    from allennlp.models import Model
    from allennlp.models.archival import load_archive

    old_run = tmp_path / "old_run"
    old_run.mkdir()
    old = make_model(vocab, seed=3)
    torch.save(old.state_dict(), old_run / "best.th")
    model_params = {
        "type": "elmo_bilm",
        "options": tiny_options(),
        "num_samples": 4,
        "initializer": {
            "regexes": [[".*", {"type": "pretrained", "weights_file_path": str(old_run / "best.th")}]]
        },
    }
    new = Model.from_params(vocab=vocab, params=Params(copy.deepcopy(model_params)))
    fresh = ElmoLanguageModel(vocab, tiny_options(), num_samples=4)
    old_state, new_state = old.state_dict(), new.state_dict()
    assert set(old_state) == set(new_state)
    for name, value in old_state.items():
        assert torch.equal(new_state[name], value), name
    # Not a coincidence of initialisation: a model built without the initializer differs.
    assert not torch.equal(fresh.softmax.softmax_weight, old.softmax.softmax_weight)

    # The new run trains a step, is archived, and the old run disappears.
    with torch.no_grad():
        new.softmax.softmax_bias.add_(1.0)
    new_run = write_serialization_directory(
        tmp_path / "new_run",
        new,
        {
            "dataset_reader": {"type": "bilm_corpus"},
            "train_data_path": "unused.txt",
            "model": model_params,
            "data_loader": {"batch_size": 2},
            "trainer": {"optimizer": "adam"},
        },
    )
    (old_run / "best.th").unlink()
    loaded = load_archive(str(new_run / "model.tar.gz")).model
    assert torch.equal(loaded.softmax.softmax_bias, old.softmax.softmax_bias + 1.0)


def test_forward_takes_the_fields_that_the_reader_writes():
    # AllenNLP passes each instance field as the keyword argument of the same name.
    import inspect

    from elmo_plugin.data import bilm_fields
    from elmo_plugin.data.dataset_readers import BilmCorpusReader

    parameters = list(inspect.signature(ElmoLanguageModel.forward).parameters)[1:]
    assert parameters == [*bilm_fields.SENTENCE_FIELDS, *bilm_fields.STREAM_FIELDS]
    instance = BilmCorpusReader().text_to_instance(["a", "b"])
    assert tuple(instance.fields) == bilm_fields.SENTENCE_FIELDS
    assert set(instance.fields[bilm_fields.SENTENCE_FIELD].token_indexers) == {
        bilm_fields.CHARACTERS_INDEXER,
        bilm_fields.TARGETS_INDEXER,
    }
