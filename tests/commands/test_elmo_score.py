"""
``allennlp elmo-score``: one JSON line per sentence (the scores `LanguageModelScorer` gives,
checked against the training model in tests/models/test_language_model_scorer.py), to a file
written whole or not at all, or to stdout; the file's perplexities printed; the errors of
``allennlp elmo`` for the input and the output, and one line for a model without a softmax.
Run in-process through the command's own parser; one run through the real ``allennlp`` (slow).
"""
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import List

import pytest
import torch
from allennlp.commands import ArgumentParserWithDefaults

from elmo_plugin.commands.elmo_score import ElmoScoreCommand
from elmo_plugin.models.language_model_scorer import NO_SOFTMAX, LanguageModelScorer
from tests.helpers import REPO_ROOT, write_lines
from tests.models.test_elmo_language_model import make_model, vocab  # noqa: F401 (the fixture)
from tests.models.test_language_model_scorer import write_archive

pytestmark = pytest.mark.usefixtures("single_thread")

LINES = ["the cat sat on the mat .", "a zebra ran .", "dog", "a dog sat on a cat", "the mat ran away ."]


def run_score(*arguments) -> int:
    parser = ArgumentParserWithDefaults(prog="allennlp")
    ElmoScoreCommand().add_subparser(parser.add_subparsers())
    try:
        args = parser.parse_args(["elmo-score"] + [str(argument) for argument in arguments])
        args.func(args)
    except SystemExit as exit:
        return exit.code if isinstance(exit.code, int) else 1
    return 0


@pytest.fixture(scope="module")
def run(vocab, tmp_path_factory) -> Path:  # noqa: F811
    return write_archive(make_model(vocab), tmp_path_factory.mktemp("score") / "run")


def read_lines(path: Path) -> List[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def test_one_json_line_per_sentence_with_the_scorers_scores(run, tmp_path, capsys):
    input_file = write_lines(tmp_path / "in.txt", LINES)
    output = tmp_path / "scores.jsonl"
    assert run_score(run / "model.tar.gz", input_file, "--output", output, "--batch-size", "2") == 0
    records = read_lines(output)
    expected = LanguageModelScorer(run).score([line.split() for line in LINES])
    assert [record["line"] for record in records] == [1, 2, 3, 4, 5]
    for record, score in zip(records, expected):
        assert record["tokens"] == len(score.tokens)
        assert record["forward_log_prob"] == pytest.approx(score.forward_log_prob, abs=1e-5)
        assert record["backward_log_prob"] == pytest.approx(score.backward_log_prob, abs=1e-5)
        assert record["perplexity"] == pytest.approx(score.perplexity, rel=1e-5)
        assert "substitutes" not in record
    printed = capsys.readouterr().out
    assert f"Scored 5 sentences of {input_file} (28 predictions per direction) into {output}" in printed
    assert sorted(os.listdir(tmp_path)) == ["in.txt", "scores.jsonl"]


def test_substitutes_and_stdout(run, tmp_path, capsys):
    input_file = write_lines(tmp_path / "in.txt", LINES[:2])
    assert run_score(run, input_file, "--substitutes", "2") == 0
    captured = capsys.readouterr()
    records = [json.loads(line) for line in captured.out.splitlines()]  # nothing else on stdout
    assert len(records) == 2
    substitutes = records[1]["substitutes"]
    assert [entry["word"] for entry in substitutes] == ["a", "zebra", "ran", "."]
    expected = LanguageModelScorer(run).substitutes([LINES[1].split()], k=2)[0]
    for entry, substitute in zip(substitutes, expected):
        for side in ("forward", "backward", "both"):
            assert entry[side]["candidate_words"] == getattr(substitute, side).words
            assert len(entry[side]["logp"]) == 2
    assert "Scored 2 sentences" in captured.err


def test_bad_input_is_one_line_naming_the_file_and_no_output_is_left(run, tmp_path, capsys):
    blank = write_lines(tmp_path / "blank.txt", ["the cat .", "", "a dog ."])
    output = tmp_path / "scores.jsonl"
    assert run_score(run, blank, "--output", output) == 1
    error = capsys.readouterr().err.strip()
    assert error.startswith(f"allennlp elmo-score: error: {blank}: 1 blank or whitespace-only line(s), at line(s) 2")
    assert "\n" not in error

    good = write_lines(tmp_path / "in.txt", LINES)
    assert run_score(run, good, "--output", tmp_path / "missing" / "out.jsonl") == 1
    assert "the output directory does not exist" in capsys.readouterr().err
    assert run_score(run, good, "--output", good) == 1
    assert "would replace the input file" in capsys.readouterr().err
    assert run_score(run, tmp_path / "absent.txt") == 1
    assert "absent.txt" in capsys.readouterr().err
    if not torch.cuda.is_available():
        assert run_score(run, good, "--cuda-device", "0") == 1
        assert "cuda_device=0 was requested, but 0 CUDA device(s) are visible" in capsys.readouterr().err
    assert run_score(run, good, "--substitutes", "0") == 2
    assert "must be a positive integer" in capsys.readouterr().err
    assert sorted(os.listdir(tmp_path)) == ["blank.txt", "in.txt"]


def test_a_model_without_its_softmax_is_one_line(tmp_path, capsys):
    good = write_lines(tmp_path / "in.txt", LINES)
    assert run_score("small", good, "--output", tmp_path / "out.jsonl") == 1
    error = capsys.readouterr().err
    assert error.count("\n") == 1 and NO_SOFTMAX in error and "small is a published bilm-tf model" in error
    assert not (tmp_path / "out.jsonl").exists()


def test_an_interrupted_run_leaves_no_output(run, tmp_path, capsys, monkeypatch):
    input_file = write_lines(tmp_path / "in.txt", LINES)
    output = tmp_path / "scores.jsonl"
    original = LanguageModelScorer._run
    calls = []

    def interrupted(self, batch, k):
        calls.append(len(batch))
        if len(calls) == 2:
            raise KeyboardInterrupt
        return original(self, batch, k)

    monkeypatch.setattr(LanguageModelScorer, "_run", interrupted)
    assert run_score(run, input_file, "--output", output, "--batch-size", "2") == 130
    assert f"interrupted; {output} was not written." in capsys.readouterr().err
    assert sorted(os.listdir(tmp_path)) == ["in.txt"]


@pytest.mark.slow
def test_the_allennlp_command_runs_it(run, tmp_path):
    input_file = write_lines(tmp_path / "in.txt", LINES)
    result = subprocess.run(
        [sys.executable, "-m", "allennlp", "elmo-score", str(run), str(input_file)],
        cwd=REPO_ROOT, capture_output=True, text=True, timeout=600,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert len(result.stdout.splitlines()) == 5 and "Scored 5 sentences" in result.stderr
