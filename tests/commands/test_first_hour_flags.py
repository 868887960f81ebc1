"""
The flags a user of AllenNLP's ELMo how-to types (issue 27): ``--include-sentence-indices``
writes the sentence map under ``"sentence_indices"`` as AllenNLP 0.8 did; an unquoted glob to
``elmo-vocab`` or ``elmo-tokenize`` is one usage error that shows the quoted form.
"""
import argparse
import json

import h5py
import pytest

from elmo_plugin.commands.elmo_vocab import ElmoVocabCommand
from tests.commands.test_elmo import LINES, run_elmo, write_lines


def test_include_sentence_indices_writes_the_map_under_sentence_indices_too(tmp_path):
    input_file = write_lines(tmp_path / "in.txt", LINES)
    assert run_elmo(input_file, tmp_path / "out.hdf5", "--top", "--include-sentence-indices") == 0
    with h5py.File(tmp_path / "out.hdf5", "r") as written:
        indices = json.loads(written["sentence_indices"][0])
        assert indices == {line: str(index) for index, line in enumerate(LINES)}
        assert json.loads(written["sentence_to_index"][0]) == indices
    # With --forget-sentences only the how-to's dataset is written.
    assert run_elmo(input_file, tmp_path / "only.hdf5", "--top", "--forget-sentences",
                    "--include-sentence-indices") == 0
    with h5py.File(tmp_path / "only.hdf5", "r") as written:
        assert "sentence_to_index" not in written and "sentence_indices" in written


def test_include_sentence_indices_with_sentence_keys_is_a_usage_error(tmp_path, capsys):
    input_file = write_lines(tmp_path / "in.txt", LINES)
    status = run_elmo(input_file, tmp_path / "out.hdf5", "--top", "--use-sentence-keys",
                      "--include-sentence-indices")
    assert status == 2
    assert "with --use-sentence-keys the keys are the sentences" in capsys.readouterr().err
    assert not (tmp_path / "out.hdf5").exists()


def test_an_unquoted_glob_is_one_usage_error_showing_the_quoted_form(tmp_path, capsys):
    for name in ("a.txt", "b.txt", "c.txt"):
        write_lines(tmp_path / name, ["x y"])
    parser = argparse.ArgumentParser(prog="allennlp")
    ElmoVocabCommand().add_subparser(parser.add_subparsers())
    # What the shell makes of `allennlp elmo-vocab corpus/*.txt vocab.txt`.
    args = parser.parse_args(
        ["elmo-vocab", *(str(tmp_path / n) for n in ("a.txt", "b.txt", "c.txt")), "vocab.txt"]
    )
    with pytest.raises(SystemExit) as exit:
        args.func(args)
    assert exit.value.code == 2
    error = capsys.readouterr().err.strip().splitlines()[-1]
    assert error == (
        f"allennlp elmo-vocab: error: 3 input paths before vocab.txt ({tmp_path}/a.txt, "
        f"{tmp_path}/b.txt, {tmp_path}/c.txt): the shell expanded an unquoted glob. Quote it, so "
        "that the command reads every matching file itself: allennlp elmo-vocab "
        f'"{tmp_path}/*.txt" vocab.txt ...'
    )
