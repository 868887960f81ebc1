"""
The bilm-tf vocabulary file: `build_lm_vocabulary`, the ``from_bilm_tf_file`` Vocabulary (and its
model-archive round trip) and the ``allennlp elmo-vocab`` command.
"""
import argparse
import os
import subprocess
from pathlib import Path

import pytest
import torch
from allennlp.common import Params
from allennlp.common.checks import ConfigurationError
from allennlp.data.vocabulary import Vocabulary
from allennlp.models import Model
from allennlp.models.archival import load_archive

import elmo_plugin.commands.elmo_vocab  # noqa: F401  (registers "elmo-vocab")
from elmo_plugin.commands.elmo_vocab import ElmoVocabCommand
from elmo_plugin.data.vocabulary import (
    BilmTfVocabulary,
    build_lm_vocabulary,
    read_bilm_tf_vocabulary,
)
from tests.helpers import REPO_ROOT, write_serialization_directory

# Counts: the 5, a 4, cat 2, dog 2, sat 1, on 1, mat 1, zebra 1 (17 tokens, 8 types).
CORPUS_A = "the cat sat on the mat\n\nthe dog\n"
CORPUS_B = "a a the dog\n   \na a zebra cat the\n"
EXPECTED_ORDER = ["<S>", "</S>", "<UNK>", "the", "a", "cat", "dog", "mat", "on", "sat", "zebra"]


@pytest.fixture
def corpus(tmp_path: Path) -> Path:
    directory = tmp_path / "corpus"
    directory.mkdir()
    (directory / "a.txt").write_text(CORPUS_A, encoding="utf-8")
    (directory / "b.txt").write_text(CORPUS_B, encoding="utf-8")
    return directory


def _lines(path: Path):
    return path.read_text(encoding="utf-8").split("\n")[:-1]


def test_build_orders_by_count_then_token(corpus: Path, tmp_path: Path):
    output = tmp_path / "vocab.txt"
    stats = build_lm_vocabulary(str(corpus / "*.txt"), output, progress=False)
    assert _lines(output) == EXPECTED_ORDER
    assert output.read_text(encoding="utf-8").endswith("zebra\n")
    assert stats.num_files == 2
    assert stats.num_sentences == 4
    assert stats.num_blank_lines == 2
    assert stats.num_tokens == 17
    assert stats.num_types == 8
    assert stats.vocab_size == 11
    assert stats.coverage == 1.0
    # Nothing but the output was written (the temporary file was renamed).
    assert sorted(os.listdir(tmp_path)) == ["corpus", "vocab.txt"]


def test_min_count_max_size_and_coverage(corpus: Path, tmp_path: Path):
    output = tmp_path / "vocab.txt"
    stats = build_lm_vocabulary(str(corpus / "*.txt"), output, min_count=2, progress=False)
    assert _lines(output) == ["<S>", "</S>", "<UNK>", "the", "a", "cat", "dog"]
    assert stats.num_covered_tokens == 5 + 4 + 2 + 2
    assert stats.coverage == pytest.approx(13 / 17)

    stats = build_lm_vocabulary(str(corpus / "*.txt"), output, max_size=5, progress=False)
    assert _lines(output) == ["<S>", "</S>", "<UNK>", "the", "a"]
    assert stats.vocab_size == 5
    stats = build_lm_vocabulary([corpus / "a.txt"], output, max_size=3, progress=False)
    assert _lines(output) == ["<S>", "</S>", "<UNK>"]
    assert stats.coverage == 0.0

    with pytest.raises(ConfigurationError, match="max_size must be at least 3"):
        build_lm_vocabulary(str(corpus / "*.txt"), output, max_size=2, progress=False)
    with pytest.raises(ConfigurationError, match="min_count"):
        build_lm_vocabulary(str(corpus / "*.txt"), output, min_count=0, progress=False)


def test_special_tokens_in_the_corpus_are_not_listed_twice(tmp_path: Path):
    (tmp_path / "c.txt").write_text("<S> x </S> x <UNK>\n", encoding="utf-8")
    output = tmp_path / "vocab.txt"
    stats = build_lm_vocabulary(str(tmp_path / "c.txt"), output, progress=False)
    assert _lines(output) == ["<S>", "</S>", "<UNK>", "x"]
    assert stats.coverage == 1.0


def test_build_errors_name_the_glob_and_line(tmp_path: Path):
    pattern = str(tmp_path / "missing" / "*.txt")
    with pytest.raises(ConfigurationError, match="no files match") as error:
        build_lm_vocabulary(pattern, tmp_path / "vocab.txt", progress=False)
    assert pattern in str(error.value)

    (tmp_path / "blank.txt").write_text("\n  \n\n", encoding="utf-8")
    blank_glob = str(tmp_path / "blank*.txt")
    with pytest.raises(ConfigurationError, match="contains no tokens") as error:
        build_lm_vocabulary(blank_glob, tmp_path / "vocab.txt", progress=False)
    assert blank_glob in str(error.value)

    bad = tmp_path / "bad.txt"
    bad.write_bytes(b"fine line\nbad \xff byte\n")
    with pytest.raises(ConfigurationError, match=rf"{bad}:2: not valid UTF-8"):
        build_lm_vocabulary(str(bad), tmp_path / "vocab.txt", progress=False)
    assert not (tmp_path / "vocab.txt").exists()
    assert not [name for name in os.listdir(tmp_path) if name.endswith(".tmp")]

    with pytest.raises(ConfigurationError, match="does not exist"):
        build_lm_vocabulary(str(bad), tmp_path / "no" / "vocab.txt", progress=False)


def _write_vocab(path: Path, tokens) -> str:
    path.write_text("".join(token + "\n" for token in tokens), encoding="utf-8")
    return str(path)


def test_from_bilm_tf_file_ids_are_line_numbers(tmp_path: Path):
    vocab_file = _write_vocab(tmp_path / "vocab.txt", EXPECTED_ORDER)
    vocab = Vocabulary.from_params(
        Params({"type": "from_bilm_tf_file", "vocabulary_file": vocab_file})
    )
    assert isinstance(vocab, BilmTfVocabulary)
    assert vocab.get_vocab_size("lm_targets") == len(EXPECTED_ORDER)
    for index, token in enumerate(EXPECTED_ORDER):
        assert vocab.get_token_index(token, "lm_targets") == index
        assert vocab.get_token_from_index(index, "lm_targets") == token
    assert not vocab.is_padded("lm_targets")
    assert "@@PADDING@@" not in vocab.get_token_to_index_vocabulary("lm_targets")
    assert vocab.get_token_index("never-seen", "lm_targets") == 2  # <UNK>

    # Another namespace; released files put </S> first, which is fine.
    other = Vocabulary.from_params(
        Params(
            {
                "type": "from_bilm_tf_file",
                "vocabulary_file": _write_vocab(tmp_path / "v2.txt", ["</S>", "<S>", "<UNK>", "x"]),
                "namespace": "words",
            }
        )
    )
    assert other.get_token_index("<S>", "words") == 1
    assert other.get_token_index("y", "words") == 2


@pytest.mark.parametrize(
    "content, message",
    [
        ("<S>\n</S>\n\n<UNK>\n", r"v\.txt:3: blank line"),
        ("<S>\n</S>\n<UNK>\nx\n  \n", r"v\.txt:5: blank line"),
        ("<S>\n</S>\n<UNK>\nx\ny\nx\n", r"v\.txt:6: duplicate token 'x' \(first on line 4\)"),
        ("<S>\n</S>\n<UNK>\nx 12\n", r"v\.txt:4: 'x 12' is more than one token"),
        ("<S>\n</S>\nx\n", r"lacks <UNK>"),
    ],
)
def test_vocabulary_file_validation(tmp_path: Path, content: str, message: str):
    path = tmp_path / "v.txt"
    path.write_text(content, encoding="utf-8")
    with pytest.raises(ConfigurationError, match=message):
        read_bilm_tf_vocabulary(str(path))


def test_vocabulary_file_bad_utf8_and_missing(tmp_path: Path):
    path = tmp_path / "v.txt"
    path.write_bytes(b"<S>\n</S>\n<UNK>\n\xc3\x28\n")
    with pytest.raises(ConfigurationError, match=r"v\.txt:4: not valid UTF-8"):
        read_bilm_tf_vocabulary(str(path))
    with pytest.raises(ConfigurationError, match="not found"):
        BilmTfVocabulary.from_bilm_tf_file(str(tmp_path / "nope.txt"))
    # No final newline is fine.
    path.write_text("<S>\n</S>\n<UNK>", encoding="utf-8")
    assert read_bilm_tf_vocabulary(str(path)) == ["<S>", "</S>", "<UNK>"]


def _assert_same_lm_vocab(original: Vocabulary, reloaded: Vocabulary, namespace="lm_targets"):
    assert type(reloaded) is type(original)
    assert reloaded == original
    assert reloaded.get_token_to_index_vocabulary(namespace) == original.get_token_to_index_vocabulary(
        namespace
    )
    assert reloaded.get_index_to_token_vocabulary(namespace) == original.get_index_to_token_vocabulary(
        namespace
    )
    assert not reloaded.is_padded(namespace)
    assert reloaded.get_token_index("never-seen", namespace) == 2
    assert reloaded.get_token_from_index(2, namespace) == "<UNK>"


def test_save_and_reload_like_model_load(tmp_path: Path):
    vocab_file = _write_vocab(tmp_path / "vocab.txt", EXPECTED_ORDER)
    config = {"type": "from_bilm_tf_file", "vocabulary_file": vocab_file}
    vocab = Vocabulary.from_params(Params(dict(config)))
    directory = tmp_path / "vocabulary"
    vocab.save_to_files(str(directory))

    # What allennlp/models/model.py `Model._load` does with the config's "vocabulary" params.
    vocab_params = Params(dict(config))
    vocab_choice = vocab_params.pop_choice("type", Vocabulary.list_available(), True)
    vocab_class, _ = Vocabulary.resolve_class_name(vocab_choice)
    reloaded = vocab_class.from_files(
        str(directory), vocab_params.get("padding_token"), vocab_params.get("oov_token")
    )
    _assert_same_lm_vocab(vocab, reloaded)

    # What distributed `allennlp train` does: plain from_files with the vocabulary's own tokens.
    plain = Vocabulary.from_files(str(directory), vocab._padding_token, vocab._oov_token)
    assert plain.get_token_to_index_vocabulary("lm_targets") == vocab.get_token_to_index_vocabulary(
        "lm_targets"
    )
    assert plain.get_token_index("never-seen", "lm_targets") == 2


@Model.register("_lm_vocabulary_test_model", exist_ok=True)
class _TinyModel(Model):
    def __init__(self, vocab: Vocabulary) -> None:
        super().__init__(vocab)
        self.softmax = torch.nn.Linear(2, vocab.get_vocab_size("lm_targets"))

    def forward(self, **inputs):  # pragma: no cover - never called
        raise NotImplementedError


def test_model_archive_round_trip(tmp_path: Path):
    vocab_file = _write_vocab(tmp_path / "vocab.txt", EXPECTED_ORDER)
    config = {
        "dataset_reader": {"type": "bilm_corpus"},
        "train_data_path": str(tmp_path / "*.txt"),
        "vocabulary": {"type": "from_bilm_tf_file", "vocabulary_file": vocab_file},
        "model": {"type": "_lm_vocabulary_test_model"},
    }
    import elmo_plugin.data.dataset_readers.bilm_corpus  # noqa: F401  (registers "bilm_corpus")

    vocab = Vocabulary.from_params(Params(dict(config["vocabulary"])))
    serialization_dir = write_serialization_directory(tmp_path / "run", _TinyModel(vocab), config)

    archive = load_archive(str(serialization_dir / "model.tar.gz"))
    _assert_same_lm_vocab(vocab, archive.model.vocab)
    assert archive.model.softmax.out_features == len(EXPECTED_ORDER)


def _run_command(argv):
    parser = argparse.ArgumentParser(prog="allennlp")
    subparsers = parser.add_subparsers()
    ElmoVocabCommand().add_subparser(subparsers)
    args = parser.parse_args(argv)
    args.func(args)


def test_elmo_vocab_command(corpus: Path, tmp_path: Path, capsys):
    output = tmp_path / "vocab.txt"
    _run_command(
        ["elmo-vocab", str(corpus / "*.txt"), str(output), "--min-count", "2", "--no-progress"]
    )
    assert _lines(output) == ["<S>", "</S>", "<UNK>", "the", "a", "cat", "dog"]
    printed = capsys.readouterr().out
    assert "tokens counted:    17" in printed
    assert "vocabulary size:   7" in printed
    assert "coverage:          76.47%" in printed

    _run_command(["elmo-vocab", str(corpus / "*.txt"), str(output), "--max-size", "4"])
    assert _lines(output) == ["<S>", "</S>", "<UNK>", "the"]
    capsys.readouterr()

    missing = str(tmp_path / "nothing" / "*.txt")
    with pytest.raises(SystemExit) as exit_info:
        _run_command(["elmo-vocab", missing, str(output), "--no-progress"])
    assert exit_info.value.code == 1
    error_output = capsys.readouterr().err
    assert error_output.count("\n") == 1
    assert error_output.startswith("allennlp elmo-vocab: error: no files match")
    assert missing in error_output

    with pytest.raises(SystemExit) as exit_info:
        _run_command(["elmo-vocab", str(corpus / "*.txt"), str(output), "--max-size", "2"])
    assert exit_info.value.code == 2  # argparse usage error


def test_allennlp_elmo_vocab_subprocess(corpus: Path, tmp_path: Path):
    allennlp = REPO_ROOT / ".venv" / "bin" / "allennlp"
    if not allennlp.exists():
        pytest.skip(f"{allennlp} not found")
    output = tmp_path / "vocab.txt"
    result = subprocess.run(
        [
            str(allennlp),
            "elmo-vocab",
            str(corpus / "*.txt"),
            str(output),
            "--no-progress",
            "--include-package",
            "elmo_plugin",
        ],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    if result.returncode != 0 and "invalid choice: 'elmo-vocab'" in result.stderr:
        pytest.skip(
            "elmo_plugin does not import elmo_plugin.commands.elmo_vocab yet, so the "
            "allennlp command does not know elmo-vocab"
        )
    assert result.returncode == 0, result.stderr
    assert _lines(output) == EXPECTED_ORDER
    assert "vocabulary size:   11" in result.stdout


# ----------------------------------------------------------------------------------------------
# The output is never one of the corpus files


def test_build_refuses_an_output_that_is_a_corpus_file(corpus: Path, tmp_path: Path):
    a_file = corpus / "a.txt"
    symlink = tmp_path / "link.txt"
    symlink.symlink_to(a_file)
    hard_link = tmp_path / "hard.txt"
    os.link(a_file, hard_link)
    for pattern, output in (
        (a_file, a_file),  # allennlp elmo-vocab corpus.txt corpus.txt
        (a_file, symlink),
        (a_file, hard_link),
        (corpus / "*.txt", a_file),  # a corpus file the glob matches
    ):
        with pytest.raises(ConfigurationError, match=f"would replace the corpus file {a_file}"):
            build_lm_vocabulary(str(pattern), output, progress=False)
        assert a_file.read_text(encoding="utf-8") == CORPUS_A
    assert sorted(os.listdir(corpus)) == ["a.txt", "b.txt"]  # no temporary file either


def test_an_earlier_vocabulary_matched_by_the_glob_is_left_out(corpus: Path, caplog):
    # `elmo-vocab "dir/*.txt" dir/vocab.txt` twice: the second run must not count the first
    # run's vocabulary as corpus text.
    output = corpus / "vocab.txt"
    first = build_lm_vocabulary(str(corpus / "*.txt"), output, progress=False)
    first_lines = _lines(output)
    second = build_lm_vocabulary(str(corpus / "*.txt"), output, progress=False)
    assert second.num_tokens == first.num_tokens == 17
    assert second.num_files == first.num_files == 2
    assert second.excluded_files == [str(output)] and first.excluded_files == []
    assert _lines(output) == first_lines == EXPECTED_ORDER
    assert f"left {output} out of the corpus" in caplog.text

    # Only the vocabulary matches: nothing to count is an error, and the file stays.
    with pytest.raises(ConfigurationError, match="matches only the output file"):
        build_lm_vocabulary(str(output), output, progress=False)
    assert _lines(output) == EXPECTED_ORDER


# ----------------------------------------------------------------------------------------------
# The order of a vocabulary, judged from training targets

SAMPLE = REPO_ROOT / "elmo_plugin" / "sample_corpus"


def _sample_counts(vocabulary, num_tokens):
    from collections import Counter

    tokens = (SAMPLE / "train.txt").read_text(encoding="utf-8").split()[:num_tokens]
    counts = Counter(tokens)
    return [counts[token] for token in vocabulary]


def _sample_vocabulary():
    return (SAMPLE / "vocabulary.txt").read_text(encoding="utf-8").split()


def test_judge_frequency_order_on_the_sample_corpus():
    import random

    from elmo_plugin.data.vocabulary import judge_frequency_order

    in_order = _sample_vocabulary()[3:]
    shuffled = list(in_order)
    random.Random(0).shuffle(shuffled)
    for num_tokens in (1000, 5000, 50_000):
        # The sample corpus's own vocabulary is never flagged, on a part of it or all of it ...
        judgement = judge_frequency_order(_sample_counts(in_order, num_tokens))
        assert judgement.judged and not judgement.out_of_order, (num_tokens, judgement)
        assert judgement.wrong_pairs == 0
        # ... a shuffled or alphabetical one always.
        for wrong in (shuffled, sorted(in_order)):
            judgement = judge_frequency_order(_sample_counts(wrong, num_tokens))
            assert judgement.out_of_order, (num_tokens, judgement)
            assert judgement.wrong_pairs > 0.3 * judgement.clear_pairs
    # Too little data: not judged, whatever the order.
    judgement = judge_frequency_order(_sample_counts(shuffled, 50))
    assert not judgement.judged and not judgement.out_of_order
    # The first entry out of order and the most counted one after it.
    judgement = judge_frequency_order([50, 40, 0, 30, 100, 1])
    assert (judgement.first_wrong, judgement.later) == (0, 4)


def _order_check_with(tmp_path: Path, tokens, check_after_tokens=10**9):
    from elmo_plugin.data.vocabulary import VocabularyOrderCheck

    vocab_file = _write_vocab(tmp_path / "vocab.txt", tokens)
    vocab = BilmTfVocabulary.from_bilm_tf_file(vocab_file)
    return vocab, vocab_file, VocabularyOrderCheck(vocab, "lm_targets", check_after_tokens)


def _sample_target_ids(vocab, num_tokens):
    tokens = (SAMPLE / "train.txt").read_text(encoding="utf-8").split()[:num_tokens]
    return torch.tensor([vocab.get_token_index(token, "lm_targets") for token in tokens])


def test_vocabulary_order_check_names_the_file_and_the_first_line_out_of_order(tmp_path: Path):
    vocabulary = _sample_vocabulary()
    # Alphabetical after the special tokens: ".", "a", "across" ... "the" ... In the first 5,000
    # tokens "." (line 4, 500 times) is not clearly counted less than any later entry ("the",
    # 523), but "a" (line 5, 178 times) is.
    alphabetical = vocabulary[:3] + sorted(vocabulary[3:])
    vocab, vocab_file, check = _order_check_with(tmp_path, alphabetical, check_after_tokens=3000)
    ids = _sample_target_ids(vocab, 5000)
    check.observe(ids[:2000])  # below check_after_tokens: nothing judged yet
    with pytest.raises(ConfigurationError) as error:
        check.observe(ids[2000:])
    message = str(error.value)
    assert message.startswith(
        f"the vocabulary {vocab_file} is not sorted by descending frequency, which the sampled "
        "softmax's log-uniform sampler assumes"
    )
    assert "in the first 5000 training targets" in message
    the_line = alphabetical.index("the") + 1
    assert (
        f"The first line out of order: {vocab_file}:5 'a' (counted 178 times) comes before "
        f"{vocab_file}:{the_line} 'the' (counted 523 times)."
    ) in message
    assert """-o '{"model.check_vocabulary_order": false}'""" in message
    check.observe(ids)  # judged once: no second error
    check.finish()


def test_vocabulary_order_check_passes_the_sample_vocabulary_and_judges_once(tmp_path: Path):
    vocab, _, check = _order_check_with(tmp_path, _sample_vocabulary())
    check.observe(_sample_target_ids(vocab, 2000))
    check.finish()  # a small corpus: judged at the end of the first epoch, in order
    assert check.done


def test_vocabulary_order_check_can_be_turned_off(tmp_path: Path):
    from elmo_plugin.data.vocabulary import VocabularyOrderCheck

    vocabulary = _sample_vocabulary()
    vocab_file = _write_vocab(tmp_path / "vocab.txt", vocabulary[:3] + vocabulary[3:][::-1])
    vocab = BilmTfVocabulary.from_bilm_tf_file(vocab_file)
    check = VocabularyOrderCheck(vocab, "lm_targets", enabled=False)
    check.observe(_sample_target_ids(vocab, 5000))
    check.finish()
    enabled = VocabularyOrderCheck(vocab, "lm_targets")
    enabled.observe(_sample_target_ids(vocab, 5000))
    with pytest.raises(ConfigurationError, match="not sorted by descending frequency"):
        enabled.finish()
