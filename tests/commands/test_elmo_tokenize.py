"""
The ``allennlp elmo-tokenize`` command (`elmo_plugin.commands.elmo_tokenize`): its arguments,
its summary and its one-line errors, in-process and as a real ``allennlp`` subprocess. What it
writes is tested with `tokenize_corpus` in tests/korean/test_corpus_tokenization.py.
"""
import argparse
import subprocess
from pathlib import Path

import pytest

from elmo_plugin.commands.elmo_tokenize import ElmoTokenizeCommand
from tests.helpers import REPO_ROOT
from tests.korean.test_corpus_tokenization import MECAB_A, MECAB_B, _lines, raw  # noqa: F401


def _run_command(argv):
    parser = argparse.ArgumentParser(prog="allennlp")
    subparsers = parser.add_subparsers()
    ElmoTokenizeCommand().add_subparser(subparsers)
    args = parser.parse_args(argv)
    args.func(args)


def test_command_line(raw: Path, tmp_path: Path, capsys):  # noqa: F811 (the imported fixture)
    out = tmp_path / "out"
    _run_command(["elmo-tokenize", str(raw / "*.txt"), str(out), "--workers", "1",
                  "--no-progress", "--tokenizer", "korean"])
    assert _lines(out / "b.txt") == MECAB_B
    printed = capsys.readouterr().out
    assert "lines read:           10" in printed
    assert "skipped, no Hangul:   2" in printed

    missing = str(tmp_path / "nothing" / "*.txt")
    with pytest.raises(SystemExit) as exit_info:
        _run_command(["elmo-tokenize", missing, str(out), "--no-progress"])
    assert exit_info.value.code == 1
    error_output = capsys.readouterr().err
    assert error_output.count("\n") == 1
    assert error_output.startswith("allennlp elmo-tokenize: error: no files match")
    assert missing in error_output

    (raw / "c.txt").write_bytes(b"\xc3\x28 bad\n")
    with pytest.raises(SystemExit) as exit_info:
        _run_command(["elmo-tokenize", str(raw / "*.txt"), str(out), "--no-progress"])
    assert exit_info.value.code == 1
    error_output = capsys.readouterr().err
    assert error_output.startswith(
        f"allennlp elmo-tokenize: error: {raw / 'c.txt'}:1: not valid UTF-8"
    )

    for bad_arguments in (
        ["--workers", "0"],
        ["--tokenizer", "okt"],
        ["--tokenizer-params", "[1]"],
        ["--min-tokens", "0"],
    ):
        with pytest.raises(SystemExit) as exit_info:
            _run_command(["elmo-tokenize", str(raw / "*.txt"), str(out)] + bad_arguments)
        assert exit_info.value.code == 2  # argparse usage error


def test_allennlp_elmo_tokenize_subprocess(raw: Path, tmp_path: Path):  # noqa: F811
    allennlp = REPO_ROOT / ".venv" / "bin" / "allennlp"
    if not allennlp.exists():
        pytest.skip(f"{allennlp} not found")
    out = tmp_path / "out"
    result = subprocess.run(
        [str(allennlp), "elmo-tokenize", str(raw / "*.txt"), str(out), "--workers", "2",
         "--no-progress", "--include-package", "elmo_plugin"],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr
    assert _lines(out / "a.txt") == MECAB_A
    assert "lines written:        6" in result.stdout
