"""
An interpolated modified Kneser-Ney trigram language model, as a count-based baseline for the
biLM's held-out perplexities.

    .venv/bin/python benchmarks/kneser_ney_trigram.py --train "../shared/data/en/lm/train/*.txt" \
        --heldout ../shared/data/en/lm/heldout.txt --vocabulary build/en_small/vocabulary.txt \
        [--check] [--json OUT]

Data and vocabulary are read like the biLM reads them: UTF-8 files, one sentence per line, tokens
split on whitespace (``line.split()``), blank lines skipped; a bilm-tf vocabulary file (one token
per line, with ``<S>``, ``</S>`` and ``<UNK>``) and every token not in it mapped to ``<UNK>``, in
training and held-out data alike. Each sentence is ``<S> w1 ... wn </S>`` and the model predicts
``w1 ... wn </S>`` (never ``<S>``): exactly the n + 1 targets per sentence of the forward biLM, so
the perplexities are comparable. The backward model is trained and evaluated on the reversed
sentences ``</S> wn ... w1 <S>``, predicting ``wn ... w1 <S>`` like the backward biLM. Sentences
are independent: the first target of a sentence is predicted from the start token alone (a bigram
history), every later one from the two tokens before it.

The smoothing is Chen & Goodman's interpolated *modified* Kneser-Ney (three discounts per order,
D1, D2 and D3+, estimated from that order's count-of-counts n1..n4 with Y = n1 / (n1 + 2 n2),
D1 = 1 - 2Y n2/n1, D2 = 2 - 3Y n3/n2, D3+ = 3 - 4Y n4/n3), with KenLM's conventions:

- trigram level: raw counts c(u v w);
- bigram level: continuation counts N1+(. v w), the number of distinct tokens seen before ``v w``,
  except for bigrams that start with the start token, which nothing can precede: those keep their
  raw counts (this is the level that predicts a sentence's first token);
- unigram level: continuation counts N1+(. w), interpolated with a uniform distribution over the
  vocabulary minus the start token, so every token that can be predicted has non-zero probability;
- P(w | u v) = (max(c(u v w) - D(c), 0) + gamma(u v) P(w | v)) / c(u v .), with
  gamma(u v) = D1 N1(u v .) + D2 N2(u v .) + D3+ N3+(u v .) (and the same one order down); a
  history never seen in training falls through to the next lower order.

Discounts whose count-of-counts are too sparse for the three-discount formula (tiny corpora) fall
back to a single D = Y, then to 0.5; the report says which estimate each order used.

Counting is done with numpy on int64 n-gram codes ((u V + v) V + w), so the 5M-token corpus takes
seconds per direction and a few hundred MB. ``--check`` verifies, for a sample of histories (seen,
unseen, sentence-initial, and histories whose bigram context never occurs), that the probabilities
the evaluation uses sum to 1 over the whole vocabulary.
"""
import argparse
import glob
import json
import math
import os
import resource
import sys
import time
from typing import Dict, Iterable, List, Optional, Sequence, Tuple

import numpy as np

BOS_TOKEN = "<S>"
EOS_TOKEN = "</S>"
UNK_TOKEN = "<UNK>"
_UTF8_BOM = "\ufeff"
_START_TIME = time.time()


def log(message: str) -> None:
    print(f"[{time.time() - _START_TIME:7.1f}s] {message}", file=sys.stderr, flush=True)


# ----------------------------------------------------------------------------------------------
# Data


def read_vocabulary(path: str) -> List[str]:
    """A bilm-tf vocabulary file: one token per line, must contain <S>, </S> and <UNK>."""
    tokens: List[str] = []
    seen = set()
    with open(path, encoding="utf-8") as handle:
        for line_number, line in enumerate(handle, start=1):
            if line_number == 1 and line.startswith(_UTF8_BOM):
                line = line[len(_UTF8_BOM):]
            parts = line.split()
            if not parts:
                continue
            if len(parts) > 1:
                raise ValueError(f"{path}:{line_number}: more than one token on the line")
            if parts[0] in seen:
                raise ValueError(f"{path}:{line_number}: duplicate token {parts[0]!r}")
            seen.add(parts[0])
            tokens.append(parts[0])
    missing = [t for t in (BOS_TOKEN, EOS_TOKEN, UNK_TOKEN) if t not in seen]
    if missing:
        raise ValueError(f"{path}: the vocabulary lacks {', '.join(missing)}")
    return tokens


class Corpus:
    """Sentences as one flat int32 array of token ids (no boundary tokens) plus their lengths."""

    def __init__(self, ids: np.ndarray, lengths: np.ndarray, num_oov: int) -> None:
        self.ids = ids
        self.lengths = lengths
        self.num_oov = num_oov

    @property
    def num_tokens(self) -> int:
        return int(self.ids.shape[0])

    @property
    def num_sentences(self) -> int:
        return int(self.lengths.shape[0])

    @property
    def num_targets(self) -> int:
        """Predicted tokens per direction: the words plus one end token per sentence."""
        return self.num_tokens + self.num_sentences

    @property
    def oov_rate(self) -> float:
        return self.num_oov / max(self.num_tokens, 1)


def sentences_to_corpus(sentences: Iterable[Sequence[str]], word_to_id: Dict[str, int]) -> Corpus:
    unk = word_to_id[UNK_TOKEN]
    ids: List[int] = []
    lengths: List[int] = []
    num_oov = 0
    get = word_to_id.get
    for tokens in sentences:
        if not tokens:
            continue
        sentence = [get(token, -1) for token in tokens]
        oov = sentence.count(-1)
        if oov:
            num_oov += oov
            sentence = [unk if i < 0 else i for i in sentence]
        ids.extend(sentence)
        lengths.append(len(sentence))
    return Corpus(np.array(ids, dtype=np.int32), np.array(lengths, dtype=np.int64), num_oov)


def _file_sentences(path: str) -> Iterable[List[str]]:
    with open(path, encoding="utf-8") as handle:
        for line_number, line in enumerate(handle, start=1):
            if line_number == 1 and line.startswith(_UTF8_BOM):
                line = line[len(_UTF8_BOM):]
            tokens = line.split()
            if tokens:  # blank lines are skipped, as the biLM's reader does
                yield tokens


def read_corpus(paths: Sequence[str], word_to_id: Dict[str, int]) -> Corpus:
    parts = []
    for path in paths:
        part = sentences_to_corpus(_file_sentences(path), word_to_id)
        log(f"  read {path}: {part.num_sentences:,} sentences, {part.num_tokens:,} tokens, "
            f"{part.num_oov:,} OOV")
        parts.append(part)
    return Corpus(
        np.concatenate([p.ids for p in parts]) if parts else np.zeros(0, np.int32),
        np.concatenate([p.lengths for p in parts]) if parts else np.zeros(0, np.int64),
        sum(p.num_oov for p in parts),
    )


def padded_stream(corpus: Corpus, bos: int, eos: int, reverse: bool) -> Tuple[np.ndarray, np.ndarray]:
    """
    The sentences written ``<S> w1 ... wn </S>`` one after another (or, with ``reverse``, each as
    ``</S> wn ... w1 <S>``), as int64 ids, and each position's index within its sentence.
    """
    flat, lengths = corpus.ids, corpus.lengths
    start, end = bos, eos
    if reverse:  # reversing the whole stream reverses every sentence (and their order)
        flat, lengths, start, end = flat[::-1], lengths[::-1], eos, bos
    padded_lengths = lengths + 2
    total = int(padded_lengths.sum())
    starts = np.zeros(len(lengths), dtype=np.int64)
    if len(lengths):
        np.cumsum(padded_lengths[:-1], out=starts[1:])
    ids = np.empty(total, dtype=np.int64)
    inner = np.ones(total, dtype=bool)
    inner[starts] = False
    inner[starts + padded_lengths - 1] = False
    ids[inner] = flat
    ids[starts] = start
    ids[starts + padded_lengths - 1] = end
    local = np.arange(total, dtype=np.int64) - np.repeat(starts, padded_lengths)
    return ids, local


# ----------------------------------------------------------------------------------------------
# Model


def count_of_counts(counts: np.ndarray, up_to: int = 4) -> List[int]:
    return [int(np.count_nonzero(counts == k)) for k in range(1, up_to + 1)]


def modified_kn_discounts(counts: np.ndarray) -> Tuple[Tuple[float, float, float], str, List[int]]:
    """
    Chen & Goodman's D1, D2, D3+ from the count-of-counts of ``counts`` (the n-gram counts of one
    order, raw or continuation). Falls back to one discount D = n1 / (n1 + 2 n2) for all counts,
    then to 0.5, when the count-of-counts are too sparse (tiny corpora). Returns the discounts,
    the estimate used ("modified", "single" or "default") and n1..n4.
    """
    n = count_of_counts(counts)
    n1, n2, n3, n4 = n
    if n1 > 0 and n2 > 0:
        y = n1 / (n1 + 2 * n2)
        if n3 > 0 and n4 > 0:
            d = (1 - 2 * y * n2 / n1, 2 - 3 * y * n3 / n2, 3 - 4 * y * n4 / n3)
            if all(0 < dk <= k for k, dk in enumerate(d, start=1)):
                return d, "modified", n
        return (y, y, y), "single", n
    return (0.5, 0.5, 0.5), "default", n


def _lookup(keys: np.ndarray, values: np.ndarray, queries: np.ndarray) -> np.ndarray:
    """values[i] where keys[i] == query (keys sorted and unique), else 0."""
    if keys.shape[0] == 0:
        return np.zeros(queries.shape, dtype=values.dtype)
    index = np.minimum(np.searchsorted(keys, queries), keys.shape[0] - 1)
    return np.where(keys[index] == queries, values[index], 0)


def _group_sums(group_starts: np.ndarray, values: np.ndarray) -> np.ndarray:
    if values.shape[0] == 0:
        return np.zeros(0, dtype=values.dtype)
    return np.add.reduceat(values, group_starts)


class KneserNeyTrigram:
    """
    Interpolated modified Kneser-Ney trigram model over token ids 0..vocab_size-1. ``start`` is the
    sentence-start token (``<S>`` forward, ``</S>`` backward): a history, never a prediction.
    ``discounts`` ({order: (D1, D2, D3+)}) overrides the estimated discounts (for tests).
    """

    def __init__(self, vocab_size: int, start: int,
                 discounts: Optional[Dict[int, Tuple[float, float, float]]] = None) -> None:
        if vocab_size ** 3 >= 2 ** 63:
            raise ValueError(f"vocabulary of {vocab_size} tokens is too large for int64 trigram codes")
        self.V = vocab_size
        self.start = start
        self.fixed_discounts = discounts or {}
        self.discounts: Dict[int, Tuple[float, float, float]] = {}
        self.discount_info: Dict[int, dict] = {}

    def _discounts(self, order: int, counts: np.ndarray) -> np.ndarray:
        """Sets this order's discounts; returns the table D(c) for c = 0, 1, 2, 3+."""
        d, method, n = modified_kn_discounts(counts)
        if order in self.fixed_discounts:
            d, method = tuple(float(x) for x in self.fixed_discounts[order]), "fixed"
        self.discounts[order] = d
        self.discount_info[order] = {"D1": d[0], "D2": d[1], "D3+": d[2], "estimate": method,
                                     "n1": n[0], "n2": n[1], "n3": n[2], "n4": n[3]}
        return np.array([0.0, d[0], d[1], d[2]])

    def fit(self, ids: np.ndarray, local: np.ndarray) -> "KneserNeyTrigram":
        """Counts a padded stream (see `padded_stream`)."""
        V, start = self.V, self.start
        ids = ids.astype(np.int64, copy=False)
        # Trigram level: raw counts of every (u, v, w) inside a sentence.
        t = np.flatnonzero(local >= 2)
        codes = (ids[t - 2] * V + ids[t - 1]) * V + ids[t]
        del t
        self.tri_codes, self.tri_counts = np.unique(codes, return_counts=True)
        del codes
        self.d3 = self._discounts(3, self.tri_counts)
        contexts = self.tri_codes // V
        self.ctx3_codes, group_starts = np.unique(contexts, return_index=True)
        del contexts
        self.ctx3_total = _group_sums(group_starts, self.tri_counts).astype(np.float64)
        self.ctx3_gamma = _group_sums(group_starts, self.d3[np.minimum(self.tri_counts, 3)])

        # Bigram level: continuation counts N1+(. v w) from the trigram types, except for
        # bigrams that start with the start token, which keep their raw counts.
        bigrams = self.tri_codes % (V * V)
        bigrams = bigrams[bigrams // V != start]
        continuation_codes, continuation_counts = np.unique(bigrams, return_counts=True)
        del bigrams
        t = np.flatnonzero(local >= 1)
        t = t[ids[t - 1] == start]
        start_codes, start_counts = np.unique(start * V + ids[t], return_counts=True)
        del t
        codes = np.concatenate([continuation_codes, start_codes])
        order = np.argsort(codes, kind="stable")
        self.bi_codes = codes[order]
        self.bi_counts = np.concatenate([continuation_counts, start_counts])[order]
        del codes, order
        self.d2 = self._discounts(2, self.bi_counts)
        history = self.bi_codes // V
        self.ctx2_total = np.bincount(history, weights=self.bi_counts, minlength=V)
        self.ctx2_gamma = np.bincount(history, weights=self.d2[np.minimum(self.bi_counts, 3)],
                                      minlength=V)
        del history

        # Unigram level: continuation counts N1+(. w) from the bigram types, interpolated with a
        # uniform distribution over every token but the start token.
        self.uni_counts = np.bincount(self.bi_codes % V, minlength=V).astype(np.int64)
        self.d1 = self._discounts(1, self.uni_counts[self.uni_counts > 0])
        total = float(self.uni_counts.sum())
        if total <= 0:
            raise ValueError("no training data")
        discounted = np.maximum(self.uni_counts - self.d1[np.minimum(self.uni_counts, 3)], 0.0)
        gamma = float(self.d1[np.minimum(self.uni_counts, 3)].sum())
        uniform = np.full(V, 1.0 / (V - 1))
        uniform[start] = 0.0
        self.p1 = (discounted + gamma * uniform) / total
        return self

    def prob(self, u: np.ndarray, v: np.ndarray, w: np.ndarray) -> np.ndarray:
        """
        P(w | u v) for arrays of ids; ``u < 0`` means there is no u (the history is only v, the
        start token: the first target of a sentence).
        """
        V = self.V
        u = np.asarray(u, dtype=np.int64)
        v = np.asarray(v, dtype=np.int64)
        w = np.asarray(w, dtype=np.int64)
        p = self.p1[w]
        # Bigram level.
        total = self.ctx2_total[v]
        count = _lookup(self.bi_codes, self.bi_counts, v * V + w)
        discounted = np.maximum(count - self.d2[np.minimum(count, 3)], 0.0)
        seen = total > 0
        p = np.where(seen, (discounted + self.ctx2_gamma[v] * p) / np.where(seen, total, 1.0), p)
        # Trigram level.
        context = np.where(u >= 0, u * V + v, -1)
        total = _lookup(self.ctx3_codes, self.ctx3_total, context)
        gamma = _lookup(self.ctx3_codes, self.ctx3_gamma, context)
        count = _lookup(self.tri_codes, self.tri_counts, np.where(context >= 0, context * V + w, -1))
        discounted = np.maximum(count - self.d3[np.minimum(count, 3)], 0.0)
        seen = total > 0
        return np.where(seen, (discounted + gamma * p) / np.where(seen, total, 1.0), p)

    @staticmethod
    def targets(ids: np.ndarray, local: np.ndarray) -> Tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(u, v, w) for every predicted position of a padded stream; u = -1 at a sentence's first target."""
        t = np.flatnonzero(local >= 1)
        u = np.where(local[t] >= 2, ids[np.maximum(t - 2, 0)], -1)
        return u, ids[t - 1], ids[t]

    def evaluate(self, ids: np.ndarray, local: np.ndarray, chunk: int = 1 << 20) -> dict:
        u, v, w = self.targets(ids, local)
        log_prob = 0.0
        zero = 0
        for i in range(0, w.shape[0], chunk):
            p = self.prob(u[i:i + chunk], v[i:i + chunk], w[i:i + chunk])
            zero += int(np.count_nonzero(p <= 0))
            log_prob += float(np.log(np.maximum(p, 1e-300)).sum())
        n = int(w.shape[0])
        context = np.where(u >= 0, u * self.V + v, -1)
        trigram_seen = _lookup(self.tri_codes, self.tri_counts, np.where(context >= 0, context * self.V + w, -1)) > 0
        return {
            "targets": n,
            "log_prob": log_prob,
            "cross_entropy": -log_prob / n,
            "perplexity": math.exp(-log_prob / n),
            "zero_probability_targets": zero,
            "trigram_hit_rate": float(trigram_seen[u >= 0].mean()) if np.any(u >= 0) else 0.0,
        }

    def check_sums(self, contexts: Sequence[Tuple[int, int]]) -> List[dict]:
        """For each (u, v) history (u = -1: start of sentence), the sum of P(w | u v) over the vocabulary."""
        w = np.arange(self.V, dtype=np.int64)
        results = []
        for u, v in contexts:
            p = self.prob(np.full(self.V, u), np.full(self.V, v), w)
            predictable = np.ones(self.V, dtype=bool)
            predictable[self.start] = False
            results.append({"u": int(u), "v": int(v), "sum": float(p.sum()),
                            "min_predictable": float(p[predictable].min()),
                            "p_start": float(p[self.start])})
        return results

    def summary(self) -> dict:
        return {
            "trigram_types": int(self.tri_codes.shape[0]),
            "trigram_histories": int(self.ctx3_codes.shape[0]),
            "bigram_types": int(self.bi_codes.shape[0]),
            "unigram_types": int(np.count_nonzero(self.uni_counts)),
            "discounts": {str(order): self.discount_info[order] for order in (3, 2, 1)},
        }


def train(corpus: Corpus, vocabulary: Sequence[str], reverse: bool = False,
          discounts: Optional[Dict[int, Tuple[float, float, float]]] = None) -> KneserNeyTrigram:
    index = {token: i for i, token in enumerate(vocabulary)}
    bos, eos = index[BOS_TOKEN], index[EOS_TOKEN]
    ids, local = padded_stream(corpus, bos, eos, reverse)
    model = KneserNeyTrigram(len(vocabulary), eos if reverse else bos, discounts)
    return model.fit(ids, local)


def evaluate(model: KneserNeyTrigram, corpus: Corpus, vocabulary: Sequence[str], reverse: bool = False) -> dict:
    bos, eos = vocabulary.index(BOS_TOKEN), vocabulary.index(EOS_TOKEN)
    ids, local = padded_stream(corpus, bos, eos, reverse)
    return model.evaluate(ids, local)


def check_contexts(model: KneserNeyTrigram, vocabulary: Sequence[str], samples: Sequence[Corpus],
                   reverse: bool, rng: np.random.Generator, per_sample: int = 4) -> List[Tuple[int, int]]:
    """Histories to check: sentence-initial, seen and held-out ones, random pairs, never-seen ones."""
    index = {token: i for i, token in enumerate(vocabulary)}
    bos, eos, unk = index[BOS_TOKEN], index[EOS_TOKEN], index[UNK_TOKEN]
    start, end = (eos, bos) if reverse else (bos, eos)
    contexts = [(-1, start), (start, end), (unk, unk), (index.get(".", unk), end)]
    for corpus in samples:
        ids, local = padded_stream(corpus, bos, eos, reverse)
        u, v, _ = KneserNeyTrigram.targets(ids, local)
        for i in rng.choice(u.shape[0], size=min(per_sample, u.shape[0]), replace=False):
            contexts.append((int(u[i]), int(v[i])))
    for _ in range(per_sample):
        contexts.append(tuple(int(x) for x in rng.integers(0, len(vocabulary), size=2)))
    return contexts


# ----------------------------------------------------------------------------------------------
# Command line


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0  # KiB on Linux


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0].strip())
    parser.add_argument("--train", required=True, help="glob of tokenized training files")
    parser.add_argument("--heldout", required=True, help="tokenized held-out file")
    parser.add_argument("--vocabulary", required=True, help="bilm-tf vocabulary file")
    parser.add_argument("--check", action="store_true",
                        help="check that P(. | history) sums to 1 over the vocabulary for sample histories")
    parser.add_argument("--json", help="write the results here as JSON")
    parser.add_argument("--seed", type=int, default=0, help="seed for the --check histories")
    args = parser.parse_args(argv)

    begin = time.time()
    paths = sorted(glob.glob(os.path.expanduser(args.train)))
    if not paths:
        parser.error(f"--train {args.train!r} matches no file")
    vocabulary = read_vocabulary(args.vocabulary)
    word_to_id = {token: i for i, token in enumerate(vocabulary)}
    log(f"vocabulary: {len(vocabulary):,} tokens from {args.vocabulary}")
    log(f"reading {len(paths)} training file(s)")
    train_corpus = read_corpus(paths, word_to_id)
    heldout = read_corpus([args.heldout], word_to_id)
    read_seconds = time.time() - begin

    results: dict = {
        "model": "interpolated modified Kneser-Ney trigram (Chen & Goodman; D1, D2, D3+ per order)",
        "train_glob": args.train, "train_files": paths, "heldout": args.heldout,
        "vocabulary": args.vocabulary, "vocabulary_size": len(vocabulary),
        "train": {"sentences": train_corpus.num_sentences, "tokens": train_corpus.num_tokens,
                  "targets": train_corpus.num_targets, "oov_tokens": train_corpus.num_oov,
                  "oov_rate": train_corpus.oov_rate},
        "heldout_data": {"sentences": heldout.num_sentences, "tokens": heldout.num_tokens,
                         "targets": heldout.num_targets, "oov_tokens": heldout.num_oov,
                         "oov_rate": heldout.oov_rate},
        "directions": {},
    }
    rng = np.random.default_rng(args.seed)
    check_ok = True
    for direction, reverse in (("forward", False), ("backward", True)):
        tick = time.time()
        log(f"{direction}: counting")
        model = train(train_corpus, vocabulary, reverse)
        train_seconds = time.time() - tick
        info = model.summary()
        for order in (3, 2, 1):
            d = model.discount_info[order]
            log(f"{direction}: order {order} discounts D1={d['D1']:.4f} D2={d['D2']:.4f} "
                f"D3+={d['D3+']:.4f} ({d['estimate']}; n1..n4 = {d['n1']}, {d['n2']}, {d['n3']}, {d['n4']})")
        tick = time.time()
        info["heldout"] = evaluate(model, heldout, vocabulary, reverse)
        info["train_seconds"] = train_seconds
        info["eval_seconds"] = time.time() - tick
        log(f"{direction}: {info['trigram_types']:,} trigram types, {info['bigram_types']:,} bigram "
            f"types; held-out perplexity {info['heldout']['perplexity']:.2f} "
            f"({train_seconds:.1f}s counting, {info['eval_seconds']:.1f}s evaluating)")
        if args.check:
            contexts = check_contexts(model, vocabulary, [train_corpus, heldout], reverse, rng)
            sums = model.check_sums(contexts)
            worst = max(abs(s["sum"] - 1.0) for s in sums)
            ok = worst <= 1e-6 and all(s["min_predictable"] > 0 for s in sums)
            check_ok &= ok
            info["check"] = {"histories": len(sums), "max_abs_deviation": worst, "ok": ok,
                             "sums": sums}
            log(f"{direction}: check over {len(sums)} histories: max |sum - 1| = {worst:.3g}, "
                f"min P(predictable token) = {min(s['min_predictable'] for s in sums):.3g} "
                f"-> {'OK' if ok else 'FAILED'}")
        results["directions"][direction] = info
        del model

    forward = results["directions"]["forward"]["heldout"]["perplexity"]
    backward = results["directions"]["backward"]["heldout"]["perplexity"]
    results["perplexity"] = {"forward": forward, "backward": backward, "average": (forward + backward) / 2}
    results["seconds"] = {"reading": read_seconds, "total": time.time() - begin}
    results["peak_rss_mb"] = peak_rss_mb()

    tr, ho = results["train"], results["heldout_data"]
    print(f"model: {results['model']}")
    print(f"vocabulary: {len(vocabulary):,} tokens ({args.vocabulary})")
    print(f"train: {tr['sentences']:,} sentences, {tr['tokens']:,} tokens ({tr['targets']:,} targets "
          f"per direction), OOV rate {100 * tr['oov_rate']:.2f}%")
    print(f"heldout: {ho['sentences']:,} sentences, {ho['tokens']:,} tokens ({ho['targets']:,} targets "
          f"per direction), OOV rate {100 * ho['oov_rate']:.2f}%")
    for direction in ("forward", "backward"):
        info = results["directions"][direction]
        d = "; ".join(f"order {o}: " + ", ".join(f"{k}={info['discounts'][str(o)][k]:.4f}"
                                               for k in ("D1", "D2", "D3+"))
                      for o in (3, 2, 1))
        print(f"{direction} discounts: {d}")
    print(f"perplexity: forward {forward:.2f}, backward {backward:.2f}, average {(forward + backward) / 2:.2f}")
    if args.check:
        print("check: " + ", ".join(
            f"{d} max |sum - 1| = {results['directions'][d]['check']['max_abs_deviation']:.2g} over "
            f"{results['directions'][d]['check']['histories']} histories" for d in ("forward", "backward"))
            + (" -> OK" if check_ok else " -> FAILED"))
    print(f"time: {results['seconds']['total']:.1f}s (reading {read_seconds:.1f}s); "
          f"peak RSS {results['peak_rss_mb']:.0f} MB")
    if args.json:
        with open(args.json, "w", encoding="utf-8") as handle:
            json.dump(results, handle, indent=2)
            handle.write("\n")
    return 0 if check_ok else 1


if __name__ == "__main__":
    sys.exit(main())
