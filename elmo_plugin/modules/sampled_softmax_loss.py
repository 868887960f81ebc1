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
uniqueness bookkeeping and the expected counts are torch operations on the model's device, of
shapes fixed by the sizes alone, so that a training step never waits for the device to tell the
host how many ids it drew.

With ``sparse_gradients``, the softmax's weight and bias get sparse gradients holding only the
rows a step used (its targets and its negatives), as AllenNLP's ``SampledSoftmaxLoss(sparse=True)``
gives with sparse embeddings; an optimizer that updates only those rows (``dense_sparse_adagrad``,
`elmo_plugin.training.optimizers`) then skips the rest of a vocabulary of a million words.
"""
import math
from typing import Dict, List, NamedTuple, Optional, Tuple, Union

import torch
from torch import nn

# Upper bound on how many draws one chunk of the unique sampler holds (float64 + int64 per draw:
# 2**24 draws is about 256 MB), so that a request for nearly the whole vocabulary, which can take
# hundreds of millions of draws, runs in bounded memory.
_MAX_CHUNK = 2 ** 24

# The chance, bounded from above, that one chunk of `LogUniformSampler.one_chunk_size` draws holds
# fewer distinct ids than asked for: at a million training steps, one run in a billion meets it.
_SHORT_CHUNK_PROBABILITY = 1e-15


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
        # num_samples -> `one_chunk_size`, cached for the same reason.
        self._one_chunk_sizes: Dict[int, Optional[int]] = {}

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

    # ----------------------------------------------------------------------------------------
    # Unique sampling in one chunk of fixed size: no host reads
    # ----------------------------------------------------------------------------------------
    def one_chunk_size(self, num_samples: int) -> Optional[int]:
        """
        The number of draws ``C`` after which fewer than ``num_samples`` distinct ids are seen
        with probability at most 1e-15, or ``None`` if that takes more than ``2**24`` draws
        (nearly the whole of a large vocabulary). Computed once per ``num_samples`` on the CPU
        (bisection on ``C``) from two upper bounds of that probability, the smaller one taken:

        - Chernoff's lower tail for the number ``X`` of distinct ids, a sum of negatively
          associated indicators (Dubhashi and Ranjan, 1998) with mean
          ``mu = sum_k 1 - (1 - P(k))^C``: ``P(X <= S) <= exp(-(mu - S) + S log(mu / S))``;
        - Markov's inequality for the number of ids never drawn, ``V - X``:
          ``P(V - X >= V - S + 1) <= (V - mu) / (V - S + 1)``, the tighter one when ``S`` is
          close to ``V``.

        For 8192 of 793,471 words that is 17,852 draws, 10 % above the expected 16,208.
        """
        if num_samples in self._one_chunk_sizes:
            return self._one_chunk_sizes[num_samples]
        if num_samples >= self.num_words or num_samples <= 0:
            raise ValueError("one_chunk_size needs 0 < num_samples < num_words")
        log1m_p = torch.log1p(-self.probabilities("cpu"))

        def short_chunk_bound(draws: int) -> float:
            never_drawn = float(torch.exp(draws * log1m_p).sum())
            mean_distinct = self.num_words - never_drawn
            markov = never_drawn / (self.num_words - num_samples + 1)
            if mean_distinct <= num_samples:
                return min(1.0, markov)
            log_chernoff = (num_samples - mean_distinct
                            + num_samples * math.log(mean_distinct / num_samples))
            return min(math.exp(log_chernoff), markov)

        low, high = num_samples, num_samples
        size: Optional[int] = None
        while high <= _MAX_CHUNK:
            if short_chunk_bound(high) <= _SHORT_CHUNK_PROBABILITY:
                # The bound falls with the number of draws: bisect to within 0.1 %.
                while high - low > max(1, low // 1000):
                    middle = (low + high) // 2
                    if short_chunk_bound(middle) <= _SHORT_CHUNK_PROBABILITY:
                        high = middle
                    else:
                        low = middle
                size = high
                break
            low, high = high, 2 * high
        self._one_chunk_sizes[num_samples] = size
        return size

    def sample_in_one_chunk(
        self,
        num_samples: int,
        device: Union[str, torch.device, None] = None,
        generator: Optional[torch.Generator] = None,
    ) -> Tuple[torch.LongTensor, torch.Tensor]:
        """
        What `sample` returns, from one chunk of `one_chunk_size` draws, with tensors of fixed
        shapes and no host reads: ``num_tries`` is a 0-dim tensor on ``device`` (float64; float32
        on MPS). The ids and ``num_tries`` are those of TensorFlow's draw-by-draw loop over the
        chunk's draws (`first_distinct`). Should the chunk hold fewer than ``num_samples``
        distinct ids (a chance below 1e-15 per call, see `one_chunk_size`), the sample repeats
        some ids.

        # Parameters

        num_samples : `int`
            ``S``, with ``0 < S < num_words`` and `one_chunk_size` not ``None``.
        device : `torch.device`, optional
        generator : `torch.Generator`, optional
            A generator on ``device``.
        """
        size = self.one_chunk_size(num_samples)
        if size is None:
            raise ValueError(
                f"{num_samples} distinct ids of {self.num_words} need more than {_MAX_CHUNK} draws "
                "for one chunk; use sample()"
            )
        draws = self.draw(size, device=device, generator=generator)
        ids, num_tries = first_distinct(draws, num_samples)
        return ids, num_tries.to(self._float_dtype(draws.device))

    def log_expected_count(
        self, ids: torch.Tensor, num_tries: Union[float, torch.Tensor]
    ) -> torch.Tensor:
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
        num_tries : `float` or 0-dim `torch.Tensor`
            As returned by `sample` (a float) or `sample_in_one_chunk` (a tensor on the ids'
            device).

        # Returns

        `torch.Tensor`
            Same shape as ``ids``, float64 (float32 on MPS), on the ids' device.
        """
        log1m_p = torch.log1p(-self.probability(ids))
        return torch.log(-torch.expm1(num_tries * log1m_p))


def first_distinct(draws: torch.Tensor, num_samples: int) -> Tuple[torch.Tensor, torch.Tensor]:
    """
    The first ``num_samples`` distinct values of ``draws`` in order of first appearance, and one
    plus the position of the last of them (TensorFlow's ``num_tries``), as the draw-by-draw loop
    finds them, with fixed shapes: a stable sort puts each value's first occurrence first among
    its equals, a second stable sort puts the first occurrences first in the order of their
    positions. Both results stay on the draws' device.

    # Parameters

    draws : `torch.LongTensor`
        Shape ``(C,)``, ``C >= num_samples``.
    num_samples : `int`

    # Returns

    ids : `torch.LongTensor`
        Shape ``(num_samples,)``.
    num_tries : `torch.LongTensor`
        0-dim.
    """
    sorted_draws, order = torch.sort(draws, stable=True)
    starts = torch.ones_like(sorted_draws, dtype=torch.bool)
    starts[1:] = sorted_draws[1:] != sorted_draws[:-1]
    is_first = torch.empty_like(starts).scatter_(0, order, starts)
    # False sorts before True: the first occurrences, by position.
    positions = torch.sort(~is_first, stable=True).indices[:num_samples]
    return draws[positions], positions[-1] + 1


class RowSums(NamedTuple):
    """
    A gradient given as rows of a matrix (or entries of a vector) with repeated ids, summed
    without data-dependent shapes: every position keeps its place, the first position of each id
    holds the sum of that id's rows, in position order (as ``index_add_`` of the dense gradient
    sums them), and its later positions hold zeros. The dense gradient is therefore
    ``zeros.index_add_(0, ids, sums)`` exactly, and the rows' squares sum to its squares.

    ids : `torch.LongTensor`, shape ``(M,)``
    sums : `torch.Tensor`, shape ``(M, ...)``
    first : `torch.LongTensor`, shape ``(M,)``: the first position of the id at each position,
        so that ``sums[first]`` is the whole gradient of the row at every position.
    """

    ids: torch.Tensor
    sums: torch.Tensor
    first: torch.Tensor


def sum_rows(ids: torch.Tensor, rows: torch.Tensor) -> RowSums:
    """
    `RowSums` of rows ``rows[i]`` that belong to row ``ids[i]`` of a parameter. Fixed shapes,
    no host reads: one stable sort of the ids.
    """
    sorted_ids, order = torch.sort(ids, stable=True)
    starts = torch.ones_like(sorted_ids, dtype=torch.bool)
    starts[1:] = sorted_ids[1:] != sorted_ids[:-1]
    sorted_positions = torch.arange(ids.numel(), device=ids.device)
    # For each sorted position, the sorted position where its id starts: the last start so far.
    start_of_run = torch.cummax(torch.where(starts, sorted_positions, 0), 0).values
    first_sorted = order[start_of_run]  # the original position of its id's first occurrence
    sums = torch.zeros_like(rows).index_add_(0, first_sorted, rows.index_select(0, order))
    first = torch.empty_like(first_sorted).scatter_(0, order, first_sorted)
    return RowSums(ids, sums, first)


def row_sums_of(gradient: torch.Tensor) -> RowSums:
    """`sum_rows` of a sparse COO gradient with one sparse dimension, coalesced or not."""
    return sum_rows(gradient._indices()[0], gradient._values())


def sparse_row_gradient(row_sums: RowSums, shape: torch.Size) -> torch.Tensor:
    """The sparse COO tensor of ``shape`` whose dense form is the gradient ``row_sums`` holds."""
    return torch.sparse_coo_tensor(
        row_sums.ids.unsqueeze(0), row_sums.sums, shape, is_coalesced=False,
        check_invariants=False,
    )


class _GatherRows(torch.autograd.Function):
    """
    ``weight.index_select(0, ids)`` whose gradient for ``weight`` is sparse: the gathered rows'
    gradients summed per id (`sum_rows`), as a sparse COO tensor. Its dense form is exactly the
    dense gradient of ``index_select``.
    """

    @staticmethod
    def forward(ctx, weight: torch.Tensor, ids: torch.Tensor) -> torch.Tensor:  # type: ignore
        ctx.save_for_backward(ids)
        ctx.weight_shape = weight.shape
        return weight.index_select(0, ids)

    @staticmethod
    def backward(ctx, grad: torch.Tensor):  # type: ignore
        (ids,) = ctx.saved_tensors
        return sparse_row_gradient(sum_rows(ids, grad.contiguous()), ctx.weight_shape), None


def gather_rows(weight: torch.Tensor, ids: torch.Tensor, sparse_gradient: bool) -> torch.Tensor:
    """``weight.index_select(0, ids)``, with a sparse gradient for ``weight`` if asked."""
    if sparse_gradient and torch.is_grad_enabled() and weight.requires_grad:
        return _GatherRows.apply(weight, ids)
    return weight.index_select(0, ids)


class SampledCandidates(NamedTuple):
    """
    One draw of negatives, shareable between several calls of `SampledSoftmaxLoss` (bilm-tf's
    forward and backward directions share one per batch).

    ids : `torch.LongTensor`, shape ``(S,)``
    log_expected_count : `torch.Tensor`, shape ``(S,)``, log Q of each id
    num_tries : `float` or 0-dim `torch.Tensor`, needed for log Q of the targets
    """

    ids: torch.Tensor
    log_expected_count: torch.Tensor
    num_tries: Union[float, torch.Tensor]


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
    sparse_gradients : `bool`, optional (default = `False`)
        In training, give ``softmax_weight`` and ``softmax_bias`` sparse COO gradients that hold
        only the rows of the targets and the samples, each id's rows summed (`sum_rows`): their
        dense form is exactly the dense gradient, which stays the reference. Train them with an
        optimizer that takes sparse gradients (``dense_sparse_adagrad``, or torch's Adagrad),
        in one process (DDP's NCCL all-reduce takes dense gradients only).
    """

    def __init__(
        self,
        num_words: int,
        embedding_dim: int,
        num_samples: int = 8192,
        max_eval_logits: int = 2 ** 26,
        sparse_gradients: bool = False,
    ) -> None:
        super().__init__()
        self.num_words = num_words
        self.embedding_dim = embedding_dim
        self.num_samples = num_samples
        self.max_eval_logits = max_eval_logits
        self.sparse_gradients = sparse_gradients
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
            + (", sparse_gradients=True" if self.sparse_gradients else "")
        )

    def sample(
        self,
        device: Union[str, torch.device, None] = None,
        generator: Optional[torch.Generator] = None,
    ) -> SampledCandidates:
        """
        Draws one set of ``num_samples`` negatives, to pass as ``sampled`` to several calls of
        `forward` (e.g. both directions of the biLM, as bilm-tf does). Drawn in one chunk of
        fixed size without host reads (`LogUniformSampler.sample_in_one_chunk`) where
        `LogUniformSampler.one_chunk_size` has one, else chunk by chunk
        (`LogUniformSampler.sample`, which reads the number of distinct ids of each chunk).

        # Parameters

        device : `torch.device`, optional (default = the device of the softmax weights)
        generator : `torch.Generator`, optional
            A generator on ``device``.
        """
        if device is None:
            device = self.softmax_weight.device
        one_chunk = (
            0 < self.num_samples < self.num_words
            and self.sampler.one_chunk_size(self.num_samples) is not None
        )
        sample = self.sampler.sample_in_one_chunk if one_chunk else self.sampler.sample
        ids, num_tries = sample(self.num_samples, device=device, generator=generator)
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
        all_w = gather_rows(self.softmax_weight, all_ids, self.sparse_gradients)
        all_b = gather_rows(self.softmax_bias, all_ids, self.sparse_gradients)
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
