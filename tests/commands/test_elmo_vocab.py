"""
``allennlp elmo-vocab`` with bad inputs: an output that is a corpus file is refused and nothing
is lost; an earlier vocabulary that the corpus glob matches is left out, and the summary says
so. (The vocabulary file itself is tested in tests/data/test_vocabulary.py.)
"""
import argparse
import os
from pathlib import Path

import pytest

from elmo_plugin.commands.elmo_vocab import ElmoVocabCommand

CORPUS = "the cat sat on the mat .\nthe dog ran .\n"


def _run_command(argv):
    parser = argparse.ArgumentParser(prog="allennlp")
    subparsers = parser.add_subparsers()
    ElmoVocabCommand().add_subparser(subparsers)
    args = parser.parse_args(["elmo-vocab", *map(str, argv), "--no-progress"])
    args.func(args)


@pytest.fixture
def corpus(tmp_path: Path) -> Path:
    directory = tmp_path / "corpus"
    directory.mkdir()
    for name in ("a.txt", "b.txt"):
        (directory / name).write_text(CORPUS, encoding="utf-8")
    return directory


def test_output_equal_to_the_input_is_refused_and_the_corpus_kept(corpus: Path, tmp_path, capsys):
    a_file = corpus / "a.txt"
    link = tmp_path / "link.txt"
    link.symlink_to(a_file)
    hard_link = tmp_path / "hard.txt"
    os.link(a_file, hard_link)
    for output in (a_file, link, hard_link):
        with pytest.raises(SystemExit) as exit_info:
            _run_command([a_file, output])
        assert exit_info.value.code == 1
        error = capsys.readouterr().err
        assert error == (
            f"allennlp elmo-vocab: error: the output file {output} would replace the corpus file "
            f"{a_file}; choose an output path that is not one of the corpus files\n"
        )
        assert a_file.read_text(encoding="utf-8") == CORPUS
    assert sorted(os.listdir(corpus)) == ["a.txt", "b.txt"]


def test_the_same_command_twice_counts_the_same_corpus(corpus: Path, capsys):
    output = corpus / "vocab.txt"
    _run_command([corpus / "*.txt", output])
    first = capsys.readouterr().out
    first_vocabulary = output.read_text(encoding="utf-8")
    _run_command([corpus / "*.txt", output])
    second = capsys.readouterr().out
    assert output.read_text(encoding="utf-8") == first_vocabulary
    for printed in (first, second):
        assert "tokens counted:    22" in printed
        assert "files read:        2" in printed
    assert "left out" not in first
    assert (
        f"  left out:          {output} (the output file, an earlier vocabulary, which the glob "
        "matches)"
    ) in second
