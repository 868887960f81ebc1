"""Tests of benchmarks/kneser_ney_trigram.py (the count-based perplexity baseline)."""
import importlib.util
import json
import math
import sys

import numpy as np
import pytest

from tests.helpers import REPO_ROOT

_PATH = REPO_ROOT / "benchmarks" / "kneser_ney_trigram.py"
_SPEC = importlib.util.spec_from_file_location("kneser_ney_trigram", _PATH)
kn = importlib.util.module_from_spec(_SPEC)
sys.modules["kneser_ney_trigram"] = kn
_SPEC.loader.exec_module(kn)

VOCAB = ["<S>", "</S>", "<UNK>", "a", "b", "c", "d", "e"]  # "e" never occurs in TINY
ID = {token: i for i, token in enumerate(VOCAB)}
TINY = [["a", "b", "c"], ["a", "b", "d"], ["b", "c"]]
# Different discounts per order, so that mixing up the orders changes the numbers.
DISCOUNTS = {3: (0.7, 1.0, 1.0), 2: (0.5, 1.0, 1.5), 1: (0.4, 0.9, 1.2)}


def tiny_model(reverse=False, discounts=DISCOUNTS):
    return kn.train(kn.sentences_to_corpus(TINY, ID), VOCAB, reverse=reverse, discounts=discounts)


def p(model, u, v, w):
    """P(w | u v) for token strings; u=None for a sentence's first target."""
    return float(model.prob([ID[u] if u else -1], [ID[v]], [ID[w]])[0])


def test_discounts_from_count_of_counts():
    counts = np.array([1] * 10 + [2] * 5 + [3] * 3 + [4] * 2 + [7, 9])
    (d1, d2, d3), estimate, n = kn.modified_kn_discounts(counts)
    # Y = 10 / (10 + 2 * 5) = 0.5
    assert estimate == "modified" and n == [10, 5, 3, 2]
    assert d1 == pytest.approx(1 - 2 * 0.5 * 5 / 10)  # 0.5
    assert d2 == pytest.approx(2 - 3 * 0.5 * 3 / 5)  # 1.1
    assert d3 == pytest.approx(3 - 4 * 0.5 * 2 / 3)  # 1.6667
    # Too sparse for three discounts: a single D = Y, then 0.5.
    assert kn.modified_kn_discounts(np.array([1, 1, 2]))[:2] == ((0.5, 0.5, 0.5), "single")
    assert kn.modified_kn_discounts(np.array([1, 1, 1]))[:2] == ((0.5, 0.5, 0.5), "default")


def test_hand_computed_forward_probabilities():
    model = tiny_model()
    # Unigram level: continuation counts N1+(. w) over the bigram types
    # <S> a, <S> b, a b, b c, b d, c </S>, d </S>: a=1, b=2, c=1, d=1, </S>=2 (total 7),
    # gamma = 3 * D1 + 2 * D2 = 3 * 0.4 + 2 * 0.9 = 3.0, uniform over the 7 tokens other than <S>.
    p1_c = (1 - 0.4 + 3.0 / 7) / 7
    p1_e = (3.0 / 7) / 7
    p1_a = (1 - 0.4 + 3.0 / 7) / 7
    # Bigram level, history b: continuation counts N1+(. b c) = 2 (a, <S>), N1+(. b d) = 1 (a);
    # total 3, gamma = D2 + D1 = 1.0 + 0.5.
    p2_c = (2 - 1.0 + 1.5 * p1_c) / 3
    p2_e = (1.5 * p1_e) / 3
    # Trigram level, history a b: c(a b c) = c(a b d) = 1, total 2, gamma = 2 * 0.7.
    p3_c = (1 - 0.7 + 1.4 * p2_c) / 2
    p3_e = (1.4 * p2_e) / 2
    assert p(model, "a", "b", "c") == pytest.approx(p3_c, rel=1e-12)
    assert p3_c == pytest.approx(0.4347619, rel=1e-6)  # = 913/2100, worked out by hand
    assert p(model, "a", "b", "e") == pytest.approx(p3_e, rel=1e-12)
    # A sentence's first token: the <S> bigrams keep raw counts, c(<S> a) = 2, c(<S> b) = 1,
    # total 3, gamma = D2 + D1 (order 2).
    assert p(model, None, "<S>", "a") == pytest.approx((2 - 1.0 + 1.5 * p1_a) / 3, rel=1e-12)
    # Unseen trigram history (c b) with a seen bigram history b: the bigram level alone.
    assert p(model, "c", "b", "c") == pytest.approx(p2_c, rel=1e-12)
    # Unseen bigram history (e): the unigram level alone; <S> is never predicted.
    assert p(model, "a", "e", "c") == pytest.approx(p1_c, rel=1e-12)
    assert p(model, "a", "b", "<S>") == 0.0
    # The perplexity is over w1 ... wn </S> with exactly these probabilities.
    corpus = kn.sentences_to_corpus([["a", "b", "c"]], ID)
    result = kn.evaluate(model, corpus, VOCAB)
    expected = [p(model, None, "<S>", "a"), p(model, "<S>", "a", "b"), p3_c, p(model, "b", "c", "</S>")]
    assert result["targets"] == 4
    assert result["perplexity"] == pytest.approx(math.exp(-sum(map(math.log, expected)) / 4), rel=1e-12)


def test_hand_computed_backward_probability():
    # Reversed sentences: </S> c b a <S>, </S> d b a <S>, </S> c b <S>.
    model = tiny_model(reverse=True)
    # Unigram level: bigram types </S> c, </S> d, c b, d b, b a, a <S>, b <S>:
    # c=1, d=1, b=2, a=1, <S>=2 (total 7), gamma = 3.0; uniform over the tokens other than </S>.
    p1 = (2 - 0.9 + 3.0 / 7) / 7
    p2 = (1 - 0.5 + 0.5 * p1) / 1  # N1+(. a <S>) = 1 (b), total 1, gamma = D1
    p3 = (2 - 1.0 + 1.0 * p2) / 2  # c(b a <S>) = 2, total 2, gamma = D2 (order 3)
    assert p(model, "b", "a", "<S>") == pytest.approx(p3, rel=1e-12)
    assert p(model, "b", "a", "</S>") == 0.0


def _check(model, contexts):
    for result in model.check_sums(contexts):
        assert abs(result["sum"] - 1.0) < 1e-9, result
        assert result["min_predictable"] > 0, result
        assert result["p_start"] == 0.0, result


@pytest.mark.parametrize("reverse", [False, True])
def test_probabilities_sum_to_one_tiny(reverse):
    model = tiny_model(reverse)
    start, end = ("</S>", "<S>") if reverse else ("<S>", "</S>")
    contexts = [
        (-1, ID[start]),  # a sentence's first target
        (ID["a"], ID["b"]),  # seen trigram history
        (ID["c"], ID["b"]),  # unseen trigram history, seen bigram history
        (ID["b"], ID["e"]),  # unseen bigram history (e never occurs)
        (ID["a"], ID[end]),  # the end token is never a history
        (ID["<UNK>"], ID["<UNK>"]),
        (ID[start], ID["a"]),
    ]
    _check(model, contexts)
    # And with the discounts estimated from this (sparse) corpus.
    _check(tiny_model(reverse, discounts=None), contexts)


def _zipf_corpus(rng, words, sentences, max_length=12):
    weights = 1.0 / np.arange(1, len(words) + 1)
    weights /= weights.sum()
    corpus = []
    for _ in range(sentences):
        length = int(rng.integers(1, max_length))
        first = rng.choice(len(words), p=weights)
        # A little structure: each word tends to be followed by its successor.
        sentence = [first]
        for _ in range(length - 1):
            nxt = (sentence[-1] + 1) % len(words) if rng.random() < 0.5 else rng.choice(len(words), p=weights)
            sentence.append(nxt)
        corpus.append([words[i] for i in sentence])
    return corpus


@pytest.mark.parametrize("reverse", [False, True])
def test_probabilities_sum_to_one_estimated_discounts(reverse):
    rng = np.random.default_rng(0)
    words = [f"w{i}" for i in range(60)]
    vocabulary = ["<S>", "</S>", "<UNK>"] + words[:50] + ["never"]  # w50..w59 are OOV
    index = {t: i for i, t in enumerate(vocabulary)}
    sentences = _zipf_corpus(rng, words, 400)
    model = kn.train(kn.sentences_to_corpus(sentences, index), vocabulary, reverse=reverse)
    assert model.discount_info[3]["estimate"] == "modified"
    assert model.discount_info[2]["estimate"] == "modified"
    contexts = [(-1, model.start), (index["never"], index["w3"]), (index["w1"], index["never"]),
                (index["<UNK>"], index["<UNK>"]), (index["w0"], index["</S>" if not reverse else "<S>"])]
    corpus = kn.sentences_to_corpus(sentences[:20], index)
    ids, local = kn.padded_stream(corpus, index["<S>"], index["</S>"], reverse)
    u, v, _ = kn.KneserNeyTrigram.targets(ids, local)
    contexts += [(int(a), int(b)) for a, b in zip(u[::7], v[::7])]
    contexts += [tuple(int(x) for x in rng.integers(0, len(vocabulary), 2)) for _ in range(10)]
    _check(model, contexts)


def test_training_data_perplexity_lower_than_unrelated():
    train_sentences = [
        "the cat sat on the mat".split(),
        "the dog sat on the rug".split(),
        "a cat lay on the mat".split(),
        "the cat and the dog sat on the mat".split(),
    ] * 5
    unrelated = ["mat the on rug dog a".split(), "lay and cat rug the".split(), "sat sat the a".split()]
    vocabulary = ["<S>", "</S>", "<UNK>", "the", "cat", "sat", "on", "mat", "dog", "rug", "a", "lay", "and"]
    index = {t: i for i, t in enumerate(vocabulary)}
    train_corpus = kn.sentences_to_corpus(train_sentences, index)
    other = kn.sentences_to_corpus(unrelated, index)
    for reverse in (False, True):
        model = kn.train(train_corpus, vocabulary, reverse=reverse)
        seen = kn.evaluate(model, train_corpus, vocabulary, reverse)["perplexity"]
        unseen = kn.evaluate(model, other, vocabulary, reverse)["perplexity"]
        assert 1 < seen < unseen / 3, (reverse, seen, unseen)


def test_oov_tokens_map_to_unk(tmp_path):
    corpus = kn.sentences_to_corpus([["a", "zz", "b"], [], ["yy"]], ID)
    assert corpus.ids.tolist() == [ID["a"], ID["<UNK>"], ID["b"], ID["<UNK>"]]
    assert corpus.lengths.tolist() == [3, 1]  # the empty sentence is skipped
    assert corpus.num_oov == 2 and corpus.oov_rate == pytest.approx(0.5)
    assert corpus.num_targets == 6
    # Files: BOM and blank lines handled like the biLM's reader.
    path = tmp_path / "corpus.txt"
    path.write_text("\ufeffa zz b\n\n   \nyy\n", encoding="utf-8")
    from_file = kn.read_corpus([str(path)], ID)
    assert from_file.ids.tolist() == corpus.ids.tolist() and from_file.num_oov == 2
    # Training and evaluation both see <UNK>: any two OOV words get the same probabilities.
    model = kn.train(kn.sentences_to_corpus([["a", "qq", "b"], ["a", "b"]], ID), VOCAB)
    assert model.uni_counts[ID["<UNK>"]] == 1
    first = kn.evaluate(model, kn.sentences_to_corpus([["a", "xx", "b"]], ID), VOCAB)["perplexity"]
    second = kn.evaluate(model, kn.sentences_to_corpus([["a", "<UNK>", "b"]], ID), VOCAB)["perplexity"]
    assert first == second
    assert p(model, "<S>", "a", "<UNK>") > p(model, "<S>", "a", "e")


def test_command_line(tmp_path, capsys):
    rng = np.random.default_rng(1)
    words = [f"w{i}" for i in range(40)]
    (tmp_path / "train").mkdir()
    for shard in range(2):
        lines = [" ".join(s) for s in _zipf_corpus(rng, words, 150)]
        (tmp_path / "train" / f"shard_{shard}.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")
    (tmp_path / "heldout.txt").write_text(
        "\n".join(" ".join(s) for s in _zipf_corpus(rng, words, 30)) + "\n", encoding="utf-8")
    (tmp_path / "vocab.txt").write_text("\n".join(["</S>", "<S>", "<UNK>"] + words[:30]) + "\n", encoding="utf-8")
    out = tmp_path / "result.json"
    code = kn.main(["--train", str(tmp_path / "train" / "*.txt"), "--heldout", str(tmp_path / "heldout.txt"),
                    "--vocabulary", str(tmp_path / "vocab.txt"), "--check", "--json", str(out)])
    assert code == 0
    printed = capsys.readouterr().out
    assert "perplexity: forward" in printed and "-> OK" in printed
    result = json.loads(out.read_text())
    assert result["train"]["sentences"] == 300
    assert 0 < result["heldout_data"]["oov_rate"] < 1
    forward, backward = result["perplexity"]["forward"], result["perplexity"]["backward"]
    assert result["perplexity"]["average"] == pytest.approx((forward + backward) / 2)
    assert 1 < forward < 34 and 1 < backward < 34  # better than uniform over the 33 tokens
    for direction in ("forward", "backward"):
        assert result["directions"][direction]["check"]["ok"]
        assert result["directions"][direction]["heldout"]["targets"] == result["heldout_data"]["targets"]


def _naive_probability(sentences, vocabulary, start, end, discounts):
    """The same model written directly from the definitions with dicts, as an independent check."""
    from collections import Counter, defaultdict

    padded = [[start] + s + [end] for s in sentences if s]
    c3 = Counter((s[i - 2], s[i - 1], s[i]) for s in padded for i in range(2, len(s)))
    c2 = Counter()  # continuation counts, except raw counts after the start token
    for (_, v, w) in c3:
        c2[(v, w)] += 1
    for s in padded:
        c2[(start, s[1])] += 1
    c1 = Counter((w,) for (_, w) in c2)

    def by_history(counts):
        table = defaultdict(dict)
        for key, count in counts.items():
            table[key[:-1]][key[-1]] = count
        return table

    def level(table, order, history, w, lower):
        followers = table.get(history)
        if not followers:
            return lower
        total = sum(followers.values())
        gamma = sum(discounts[order][min(c, 3) - 1] for c in followers.values())
        count = followers.get(w, 0)
        discount = discounts[order][min(count, 3) - 1] if count else 0.0
        return (max(count - discount, 0.0) + gamma * lower) / total

    t3, t2, t1 = by_history(c3), by_history(c2), by_history(c1)

    def probability(u, v, w):
        uniform = 0.0 if w == start else 1.0 / (len(vocabulary) - 1)
        p = level(t1, 1, (), w, uniform)
        p = level(t2, 2, (v,), w, p)
        return level(t3, 3, (u, v), w, p) if u is not None else p

    counts = {3: list(c3.values()), 2: list(c2.values()), 1: list(c1.values())}
    return probability, counts


@pytest.mark.parametrize("reverse", [False, True])
def test_matches_naive_implementation(reverse):
    rng = np.random.default_rng(3)
    words = [f"w{i}" for i in range(40)]
    vocabulary = ["<S>", "</S>", "<UNK>"] + words[:32]
    index = {t: i for i, t in enumerate(vocabulary)}
    mapped = [[t if t in index else "<UNK>" for t in s] for s in _zipf_corpus(rng, words, 300)]
    heldout = [[t if t in index else "<UNK>" for t in s] for s in _zipf_corpus(rng, words, 40)]
    start, end = ("</S>", "<S>") if reverse else ("<S>", "</S>")
    model = kn.train(kn.sentences_to_corpus(mapped, index), vocabulary, reverse=reverse)
    flip = (lambda s: s[::-1]) if reverse else (lambda s: s)
    naive, counts = _naive_probability([flip(s) for s in mapped], vocabulary, start, end, model.discounts)
    for order in (3, 2, 1):  # the discounts come from the right counts
        assert model.discounts[order] == pytest.approx(kn.modified_kn_discounts(np.array(counts[order]))[0])
    log_prob, n = 0.0, 0
    for sentence in heldout:
        s = [start] + flip(sentence) + [end]
        for i in range(1, len(s)):
            u = s[i - 2] if i >= 2 else None
            expected = naive(u, s[i - 1], s[i])
            got = float(model.prob([index[u] if u else -1], [index[s[i - 1]]], [index[s[i]]])[0])
            assert got == pytest.approx(expected, rel=1e-10)
            log_prob += math.log(expected)
            n += 1
    result = kn.evaluate(model, kn.sentences_to_corpus(heldout, index), vocabulary, reverse)
    assert result["targets"] == n
    assert result["perplexity"] == pytest.approx(math.exp(-log_prob / n), rel=1e-10)
