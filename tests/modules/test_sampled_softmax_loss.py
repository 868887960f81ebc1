"""
Tests of `elmo_plugin.modules.sampled_softmax_loss`: the log-uniform sampler against its closed-form
distribution and a sequential TensorFlow-style reference, the expected counts against
high-precision and Monte-Carlo references, and the loss against a float64 hand computation,
AllenNLP's own `SampledSoftmaxLoss` and `torch.nn.functional.cross_entropy`.
"""
import decimal
import math
from typing import List

import numpy as np
import pytest
import torch

from elmo_plugin.modules.sampled_softmax_loss import LogUniformSampler, SampledCandidates, SampledSoftmaxLoss

DEVICES = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])


def reference_probability(k: int, num_words: int) -> float:
    """P(k) exactly as written in TensorFlow's LogUniformSampler, in float64."""
    return (math.log(k + 2) - math.log(k + 1)) / math.log(num_words + 1)


def sequential_unique_sampling(draws: List[int], num_samples: int):
    """The loop of TensorFlow's RangeSampler (and AllenNLP's `_choice`): take draws in order until
    `num_samples` distinct ids have been seen; returns (ids in order of first appearance, tries)."""
    seen, ids = set(), []
    for tries, k in enumerate(draws, start=1):
        if k not in seen:
            seen.add(k)
            ids.append(k)
            if len(ids) == num_samples:
                return ids, tries
    raise AssertionError("the recorded draws do not hold enough distinct ids")


# ------------------------------------------------------------------------------------------------
# The sampler
# ------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("num_words", [1, 2, 7, 1000, 800000])
def test_probabilities_sum_to_one_and_match_the_formula(num_words):
    sampler = LogUniformSampler(num_words)
    probs = sampler.probabilities()
    assert probs.dtype == torch.float64 and probs.shape == (num_words,)
    assert probs.sum().item() == pytest.approx(1.0, abs=1e-9)
    assert (probs[1:] < probs[:-1]).all()  # Zipfian: decreasing with the id
    for k in {0, num_words // 2, num_words - 1}:
        assert probs[k].item() == pytest.approx(reference_probability(k, num_words), rel=1e-8)


def test_draws_follow_the_log_uniform_distribution():
    num_words, num_draws = 1000, 2_000_000
    sampler = LogUniformSampler(num_words)
    generator = torch.Generator().manual_seed(1234)
    draws = sampler.draw(num_draws, generator=generator)
    assert draws.dtype == torch.long and draws.shape == (num_draws,)
    assert draws.min() >= 0 and draws.max() <= num_words - 1

    counts = torch.bincount(draws, minlength=num_words).double()
    expected = torch.tensor([reference_probability(k, num_words) for k in range(num_words)])
    expected = expected.double() * num_draws
    assert expected.min() > 100  # every bin is large enough for the chi-square approximation
    # Chi-square with V - 1 degrees of freedom: mean df, sd sqrt(2 df); 6 sd is a safe bound.
    chi_square = (((counts - expected) ** 2) / expected).sum().item()
    dof = num_words - 1
    assert chi_square < dof + 6 * math.sqrt(2 * dof), chi_square
    # And no single id off by more than 6 binomial standard deviations.
    p = expected / num_draws
    freq = counts / num_draws
    assert ((freq - p).abs() <= 6 * torch.sqrt(p * (1 - p) / num_draws)).all()


def test_a_vocabulary_of_one_always_draws_zero():
    sampler = LogUniformSampler(1)
    assert (sampler.draw(1000) == 0).all()


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("num_words,num_samples", [(10, 1), (10, 9), (50, 25), (800000, 8192)])
def test_sample_returns_exactly_s_unique_ids_on_the_device(device, num_words, num_samples):
    sampler = LogUniformSampler(num_words)
    for _ in range(3):
        ids, num_tries = sampler.sample(num_samples, device=device)
        assert ids.device.type == device and ids.dtype == torch.long
        assert ids.shape == (num_samples,)
        assert ids.unique().numel() == num_samples
        assert ids.min() >= 0 and ids.max() < num_words
        assert num_tries >= num_samples and num_tries == int(num_tries)


@pytest.mark.parametrize("chunk_size", [None, 1, 7, 64])
def test_sample_matches_the_sequential_tensorflow_loop(monkeypatch, chunk_size):
    """The vectorised first-occurrence bookkeeping, over one or many chunks, gives the same ids
    (in the same order) and the same num_tries as the draw-by-draw loop over the same draws."""
    num_words, num_samples = 300, 60
    sampler = LogUniformSampler(num_words)
    recorded: List[torch.Tensor] = []
    original_draw = sampler.draw

    def recording_draw(*args, **kwargs):
        draws = original_draw(*args, **kwargs)
        recorded.append(draws.clone())
        return draws

    monkeypatch.setattr(sampler, "draw", recording_draw)
    if chunk_size is not None:
        monkeypatch.setattr(sampler, "_next_chunk_size", lambda *args: chunk_size)
    generator = torch.Generator().manual_seed(chunk_size or 0)
    for _ in range(5):
        recorded.clear()
        ids, num_tries = sampler.sample(num_samples, generator=generator)
        if chunk_size is not None:
            assert len(recorded) > 1  # the multi-chunk path was exercised
        all_draws = torch.cat(recorded).tolist()
        expected_ids, expected_tries = sequential_unique_sampling(all_draws, num_samples)
        assert ids.tolist() == expected_ids
        assert num_tries == expected_tries


def test_sample_everything_when_s_is_at_least_v():
    sampler = LogUniformSampler(20)
    for num_samples in (20, 25):
        ids, num_tries = sampler.sample(num_samples)
        assert ids.tolist() == list(range(20))
        # Every id is certain to be in the "sample": expected count 1, log 0.
        assert torch.equal(sampler.log_expected_count(ids, num_tries), torch.zeros(20).double())


def test_sample_is_reproducible_with_a_generator():
    sampler = LogUniformSampler(5000)
    first = sampler.sample(500, generator=torch.Generator().manual_seed(3))
    second = sampler.sample(500, generator=torch.Generator().manual_seed(3))
    assert torch.equal(first[0], second[0]) and first[1] == second[1]


# ------------------------------------------------------------------------------------------------
# Expected counts
# ------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("num_words", [50, 800000])
def test_log_expected_count_matches_direct_and_high_precision_computations(num_words):
    sampler = LogUniformSampler(num_words)
    ids = sorted({0, 1, 2, 17, num_words // 3, num_words - 2, num_words - 1})
    decimal.getcontext().prec = 60
    for num_tries in (1, 2, 8192, 16043, 10 ** 9):
        ours = sampler.log_expected_count(torch.tensor(ids), num_tries)
        assert ours.dtype == torch.float64
        for k, value in zip(ids, ours.tolist()):
            # Direct float64: log(1 - (1 - p)^T).
            p = reference_probability(k, num_words)
            one_minus = (1.0 - p) ** num_tries
            if one_minus < 1.0:
                direct = math.log(1.0 - one_minus)
                assert value == pytest.approx(direct, rel=1e-6, abs=1e-12), (k, num_tries)
            # 60-digit reference, which the stable float64 formula matches to ~1e-12.
            p_exact = ((decimal.Decimal(k + 2).ln() - decimal.Decimal(k + 1).ln())
                       / decimal.Decimal(num_words + 1).ln())
            exact = float((1 - (1 - p_exact) ** num_tries).ln())
            assert value == pytest.approx(exact, rel=1e-10, abs=1e-14), (k, num_tries)


def test_expected_count_is_the_inclusion_probability_monte_carlo():
    num_words, num_tries, trials = 50, 30, 20000
    sampler = LogUniformSampler(num_words)
    generator = torch.Generator().manual_seed(7)
    ids = torch.tensor([0, 3, 10, 30, 49])
    expected = sampler.log_expected_count(ids, num_tries).exp()

    # With exactly `num_tries` draws with replacement, Q(id) is exactly the probability that the
    # id appears among them.
    draws = sampler.draw(trials * num_tries, generator=generator).view(trials, num_tries)
    empirical = (draws.unsqueeze(-1) == ids).any(dim=1).double().mean(dim=0)
    sd = torch.sqrt(expected * (1 - expected) / trials)
    assert ((empirical - expected).abs() <= 5 * sd).all(), (empirical, expected)

    # TensorFlow's use of it for unique sampling (Q evaluated at the realised num_tries) is an
    # approximation of the inclusion probability of the unique sampler: close, not exact.
    num_samples, calls = 10, 600
    included = torch.zeros(len(ids), dtype=torch.float64)
    q_sum = torch.zeros(len(ids), dtype=torch.float64)
    for _ in range(calls):
        sampled, tries = sampler.sample(num_samples, generator=generator)
        included += (sampled.unsqueeze(-1) == ids).any(dim=0).double()
        q_sum += sampler.log_expected_count(ids, tries).exp()
    included, q_mean = included / calls, q_sum / calls
    assert ((included - q_mean).abs() < 0.07).all(), (included, q_mean)


# ------------------------------------------------------------------------------------------------
# The loss
# ------------------------------------------------------------------------------------------------
def make_loss(num_words, embedding_dim, num_samples, seed=0, dtype=torch.float32):
    torch.manual_seed(seed)
    loss = SampledSoftmaxLoss(num_words, embedding_dim, num_samples=num_samples).to(dtype)
    with torch.no_grad():
        loss.softmax_bias.normal_(0.0, 0.5)  # nonzero, so that a mix-up of biases shows
    return loss


def hand_sampled_nll(embeddings, targets, weight, bias, sampled_ids, num_tries, num_words):
    """bilm-tf's sampled softmax, row by row, in Python floats."""

    def log_q(k):
        p = reference_probability(k, num_words)
        return math.log(1.0 - (1.0 - p) ** num_tries)

    def logit(k, e):
        return sum(w * x for w, x in zip(weight[k], e)) + bias[k] - log_q(k)

    losses = []
    for e, y in zip(embeddings, targets):
        true = logit(y, e)
        negatives = [logit(s, e) for s in sampled_ids if s != y]  # accidental hits removed
        all_logits = [true] + negatives
        top = max(all_logits)
        log_z = top + math.log(sum(math.exp(v - top) for v in all_logits))
        losses.append(log_z - true)
    return losses


def test_sampled_loss_equals_a_float64_hand_computation():
    num_words, dim = 10, 4
    loss = make_loss(num_words, dim, num_samples=4, dtype=torch.float64).train()
    sampled_ids = torch.tensor([0, 3, 7, 9])
    num_tries = 6.0
    targets = torch.tensor([3, 1, 9, 5, 0])  # rows 0, 2 and 4 have accidental hits
    embeddings = torch.randn(5, dim, dtype=torch.float64)
    sampled = SampledCandidates(
        sampled_ids, loss.sampler.log_expected_count(sampled_ids, num_tries), num_tries
    )
    ours = loss(embeddings, targets, sampled=sampled)
    assert ours.shape == (5,) and ours.dtype == torch.float64

    args = (
        embeddings.tolist(), targets.tolist(), loss.softmax_weight.tolist(),
        loss.softmax_bias.tolist(), sampled_ids.tolist(), num_tries, num_words,
    )
    expected = hand_sampled_nll(*args)
    assert ours.tolist() == pytest.approx(expected, rel=1e-12)

    # The accidental hits matter: keeping them would give a different (larger) loss.
    with_hits = []
    for i, (e, y) in enumerate(zip(*args[:2])):
        w, b = args[2], args[3]
        logits = [sum(a * c for a, c in zip(w[k], e)) + b[k]
                  - math.log(1 - (1 - reference_probability(k, num_words)) ** num_tries)
                  for k in [y] + sampled_ids.tolist()]
        with_hits.append(math.log(sum(math.exp(v) for v in logits)) - logits[0])
    for row in (0, 2, 4):
        assert with_hits[row] > expected[row] + 1e-6
    for row in (1, 3):
        assert with_hits[row] == pytest.approx(expected[row], rel=1e-12)


def test_same_samples_give_the_same_loss_as_allennlp(monkeypatch):
    from allennlp.modules import sampled_softmax_loss as allennlp_module

    num_words, dim, num_samples, rows = 60, 8, 12, 40
    ours = make_loss(num_words, dim, num_samples).train()
    sampler = ours.sampler
    sampled_ids, num_tries = sampler.sample(num_samples, generator=torch.Generator().manual_seed(5))
    calls = []

    def fixed_choice(n_words, n_samples):
        assert (n_words, n_samples) == (num_words, num_samples)
        calls.append(1)
        return sampled_ids.numpy().copy(), int(num_tries)

    # AllenNLP binds its numpy sampler `_choice` at construction time.
    monkeypatch.setattr(allennlp_module, "_choice", fixed_choice)
    theirs = allennlp_module.SampledSoftmaxLoss(num_words, dim, num_samples).train()
    with torch.no_grad():
        theirs.softmax_w.copy_(ours.softmax_weight)
        theirs.softmax_b.copy_(ours.softmax_bias)

    torch.manual_seed(11)
    embeddings = torch.randn(rows, dim)
    targets = torch.randint(0, num_words, (rows,))
    targets[:4] = sampled_ids[:4]  # accidental hits
    emb_ours = embeddings.clone().requires_grad_()
    emb_theirs = embeddings.clone().requires_grad_()

    sampled = SampledCandidates(
        sampled_ids, sampler.log_expected_count(sampled_ids, num_tries), num_tries
    )
    loss_ours = ours(emb_ours, targets, sampled=sampled)
    loss_theirs = theirs(emb_theirs, targets)  # the SUM over tokens
    assert calls, "AllenNLP did not use the patched sampler"
    assert loss_ours.sum().item() == pytest.approx(loss_theirs.item(), rel=1e-5)

    # Their expected counts are the same quantity, computed in float32 via log((k+2)/(k+1)),
    # whose relative error grows like 1e-7 * k (a few 1e-6 for the ids < 60 used here; that is
    # why the vocabulary is small).
    _, target_count, sampled_count = theirs.log_uniform_candidate_sampler(targets, fixed_choice)
    for ids, count in ((sampled_ids, sampled_count), (targets, target_count)):
        torch.testing.assert_close(
            sampler.log_expected_count(ids, num_tries).exp().float(), count, rtol=2e-5, atol=0
        )

    # Same gradients (their -10000 for accidental hits and our -FLT_MAX both give exp() == 0).
    loss_ours.sum().backward()
    loss_theirs.backward()
    torch.testing.assert_close(emb_ours.grad, emb_theirs.grad, rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(
        ours.softmax_weight.grad, theirs.softmax_w.grad, rtol=1e-4, atol=1e-5
    )
    torch.testing.assert_close(ours.softmax_bias.grad, theirs.softmax_b.grad, rtol=1e-4, atol=1e-5)

    # Evaluation: both are the full softmax (theirs summed).
    ours.eval()
    theirs.eval()
    with torch.no_grad():
        assert ours(embeddings, targets).sum().item() == pytest.approx(
            theirs(embeddings, targets).item(), rel=1e-5
        )


@pytest.mark.parametrize("max_eval_logits", [None, 1, 50 * 4, 50 * 36])
def test_eval_is_the_full_softmax_cross_entropy(max_eval_logits):
    num_words, dim, rows = 50, 8, 37
    loss = make_loss(num_words, dim, num_samples=10).eval()
    if max_eval_logits is not None:
        loss.max_eval_logits = max_eval_logits  # 1 row, 4 rows (last chunk partial), 36 rows
    embeddings = torch.randn(rows, dim, requires_grad=True)
    targets = torch.randint(0, num_words, (rows,))
    ours = loss(embeddings, targets)

    reference_embeddings = embeddings.detach().clone().requires_grad_()
    logits = reference_embeddings @ loss.softmax_weight.t() + loss.softmax_bias
    expected = torch.nn.functional.cross_entropy(logits, targets, reduction="none")
    torch.testing.assert_close(ours, expected, rtol=1e-6, atol=1e-6)

    ours.sum().backward()
    expected.sum().backward()
    torch.testing.assert_close(embeddings.grad, reference_embeddings.grad, rtol=1e-5, atol=1e-6)


def test_training_with_s_at_least_v_is_the_full_softmax():
    loss = make_loss(30, 6, num_samples=30).train()
    embeddings, targets = torch.randn(9, 6), torch.randint(0, 30, (9,))
    logits = embeddings @ loss.softmax_weight.t() + loss.softmax_bias
    expected = torch.nn.functional.cross_entropy(logits, targets, reduction="none")
    torch.testing.assert_close(loss(embeddings, targets), expected)
    # The sample for S >= V (all ids, log Q = 0) makes the sampled formula exact as well.
    torch.testing.assert_close(
        loss._sampled_softmax_nll(embeddings, targets, loss.sample()), expected
    )


def test_gradient_touches_only_targets_and_samples():
    num_words, dim, rows = 100, 8, 16
    loss = make_loss(num_words, dim, num_samples=10).train()
    sampled = loss.sample(generator=torch.Generator().manual_seed(2))
    targets = torch.randint(0, num_words, (rows,))
    loss(torch.randn(rows, dim), targets, sampled=sampled).sum().backward()

    touched = torch.zeros(num_words, dtype=torch.bool)
    touched[targets] = True
    touched[sampled.ids] = True
    assert touched.sum() < num_words  # the test can tell
    weight_rows_with_grad = loss.softmax_weight.grad.abs().sum(dim=1) > 0
    bias_with_grad = loss.softmax_bias.grad != 0
    assert torch.equal(weight_rows_with_grad, touched)
    assert torch.equal(bias_with_grad, touched)


def test_one_shared_sample_per_call_and_shareable_between_calls():
    loss = make_loss(200, 8, num_samples=20).train()
    embeddings, targets = torch.randn(12, 8), torch.randint(0, 200, (12,))
    sampled = loss.sample()
    assert isinstance(sampled, SampledCandidates)
    assert sampled.ids.shape == (20,) and sampled.log_expected_count.shape == (20,)
    # The same sample gives the same loss (forward and backward directions can share it)...
    torch.testing.assert_close(
        loss(embeddings, targets, sampled=sampled), loss(embeddings, targets, sampled=sampled)
    )
    # ...and without one, every call draws a fresh one, reproducibly under the global seed.
    torch.manual_seed(0)
    first = loss(embeddings, targets)
    second = loss(embeddings, targets)
    torch.manual_seed(0)
    again = loss(embeddings, targets)
    assert not torch.allclose(first, second)
    torch.testing.assert_close(first, again)


def test_empty_batch():
    loss = make_loss(40, 4, num_samples=8)
    for mode in (loss.train, loss.eval):
        mode()
        out = loss(torch.zeros(0, 4), torch.zeros(0, dtype=torch.long))
        assert out.shape == (0,)


def test_sampled_loss_approaches_the_full_softmax_with_most_of_the_vocabulary():
    num_words, dim, rows = 200, 16, 256
    loss = make_loss(num_words, dim, num_samples=190)
    torch.manual_seed(3)
    embeddings = torch.randn(rows, dim) * 2.0
    targets = torch.randint(0, num_words, (rows,))
    with torch.no_grad():
        full = loss.eval()(embeddings, targets).mean().item()
        loss.train()
        sampled = [loss(embeddings, targets).mean().item() for _ in range(10)]
        loss.num_samples = 20
        few = [loss(embeddings, targets).mean().item() for _ in range(10)]
    assert np.mean(sampled) == pytest.approx(full, rel=0.03)
    # (With few samples the estimate is much further off: the check above can tell.)
    assert abs(np.mean(few) - full) > 3 * abs(np.mean(sampled) - full)


# ------------------------------------------------------------------------------------------------
# Sampling in one fixed-size chunk, and sparse row gradients
# ------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("num_words,num_samples", [(12, 4), (160, 64), (300, 60), (1000, 999),
                                                   (800000, 8192)])
def test_one_chunk_sampling_is_the_sequential_loop_over_its_draws(monkeypatch, num_words, num_samples):
    sampler = LogUniformSampler(num_words)
    size = sampler.one_chunk_size(num_samples)
    assert size is not None and size >= sampler.expected_num_tries(num_samples)
    recorded: List[torch.Tensor] = []
    original_draw = sampler.draw

    def recording_draw(*args, **kwargs):
        recorded.append(original_draw(*args, **kwargs))
        return recorded[-1]

    monkeypatch.setattr(sampler, "draw", recording_draw)
    generator = torch.Generator().manual_seed(num_samples)
    for _ in range(3):
        recorded.clear()
        ids, num_tries = sampler.sample_in_one_chunk(num_samples, generator=generator)
        assert len(recorded) == 1 and recorded[0].numel() == size
        expected_ids, expected_tries = sequential_unique_sampling(recorded[0].tolist(), num_samples)
        assert ids.tolist() == expected_ids
        assert isinstance(num_tries, torch.Tensor) and num_tries.dtype == torch.float64
        assert float(num_tries) == expected_tries


def test_the_one_chunk_size_bounds_a_short_chunk_by_chernoff_and_markov():
    # 8192 of the 1B Word Benchmark's 793,471 words: about 10% above the expected draws.
    sampler = LogUniformSampler(793_471)
    expected = sampler.expected_num_tries(8192)
    assert expected < sampler.one_chunk_size(8192) < 1.15 * expected
    # Near the whole vocabulary the Markov bound on the words never drawn decides: a short
    # chunk in 2,000 draws of 12 words must stay (far) below 1e-15; a Monte-Carlo check at a
    # size where it is not negligible shows that the bound is an upper one.
    small = LogUniformSampler(12)
    assert small.one_chunk_size(11) is not None
    draws = small.draw(200 * 40, generator=torch.Generator().manual_seed(0)).view(200, 40)
    short = sum(len(set(row.tolist())) < 11 for row in draws)
    log1m_p = torch.log1p(-small.probabilities())
    never_drawn = float(torch.exp(40 * log1m_p).sum())
    assert short / 200 <= never_drawn / (12 - 11 + 1) + 0.05
    # Nearly all of a large vocabulary needs more draws than one chunk holds: chunk by chunk.
    assert LogUniformSampler(800_000).one_chunk_size(799_000) is None


def test_sampling_and_the_sampled_loss_do_not_read_the_device():
    from torch.utils._python_dispatch import TorchDispatchMode

    class Reads(TorchDispatchMode):
        found: List[str] = []

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            if func in (torch.ops.aten._local_scalar_dense.default, torch.ops.aten._unique2.default,
                        torch.ops.aten.nonzero.default):
                self.found.append(str(func))
            return func(*args, **(kwargs or {}))

    loss = SampledSoftmaxLoss(50_000, 8, num_samples=512, sparse_gradients=True)
    loss.sample()  # the chunk's size is computed once, on the host, from the sizes alone
    embeddings = torch.randn(30, 8, requires_grad=True)
    with Reads() as reads:
        sampled = loss.sample()
        loss(embeddings, torch.randint(0, 50_000, (30,)), sampled).sum().backward()
    assert reads.found == []
    # The chunk-by-chunk sampler reads the number of distinct ids of its chunk.
    with Reads() as reads:
        loss.sampler.sample(512)
    assert reads.found


def test_sparse_row_gradients_are_the_dense_gradients():
    torch.manual_seed(0)
    dense = SampledSoftmaxLoss(200, 6, num_samples=40)
    sparse = SampledSoftmaxLoss(200, 6, num_samples=40, sparse_gradients=True)
    sparse.load_state_dict(dense.state_dict())
    embeddings = torch.randn(50, 6)
    targets = torch.randint(0, 20, (50,))  # repeated ids, some also among the negatives
    sampled = dense.sample(generator=torch.Generator().manual_seed(1))
    for module in (dense, sparse):
        module(embeddings, targets, sampled).sum().backward()
    for name in ("softmax_weight", "softmax_bias"):
        gradient = getattr(sparse, name).grad
        assert gradient.is_sparse
        assert gradient._nnz() == 50 + 40  # one position per gathered row: no data-dependent size
        assert torch.equal(gradient.to_dense(), getattr(dense, name).grad), name
    # Evaluation and the full softmax stay dense.
    sparse.zero_grad()
    sparse.eval()
    sparse(embeddings, targets).sum().backward()
    assert not sparse.softmax_weight.grad.is_sparse
