"""
Sampled softmax for training the ELMo biLM, as bilm-tf does it, with the sampling on the model's
device.

bilm-tf trains its output layer with ``tf.nn.sampled_softmax_loss`` and TensorFlow's default
candidate sampler, ``log_uniform_candidate_sampler(unique=True)``: for every batch it draws
``num_samples`` (8192) *distinct* negative word ids from a log-uniform (Zipfian) distribution over
the frequency-sorted vocabulary, subtracts the log of each id's expected count from its logit
(so the sampled softmax estimates the full one), and removes "accidental hits" (a negative that
is the row's own target). Evaluation uses the full softmax, which gives the true perplexity.

AllenNLP's ``allennlp.modules.sampled_softmax_loss.SampledSoftmaxLoss`` does the same with a
numpy sampler, a Python loop and a host-to-device copy on every batch; here the draws, the
uniqueness bookkeeping and the expected counts are torch operations on the model's device.
"""
import math
from typing import Dict, List, NamedTuple, Optional, Tuple, Union

import torch
from torch import nn

# Upper bound on how many draws one chunk of the unique sampler holds (float64 + int64 per draw:
# 2**24 draws is about 256 MB), so that a request for nearly the whole vocabulary, which can take
# hundreds of millions of draws, runs in bounded memory.
_MAX_CHUNK = 2 ** 24


class LogUniformSampler:
    """
    The log-uniform (Zipfian) candidate sampler of TensorFlow's
    ``log_uniform_candidate_sampler``, on the model's device.

    Word ids ``0 .. num_words - 1`` must be sorted by descending frequency (bilm-tf's vocabulary
    file is). Id ``k`` has probability

        P(k) = (log(k + 2) - log(k + 1)) / log(num_words + 1),

    which telescopes to 1 over the vocabulary. A draw uses the closed-form inverse of the
    cumulative distribution, ``k = floor(exp(u * log(num_words + 1))) - 1`` with ``u ~ U[0, 1)``,
    exactly as TensorFlow's ``LogUniformSampler::Sample`` does (in double precision, which we
    keep: in float32 the ``floor`` near large ids would be off by one for a noticeable fraction
    of draws).

    # Parameters

    num_words : `int`
        The vocabulary size ``V``.
    """

    def __init__(self, num_words: int) -> None:
        if num_words < 1:
            raise ValueError(f"num_words must be positive, got {num_words}")
        self.num_words = num_words
        self._log_range = math.log(num_words + 1)
        # num_samples -> expected number of draws needed for that many distinct ids; see
        # `expected_num_tries`. Cached because it costs a few passes over the vocabulary.
        self._expected_tries: Dict[int, float] = {}

    # ----------------------------------------------------------------------------------------
    # The distribution
    # ----------------------------------------------------------------------------------------
    def _float_dtype(self, device: torch.device) -> torch.dtype:
        # float64 everywhere it exists (MPS has none).
        return torch.float32 if torch.device(device).type == "mps" else torch.float64

    def probability(self, ids: torch.Tensor) -> torch.Tensor:
        """
        P(id) for a tensor of ids, in float64 (float32 on MPS), on the ids' device.

        Computed as ``log1p(1 / (id + 1)) / log(V + 1)``: the textbook
        ``log((id + 2) / (id + 1))`` loses most of its digits for large ids (the ratio is within
        ``1e-6`` of 1 at ``id = 800000``), which is what AllenNLP's float32 version does.

        # Parameters

        ids : `torch.LongTensor`
            Any shape.

        # Returns

        `torch.Tensor`
            Same shape as ``ids``.
        """
        ids_float = ids.to(self._float_dtype(ids.device))
        return torch.log1p(1.0 / (ids_float + 1.0)) / self._log_range

    def probabilities(self, device: Union[str, torch.device, None] = None) -> torch.Tensor:
        """
        P(k) for every id ``k`` of the vocabulary, shape ``(num_words,)``.
        """
        return self.probability(torch.arange(self.num_words, device=device))

    def draw(
        self,
        num_draws: int,
        device: Union[str, torch.device, None] = None,
        generator: Optional[torch.Generator] = None,
    ) -> torch.LongTensor:
        """
        ``num_draws`` independent draws *with replacement*.

        # Parameters

        num_draws : `int`
        device : `torch.device`, optional
            Where to draw (default: the current default device, usually the CPU).
        generator : `torch.Generator`, optional
            A generator on ``device``; the global generator of that device if omitted.

        # Returns

        `torch.LongTensor`
            Shape ``(num_draws,)``, values in ``[0, num_words)``.
        """
        u = torch.rand(
            num_draws, device=device, dtype=self._float_dtype(device or "cpu"), generator=generator
        )
        # floor(exp(u * log(V + 1))) is in [1, V + 1); the clamp only guards against rounding
        # at the top end, as TensorFlow's and AllenNLP's samplers do.
        ids = torch.exp(u * self._log_range).long() - 1
        return ids.clamp_(0, self.num_words - 1)

    def expected_num_tries(self, num_samples: int) -> float:
        """
        The number of draws ``T`` after which the expected number of distinct ids,
        ``sum_k 1 - (1 - P(k))^T``, reaches ``num_samples`` (within 2 %, by bisection on
        ``log T``, on the CPU in float64, once per ``num_samples``). Used only to size the chunks of
        `sample` so that one chunk almost always suffices.
        """
        if num_samples in self._expected_tries:
            return self._expected_tries[num_samples]
        if num_samples >= self.num_words:
            raise ValueError("expected_num_tries needs num_samples < num_words")
        log1m_p = torch.log1p(-self.probabilities("cpu"))

        def expected_distinct(tries: float) -> float:
            return float((-torch.expm1(tries * log1m_p)).sum())

        # E[distinct](T) is increasing in T and <= T, so T >= num_samples; double until above.
        low, high = float(num_samples), 2.0 * num_samples
        while expected_distinct(high) < num_samples:
            low, high = high, 2.0 * high
        # 2 % is plenty for sizing chunks (the first one has a 25 % margin): ~6 steps.
        while high / low > 1.02:
            mid = math.sqrt(low * high)
            if expected_distinct(mid) < num_samples:
                low = mid
            else:
                high = mid
        self._expected_tries[num_samples] = high
        return high

    def _next_chunk_size(self, num_samples: int, num_found: int) -> int:
        """
        How many draws the next chunk of `sample` takes. The first chunk is 25 % (and a few
        hundred draws) above the expected number of tries: the spread of the number of tries
        is a few percent of it, so a second chunk is very rarely needed; later chunks are
        smaller top-ups.
        """
        expected = self.expected_num_tries(num_samples)
        if num_found == 0:
            size = 1.25 * expected + 256
        else:
            size = max(0.25 * expected, 4.0 * (num_samples - num_found), 1024.0)
        return int(min(math.ceil(size), _MAX_CHUNK))

    # ----------------------------------------------------------------------------------------
    # Unique sampling, TensorFlow style
    # ----------------------------------------------------------------------------------------
    def sample(
        self,
        num_samples: int,
        device: Union[str, torch.device, None] = None,
        generator: Optional[torch.Generator] = None,
    ) -> Tuple[torch.LongTensor, float]:
        """
        ``num_samples`` distinct ids, drawn as TensorFlow's unique sampler does: draw with
        replacement until ``num_samples`` distinct ids have been seen, and report how many draws
        that took (``num_tries``), which is what the expected counts depend on.

        Vectorised: a chunk of draws is made at once, the first occurrence of every distinct id
        is found with ``torch.unique`` + ``scatter_reduce``, and the distinct ids are kept in order
        of first appearance; ``num_tries`` is one plus the (global) position of the
        ``num_samples``-th distinct id, exactly what the sequential loop would count. Another
        chunk is drawn only if the first did not hold enough distinct ids. The only host
        synchronisations are scalar reads (the size of ``torch.unique``'s output, once per
        chunk, and ``num_tries`` at the end); no data goes through numpy or the host.

        # Parameters

        num_samples : `int`
            ``S``, the number of distinct ids wanted.
        device : `torch.device`, optional
            Where to draw and where the result lives.
        generator : `torch.Generator`, optional
            A generator on ``device``.

        # Returns

        sampled_ids : `torch.LongTensor`
            Shape ``(min(S, num_words),)``, distinct, in order of first appearance.
        num_tries : `float`
            The number of draws it took (an integer value, ``>= S``). If ``S >= num_words``
            every id is returned and ``num_tries`` is ``inf``, so that `log_expected_count` is
            exactly 0 (every id is certain to be in the sample).
        """
        if num_samples >= self.num_words:
            return torch.arange(self.num_words, device=device), math.inf
        if num_samples <= 0:
            return torch.zeros(0, dtype=torch.long, device=device), 0.0

        found_ids: List[torch.Tensor] = []
        found_positions: List[torch.Tensor] = []
        num_found = 0
        offset = 0  # draws made in earlier chunks
        while num_found < num_samples:
            chunk_size = self._next_chunk_size(num_samples, num_found)
            draws = self.draw(chunk_size, device=device, generator=generator)
            # Distinct ids of this chunk and the position of each one's first occurrence.
            unique_ids, inverse = torch.unique(draws, return_inverse=True)
            first = torch.full_like(unique_ids, chunk_size).scatter_reduce_(
                0, inverse, torch.arange(chunk_size, device=draws.device), reduce="amin"
            )
            # Ids already seen in an earlier chunk are not new: their first appearance is earlier.
            if found_ids:
                new = ~torch.isin(unique_ids, torch.cat(found_ids))
                unique_ids, first = unique_ids[new], first[new]
            order = torch.argsort(first)
            found_ids.append(unique_ids[order])
            found_positions.append(first[order] + offset)
            num_found += int(unique_ids.numel())  # the host read
            offset += chunk_size

        ids = torch.cat(found_ids)[:num_samples]
        num_tries = int(torch.cat(found_positions)[num_samples - 1]) + 1
        return ids, float(num_tries)

    def log_expected_count(self, ids: torch.Tensor, num_tries: float) -> torch.Tensor:
        """
        log Q(id): the log of the probability that ``id`` is among ``num_tries`` draws with
        replacement, ``log(1 - (1 - P(id))^num_tries)``, which is the expected count TensorFlow
        uses for unique sampling. Computed stably as ``log(-expm1(num_tries * log1p(-P)))``:
        ``(1 - P)^T`` is within rounding of 1 for rare ids. ``num_tries = inf`` gives 0.

        (TensorFlow's ``ExpectedCountHelper`` has one shortcut, ``P * S`` when the draws had no
        repeats at all, ``num_tries == S``; with a Zipfian vocabulary and thousands of samples that
        never happens, and the formula here is the exact inclusion probability in that case too.)

        # Parameters

        ids : `torch.LongTensor`
            Any shape.
        num_tries : `float`
            As returned by `sample`.

        # Returns

        `torch.Tensor`
            Same shape as ``ids``, float64 (float32 on MPS), on the ids' device.
        """
        log1m_p = torch.log1p(-self.probability(ids))
        return torch.log(-torch.expm1(num_tries * log1m_p))


class SampledCandidates(NamedTuple):
    """
    One draw of negatives, shareable between several calls of `SampledSoftmaxLoss` (bilm-tf's
    forward and backward directions share one per batch).

    ids : `torch.LongTensor`, shape ``(S,)``
    log_expected_count : `torch.Tensor`, shape ``(S,)``, log Q of each id
    num_tries : `float`, needed for log Q of the targets
    """

    ids: torch.Tensor
    log_expected_count: torch.Tensor
    num_tries: float


class SampledSoftmaxLoss(nn.Module):
    """
    The output layer and loss of the biLM: a softmax over the vocabulary, trained with bilm-tf's
    sampled softmax (``tf.nn.sampled_softmax_loss`` with log-uniform unique sampling) and
    evaluated with the full softmax.

    In training mode one set of ``num_samples`` distinct negatives is drawn per call (bilm-tf
    draws one per batch and shares it across all tokens), or taken from ``sampled`` (see
    `sample`). For each row ``i`` with target ``y_i`` the logits are

        true:    w_y . e_i + b_y - log Q(y_i)
        sampled: w_s . e_i + b_s - log Q(s)     for every sampled id s,

    where ``Q`` is the expected count of `LogUniformSampler.log_expected_count`; a sampled id equal
    to ``y_i`` is masked out for that row (TensorFlow's ``remove_accidental_hits``), and the loss is
    ``-log_softmax`` of the true logit among ``[true, sampled...]``. Only the rows of the softmax
    matrix for the targets and the samples get a gradient.

    In evaluation mode (and in training when ``num_samples >= num_words``) it is the full softmax
    negative log likelihood, computed over chunks of rows so that at most ``max_eval_logits``
    logits exist at once.

    Unlike AllenNLP's ``SampledSoftmaxLoss``, which returns the sum, this returns the loss of every
    token, so the caller can mask padding and choose the normalisation.

    # Parameters

    num_words : `int`
        Vocabulary size ``V``; ids must be sorted by descending frequency.
    embedding_dim : `int`
        Dimension ``D`` of the inputs (the biLM's projection dimension).
    num_samples : `int`, optional (default = `8192`)
        Negatives per call in training (bilm-tf's ``n_negative_samples_batch``).
    max_eval_logits : `int`, optional (default = `2**26`)
        Most logits materialised at once by the full softmax (64M floats = 256 MB in float32).
    """

    def __init__(
        self,
        num_words: int,
        embedding_dim: int,
        num_samples: int = 8192,
        max_eval_logits: int = 2 ** 26,
    ) -> None:
        super().__init__()
        self.num_words = num_words
        self.embedding_dim = embedding_dim
        self.num_samples = num_samples
        self.max_eval_logits = max_eval_logits
        self.sampler = LogUniformSampler(num_words)
        # bilm-tf: tf.random_normal_initializer(0.0, 1.0 / sqrt(projection_dim)), zero bias.
        self.softmax_weight = nn.Parameter(torch.empty(num_words, embedding_dim))
        self.softmax_bias = nn.Parameter(torch.zeros(num_words))
        self.reset_parameters()

    def reset_parameters(self) -> None:
        nn.init.normal_(self.softmax_weight, mean=0.0, std=1.0 / math.sqrt(self.embedding_dim))
        nn.init.zeros_(self.softmax_bias)

    def extra_repr(self) -> str:
        return (
            f"num_words={self.num_words}, embedding_dim={self.embedding_dim}, "
            f"num_samples={self.num_samples}"
        )

    def sample(
        self,
        device: Union[str, torch.device, None] = None,
        generator: Optional[torch.Generator] = None,
    ) -> SampledCandidates:
        """
        Draws one set of ``num_samples`` negatives, to pass as ``sampled`` to several calls of
        `forward` (e.g. both directions of the biLM, as bilm-tf does).

        # Parameters

        device : `torch.device`, optional (default = the device of the softmax weights)
        generator : `torch.Generator`, optional
            A generator on ``device``.
        """
        if device is None:
            device = self.softmax_weight.device
        ids, num_tries = self.sampler.sample(self.num_samples, device=device, generator=generator)
        return SampledCandidates(ids, self.sampler.log_expected_count(ids, num_tries), num_tries)

    def forward(
        self,
        embeddings: torch.Tensor,
        targets: torch.Tensor,
        sampled: Optional[SampledCandidates] = None,
    ) -> torch.Tensor:
        """
        # Parameters

        embeddings : `torch.Tensor`
            Shape ``(N, D)``: the biLM's output for each token to predict (padding removed).
        targets : `torch.LongTensor`
            Shape ``(N,)``: the id of the next (forward) or previous (backward) token.
        sampled : `SampledCandidates`, optional
            Negatives from `sample`, used in training mode instead of drawing new ones; ignored
            when the full softmax is used.

        # Returns

        `torch.Tensor`
            Shape ``(N,)``: the negative log likelihood of each target (sampled estimate in
            training, exact in evaluation).
        """
        if not self.training or self.num_samples >= self.num_words:
            return self._full_softmax_nll(embeddings, targets)
        if sampled is None:
            sampled = self.sample(embeddings.device)
        return self._sampled_softmax_nll(embeddings, targets, sampled)

    def _sampled_softmax_nll(
        self, embeddings: torch.Tensor, targets: torch.Tensor, sampled: SampledCandidates
    ) -> torch.Tensor:
        sampled_ids = sampled.ids
        # One gather for targets and samples (the gradient is zero on every other row).
        all_ids = torch.cat([targets, sampled_ids])
        all_w = self.softmax_weight.index_select(0, all_ids)
        all_b = self.softmax_bias.index_select(0, all_ids)
        num_rows = targets.size(0)
        true_w, sampled_w = all_w[:num_rows], all_w[num_rows:]
        true_b, sampled_b = all_b[:num_rows], all_b[num_rows:]

        dtype = embeddings.dtype
        # Subtracting log Q turns the sampled softmax into an estimate of the full one
        # (TensorFlow's subtract_log_q=True).
        true_log_q = self.sampler.log_expected_count(targets, sampled.num_tries).to(dtype)
        sampled_log_q = sampled.log_expected_count.to(dtype)
        # (N,)
        true_logits = (embeddings * true_w).sum(dim=1) + true_b - true_log_q
        # (N, S)
        sampled_logits = embeddings.matmul(sampled_w.t()) + (sampled_b - sampled_log_q)
        # An accidental hit would put the target in its own denominator twice (once as the true
        # class, once as a "negative"): TensorFlow adds -FLT_MAX to it; masked_fill with the
        # dtype's lowest value does the same and keeps the row finite (the true logit is there).
        accidental_hits = targets.unsqueeze(1) == sampled_ids.unsqueeze(0)
        sampled_logits = sampled_logits.masked_fill(
            accidental_hits, torch.finfo(sampled_logits.dtype).min
        )
        # The true class is column 0; -log_softmax there is the loss (sampled_softmax_loss is a
        # softmax cross entropy with the label on the first column).
        logits = torch.cat([true_logits.unsqueeze(1), sampled_logits], dim=1)
        return -torch.log_softmax(logits, dim=1)[:, 0]

    def _full_softmax_nll(self, embeddings: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        # Rows per chunk so that a chunk's (rows, V) logits stay under max_eval_logits; with a
        # 800k vocabulary that is ~80 rows, so a 2560-token batch takes ~32 matmuls.
        rows_per_chunk = max(1, self.max_eval_logits // self.num_words)
        losses = []
        for start in range(0, embeddings.size(0), rows_per_chunk):
            chunk = embeddings[start : start + rows_per_chunk]
            logits = torch.addmm(self.softmax_bias, chunk, self.softmax_weight.t())
            losses.append(
                nn.functional.cross_entropy(
                    logits, targets[start : start + rows_per_chunk], reduction="none"
                )
            )
        if not losses:
            return embeddings.new_zeros(0)
        return torch.cat(losses)
