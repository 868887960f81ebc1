"""
bilm-tf's sampled softmax (``tf.nn.sampled_softmax_loss`` with TensorFlow's log-uniform unique
sampler) for training the biLM, the full softmax for evaluation. Unlike AllenNLP's numpy sampler,
the draws, the uniqueness bookkeeping and the expected counts are torch operations on the model's
device, of shapes fixed by the sizes alone, so a step never waits for the host. With
``sparse_gradients`` the softmax gets sparse gradients of the rows a step used, for
``dense_sparse_adagrad`` (`elmo_plugin.training.optimizers`).
"""
import functools
import math
from typing import List, NamedTuple, Optional, Tuple, Union

import torch
from torch import nn

# Most draws one chunk of the unique sampler holds (float64 + int64 per draw: about 256 MB), so
# that nearly the whole vocabulary, hundreds of millions of draws, runs in bounded memory.
_MAX_CHUNK = 2 ** 24

# The bound on the chance that one chunk of `LogUniformSampler.one_chunk_size` draws holds fewer
# distinct ids than asked for: at a million training steps, one run in a billion meets it.
_SHORT_CHUNK_PROBABILITY = 1e-15


def _float_dtype(device: Union[str, torch.device]) -> torch.dtype:
    # float64 everywhere it exists (MPS has none): in float32 the floor of a draw near large ids
    # would be off by one for a noticeable fraction of draws.
    return torch.float32 if torch.device(device).type == "mps" else torch.float64


class LogUniformSampler:
    """
    TensorFlow's ``log_uniform_candidate_sampler`` on the model's device: id ``k`` of a vocabulary
    sorted by descending frequency has ``P(k) = (log(k + 2) - log(k + 1)) / log(num_words + 1)``.

    # Parameters

    num_words : `int`
        The vocabulary size ``V``.
    """

    def __init__(self, num_words: int) -> None:
        if num_words < 1:
            raise ValueError(f"num_words must be positive, got {num_words}")
        self.num_words = num_words
        self._log_range = math.log(num_words + 1)

    def probability(self, ids: torch.Tensor) -> torch.Tensor:
        """P(id) for ids of any shape, in float64 (float32 on MPS), on their device; ``log1p``
        keeps the digits that AllenNLP's ``log((id + 2) / (id + 1))`` loses for large ids."""
        ids_float = ids.to(_float_dtype(ids.device))
        return torch.log1p(1.0 / (ids_float + 1.0)) / self._log_range

    def probabilities(self, device: Union[str, torch.device, None] = None) -> torch.Tensor:
        """P(k) for every id ``k`` of the vocabulary, shape ``(num_words,)``."""
        return self.probability(torch.arange(self.num_words, device=device))

    def draw(
        self,
        num_draws: int,
        device: Union[str, torch.device, None] = None,
        generator: Optional[torch.Generator] = None,
    ) -> torch.LongTensor:
        """``num_draws`` ids with replacement, as TensorFlow draws them: ``floor(exp(u * log(V + 1))) - 1``."""
        u = torch.rand(num_draws, device=device, dtype=_float_dtype(device or "cpu"), generator=generator)
        # The clamp only guards against rounding at the top end, as TensorFlow's sampler does.
        ids = torch.exp(u * self._log_range).long() - 1
        return ids.clamp_(0, self.num_words - 1)

    @functools.cached_property
    def _log1m_probabilities(self) -> torch.Tensor:
        """``log(1 - P(k))`` of every id, on the CPU: what chunks are sized by."""
        return torch.log1p(-self.probabilities("cpu"))

    @functools.lru_cache(maxsize=None)  # a few passes over the vocabulary per num_samples
    def expected_num_tries(self, num_samples: int) -> float:
        """
        The number of draws ``T`` after which the expected number of distinct ids,
        ``sum_k 1 - (1 - P(k))^T``, reaches ``num_samples`` (within 2 %): `sample`'s chunk size.
        """
        if num_samples >= self.num_words:
            raise ValueError("expected_num_tries needs num_samples < num_words")

        def expected_distinct(tries: float) -> float:
            return float((-torch.expm1(tries * self._log1m_probabilities)).sum())

        # E[distinct](T) increases with T and is <= T: double from num_samples until above.
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
        return high

    def _next_chunk_size(self, num_samples: int, num_found: int) -> int:
        # The first chunk 25 % above the expected tries (whose spread is a few percent), so a
        # second one, a smaller top-up, is very rarely needed.
        expected = self.expected_num_tries(num_samples)
        if num_found == 0:
            size = 1.25 * expected + 256
        else:
            size = max(0.25 * expected, 4.0 * (num_samples - num_found), 1024.0)
        return int(min(math.ceil(size), _MAX_CHUNK))

    def sample(
        self,
        num_samples: int,
        device: Union[str, torch.device, None] = None,
        generator: Optional[torch.Generator] = None,
    ) -> Tuple[torch.LongTensor, float]:
        """
        ``min(num_samples, num_words)`` distinct ids in order of first appearance, drawn as
        TensorFlow's unique sampler does, a chunk of draws at a time, and the number of draws it
        took (``inf`` when every id is returned, so that `log_expected_count` is exactly 0).
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

    @functools.lru_cache(maxsize=None)
    def one_chunk_size(self, num_samples: int) -> Optional[int]:
        """
        The number of draws after which fewer than ``num_samples`` distinct ids are seen with
        probability at most 1e-15 (None if over ``2**24`` draws), by bisection on the smaller of
        Chernoff's lower tail for the distinct ids ``X`` and Markov's bound on ``V - X``.
        """
        if num_samples >= self.num_words or num_samples <= 0:
            raise ValueError("one_chunk_size needs 0 < num_samples < num_words")

        def short_chunk_bound(draws: int) -> float:
            never_drawn = float(torch.exp(draws * self._log1m_probabilities).sum())
            mean_distinct = self.num_words - never_drawn
            markov = never_drawn / (self.num_words - num_samples + 1)
            if mean_distinct <= num_samples:
                return min(1.0, markov)
            log_chernoff = (num_samples - mean_distinct
                            + num_samples * math.log(mean_distinct / num_samples))
            return min(math.exp(log_chernoff), markov)

        low, high = num_samples, num_samples
        while high <= _MAX_CHUNK:
            if short_chunk_bound(high) <= _SHORT_CHUNK_PROBABILITY:
                # The bound falls with the number of draws: bisect to within 0.1 %.
                while high - low > max(1, low // 1000):
                    middle = (low + high) // 2
                    if short_chunk_bound(middle) <= _SHORT_CHUNK_PROBABILITY:
                        high = middle
                    else:
                        low = middle
                return high
            low, high = high, 2 * high
        return None

    def sample_in_one_chunk(
        self,
        num_samples: int,
        device: Union[str, torch.device, None] = None,
        generator: Optional[torch.Generator] = None,
    ) -> Tuple[torch.LongTensor, torch.Tensor]:
        """What `sample` returns, from one chunk of `one_chunk_size` draws with fixed shapes and no
        host reads (``num_tries`` a 0-dim tensor); a chunk short of distinct ids repeats some."""
        size = self.one_chunk_size(num_samples)
        if size is None:
            raise ValueError(
                f"{num_samples} distinct ids of {self.num_words} need more than {_MAX_CHUNK} draws "
                "for one chunk; use sample()"
            )
        draws = self.draw(size, device=device, generator=generator)
        ids, num_tries = first_distinct(draws, num_samples)
        return ids, num_tries.to(_float_dtype(draws.device))

    def log_expected_count(
        self, ids: torch.Tensor, num_tries: Union[float, torch.Tensor]
    ) -> torch.Tensor:
        """
        log Q(id), the log of the chance that ``id`` is among ``num_tries`` draws (TensorFlow's
        expected count for unique sampling), as ``log(-expm1(num_tries * log1p(-P)))``, stable for
        rare ids; ``num_tries`` as `sample` or `sample_in_one_chunk` return it.
        """
        log1m_p = torch.log1p(-self.probability(ids))
        return torch.log(-torch.expm1(num_tries * log1m_p))


def _sort_runs(values: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor]:
    """A stable sort's order of ``values``, and where each run of equal sorted values starts."""
    sorted_values, order = torch.sort(values, stable=True)
    starts = torch.ones_like(sorted_values, dtype=torch.bool)
    starts[1:] = sorted_values[1:] != sorted_values[:-1]
    return order, starts


def first_distinct(draws: torch.Tensor, num_samples: int) -> Tuple[torch.Tensor, torch.Tensor]:
    """
    The first ``num_samples`` distinct values of ``draws`` in order of first appearance, and one
    plus the position of the last of them (``num_tries``, 0-dim), from two stable sorts.
    """
    order, starts = _sort_runs(draws)
    is_first = torch.empty_like(starts).scatter_(0, order, starts)
    # False sorts before True: the first occurrences, by position.
    positions = torch.sort(~is_first, stable=True).indices[:num_samples]
    return draws[positions], positions[-1] + 1


class RowSums(NamedTuple):
    """
    Rows of a gradient with repeated ids, summed with fixed shapes: the first position of each id
    holds the sum of its rows (in ``index_add_``'s order), its later positions zeros; ``first``:
    the first position of the id at each position.
    """

    ids: torch.Tensor
    sums: torch.Tensor
    first: torch.Tensor


def sum_rows(ids: torch.Tensor, rows: torch.Tensor) -> RowSums:
    """`RowSums` of ``rows[i]``, which belong to row ``ids[i]`` of a parameter; no host reads."""
    order, starts = _sort_runs(ids)
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
    """``weight.index_select(0, ids)`` with a sparse gradient for ``weight`` (`sum_rows`)."""

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
    """One draw of negatives that several calls of `SampledSoftmaxLoss` share (bilm-tf's two
    directions): ``ids`` ``(S,)``, their ``log_expected_count`` and ``num_tries`` (for the targets')."""

    ids: torch.Tensor
    log_expected_count: torch.Tensor
    num_tries: Union[float, torch.Tensor]


class SampledSoftmaxLoss(nn.Module):
    """
    The biLM's output layer and loss: a softmax over the vocabulary, trained with bilm-tf's
    sampled softmax and evaluated with the full one.

    In training, the logits of the target and of ``num_samples`` distinct negatives (drawn per
    call, or ``sampled``) each less ``log Q`` (`LogUniformSampler.log_expected_count`), a sample
    equal to the target masked out (TensorFlow's ``remove_accidental_hits``); in evaluation the full
    softmax. Unlike AllenNLP's ``SampledSoftmaxLoss`` it returns the loss of every token, not the sum.

    # Parameters

    num_words : `int`
        Vocabulary size ``V``; ids must be sorted by descending frequency.
    embedding_dim : `int`
        Dimension ``D`` of the inputs (the biLM's projection dimension).
    num_samples : `int`, optional (default = `8192`)
        Negatives per call in training (bilm-tf's ``n_negative_samples_batch``).
    max_eval_logits : `int`, optional (default = `2**26`)
        Most logits materialised at once by the full softmax (256 MB in float32).
    sparse_gradients : `bool`, optional (default = `False`)
        In training, sparse COO gradients of the softmax's rows a step used (`sum_rows`), equal to
        the dense ones, for an optimizer in one process (DDP's all-reduce takes dense ones only).
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
        self.softmax_weight = nn.Parameter(torch.empty(num_words, embedding_dim))
        self.softmax_bias = nn.Parameter(torch.zeros(num_words))
        self.reset_parameters()

    def reset_parameters(self) -> None:
        # bilm-tf's: tf.random_normal_initializer(0.0, 1.0 / sqrt(projection_dim)), zero bias.
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
        """One set of negatives to pass as ``sampled`` to several calls of `forward`, drawn on
        ``device`` (default: the softmax's), in one chunk where `LogUniformSampler.one_chunk_size` allows."""
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
            ``(N, D)``: the biLM's output for each token to predict (padding removed).
        targets : `torch.LongTensor`
            ``(N,)``: the id of the next (forward) or previous (backward) token.
        sampled : `SampledCandidates`, optional
            Negatives from `sample`, used in training instead of drawing new ones.

        # Returns

        `torch.Tensor`
            ``(N,)``: each target's negative log likelihood (sampled estimate in training).
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
        true_logits = (embeddings * true_w).sum(dim=1) + true_b - true_log_q  # (N,)
        sampled_logits = embeddings.matmul(sampled_w.t()) + (sampled_b - sampled_log_q)  # (N, S)
        # An accidental hit would put the target in its own denominator twice: TensorFlow adds
        # -FLT_MAX to it; the dtype's lowest value does the same and keeps the row finite.
        accidental_hits = targets.unsqueeze(1) == sampled_ids.unsqueeze(0)
        sampled_logits = sampled_logits.masked_fill(
            accidental_hits, torch.finfo(sampled_logits.dtype).min
        )
        # The true class is column 0 (sampled_softmax_loss's label).
        logits = torch.cat([true_logits.unsqueeze(1), sampled_logits], dim=1)
        return -torch.log_softmax(logits, dim=1)[:, 0]

    def _full_softmax_nll(self, embeddings: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        # Chunks of rows whose (rows, V) logits stay under max_eval_logits.
        if embeddings.size(0) == 0:
            return embeddings.new_zeros(0)
        rows_per_chunk = max(1, self.max_eval_logits // self.num_words)
        losses = [
            nn.functional.cross_entropy(
                torch.addmm(self.softmax_bias, chunk, self.softmax_weight.t()), chunk_targets,
                reduction="none",
            )
            for chunk, chunk_targets in zip(embeddings.split(rows_per_chunk), targets.split(rows_per_chunk))
        ]
        return torch.cat(losses)
