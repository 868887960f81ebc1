"""
Tests of the ``allennlp elmo`` subcommand. Most run the command in-process through its own
argument parser (fast); two start the real ``allennlp`` CLI to check that the plugin registers
the command and that output and errors look right from a shell.
"""
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import List

import h5py
import numpy as np
import pytest

from allennlp.commands import ArgumentParserWithDefaults
from allennlp.common import logging as common_logging

from elmo_plugin.modules.bilm import ElmoBiLm
from elmo_plugin.commands.elmo import ElmoCommand
from elmo_plugin.embedding.elmo_embedder import ElmoEmbedder
from tests.helpers import REPO_ROOT

FIXTURES = REPO_ROOT.parent / "shared" / "fixtures" / "elmo_allennlp"
OPTIONS_FILE = str(FIXTURES / "options.json")
WEIGHT_FILE = str(FIXTURES / "lm_weights.hdf5")
MODEL_ARGS = ["--options-file", OPTIONS_FILE, "--weight-file", WEIGHT_FILE]

LINES = [
    "The cat sat on the mat .",
    "Hello !",
    "밥 을 먹었다",
    "ELMo vectors depend on context , not only on the word .",
    "one",
]

BATCH_TOLERANCE = 1e-5

# conftest.py: one intra-op thread for the tiny model (spinning OpenMP threads on a busy 2-core
# machine made these tests many times slower).
pytestmark = pytest.mark.usefixtures("single_thread")


@pytest.fixture(scope="module")
def embedder() -> ElmoEmbedder:
    return ElmoEmbedder(OPTIONS_FILE, WEIGHT_FILE)


def write_lines(path: Path, lines: List[str]) -> Path:
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return path


def run_elmo(*arguments, model_files: bool = True) -> int:
    """
    Parses ``allennlp elmo ARGUMENTS`` (plus the fixture model's files unless ``model_files`` is
    False) with the command's own parser and runs it in-process; returns the exit status.
    """
    parser = ArgumentParserWithDefaults(prog="allennlp")
    subparsers = parser.add_subparsers()
    ElmoCommand().add_subparser(subparsers)
    argv = ["elmo"] + [str(argument) for argument in arguments]
    if model_files:
        argv += MODEL_ARGS
    try:
        args = parser.parse_args(argv)
        args.func(args)
    except SystemExit as exit:
        return exit.code if isinstance(exit.code, int) else 1
    return 0


def read_output(path: Path):
    with h5py.File(path, "r") as handle:
        datasets = {key: handle[key][...] for key in handle if key != "sentence_to_index"}
        mapping = (
            json.loads(handle["sentence_to_index"][0]) if "sentence_to_index" in handle else None
        )
    return datasets, mapping


@pytest.mark.parametrize("mode", ["--all", "--top", "--average"])
def test_output_modes_match_embed_sentence(embedder, tmp_path, capsys, mode):
    input_file = write_lines(tmp_path / "in.txt", LINES)
    output_file = tmp_path / "out.hdf5"
    status = run_elmo(input_file, output_file, mode, "--batch-size", "2")
    assert status == 0
    assert f"to {output_file}" in capsys.readouterr().out
    datasets, mapping = read_output(output_file)
    assert sorted(datasets) == ["0", "1", "2", "3", "4"]
    for index, line in enumerate(LINES):
        layers = embedder.embed_sentence(line.split())
        if mode == "--all":
            expected = layers
        elif mode == "--top":
            expected = layers[-1]
        else:
            expected = (layers[0] + layers[1] + layers[2]) / 3.0
        assert datasets[str(index)].shape == expected.shape
        assert datasets[str(index)].dtype == np.float32
        np.testing.assert_allclose(datasets[str(index)], expected, rtol=0, atol=BATCH_TOLERANCE)
    assert mapping == {line: str(index) for index, line in enumerate(LINES)}
    assert sorted(os.listdir(tmp_path)) == ["in.txt", "out.hdf5"]


def test_sentence_to_index_uses_single_spaces_and_forget_sentences_drops_it(tmp_path):
    input_file = write_lines(tmp_path / "in.txt", ["a  b\tc", "d", "a b c"])
    assert run_elmo(input_file, tmp_path / "kept.hdf5", "--top") == 0
    _, mapping = read_output(tmp_path / "kept.hdf5")
    # Tokens joined by single spaces; a repeated sentence maps to its last line (as in 0.9).
    assert mapping == {"a b c": "2", "d": "1"}

    forgotten = tmp_path / "forgotten.hdf5"
    assert run_elmo(input_file, forgotten, "--top", "--forget-sentences") == 0
    datasets, mapping = read_output(forgotten)
    assert mapping is None
    assert sorted(datasets) == ["0", "1", "2"]


def test_use_sentence_keys(embedder, tmp_path):
    input_file = write_lines(tmp_path / "in.txt", LINES)
    output_file = tmp_path / "out.hdf5"
    assert run_elmo(input_file, output_file, "--all", "--use-sentence-keys") == 0
    datasets, mapping = read_output(output_file)
    assert mapping is None
    assert sorted(datasets) == sorted(LINES)
    for line in LINES:
        np.testing.assert_allclose(
            datasets[line], embedder.embed_sentence(line.split()), rtol=0, atol=BATCH_TOLERANCE
        )


def test_use_sentence_keys_rejects_duplicates(tmp_path, capsys):
    input_file = write_lines(tmp_path / "in.txt", ["a b", "c", "a b", "d", "c"])
    status = run_elmo(input_file, tmp_path / "out.hdf5", "--top", "--use-sentence-keys")
    assert status == 1
    error = capsys.readouterr().err
    assert error.startswith("allennlp elmo: error: ")
    assert "line 3 repeats line 1, line 5 repeats line 2" in error
    assert "Traceback" not in error
    assert os.listdir(tmp_path) == ["in.txt"]


def test_blank_lines_are_an_error_naming_them_and_nothing_is_written(tmp_path, capsys):
    input_file = write_lines(tmp_path / "in.txt", ["a", "", "b", "   ", "c", ""])
    status = run_elmo(input_file, tmp_path / "out.hdf5", "--all")
    assert status == 1
    error = capsys.readouterr().err
    assert "3 blank or whitespace-only line(s), at line(s) 2, 4, 6 (1-based)" in error
    assert error.count("\n") == 1  # one line
    assert os.listdir(tmp_path) == ["in.txt"]


def test_invalid_utf8_is_an_error_naming_the_line(tmp_path, capsys):
    input_file = tmp_path / "in.txt"
    input_file.write_bytes("ok line\nZ\xfcrich\n".encode("latin-1"))
    status = run_elmo(input_file, tmp_path / "out.hdf5", "--all")
    assert status == 1
    error = capsys.readouterr().err
    assert f"{input_file}:2: not valid UTF-8 (byte offset 9" in error
    assert os.listdir(tmp_path) == ["in.txt"]


def test_missing_input_file(tmp_path, capsys):
    status = run_elmo(tmp_path / "nowhere.txt", tmp_path / "out.hdf5", "--all")
    assert status == 1
    assert f"input file not found: {tmp_path / 'nowhere.txt'}" in capsys.readouterr().err
    assert os.listdir(tmp_path) == []


def test_missing_model_files_explain_that_nothing_is_downloaded(tmp_path, capsys):
    input_file = write_lines(tmp_path / "in.txt", LINES)
    status = run_elmo(
        input_file, tmp_path / "out.hdf5", "--all", "--options-file", OPTIONS_FILE, model_files=False
    )
    assert status == 2
    error = capsys.readouterr().err
    assert error.startswith("usage: allennlp elmo")
    assert "allennlp elmo: error: --weight-file not given. This plugin does not download" in error
    assert "bilm-tf options.json" in error and "weights.hdf5" in error

    assert run_elmo(input_file, tmp_path / "out.hdf5", "--top", model_files=False) == 2
    assert "--options-file and --weight-file not given" in capsys.readouterr().err
    assert os.listdir(tmp_path) == ["in.txt"]


def test_output_mode_is_required_and_exclusive(tmp_path, capsys):
    input_file = write_lines(tmp_path / "in.txt", LINES)
    assert run_elmo(input_file, tmp_path / "out.hdf5") == 2
    assert "one of the arguments --all --top --average is required" in capsys.readouterr().err
    assert run_elmo(input_file, tmp_path / "out.hdf5", "--all", "--top") == 2
    assert "not allowed with argument" in capsys.readouterr().err
    assert run_elmo(input_file, tmp_path / "out.hdf5", "--all", "--batch-size", "0") == 2
    assert "must be a positive integer" in capsys.readouterr().err


def test_unavailable_cuda_device_is_one_clear_line(tmp_path, capsys):
    import torch

    device = torch.cuda.device_count()  # one past the last GPU, if any
    input_file = write_lines(tmp_path / "in.txt", LINES)
    status = run_elmo(input_file, tmp_path / "out.hdf5", "--all", "--cuda-device", device)
    assert status == 1
    error = capsys.readouterr().err
    assert f"allennlp elmo: error: cuda_device={device} was requested, but" in error
    assert "--cuda-device -1" in error


def test_interrupted_run_leaves_no_output_and_no_temporary_file(tmp_path, capsys, monkeypatch):
    input_file = write_lines(tmp_path / "in.txt", LINES * 3)
    calls = []
    original_forward = ElmoBiLm.forward

    def forward_that_is_interrupted(self, character_ids):
        calls.append(1)
        if len(calls) == 3:
            raise KeyboardInterrupt
        return original_forward(self, character_ids)

    monkeypatch.setattr(ElmoBiLm, "forward", forward_that_is_interrupted)
    status = run_elmo(input_file, tmp_path / "out.hdf5", "--all", "--batch-size", "2")
    assert status == 130
    assert len(calls) == 3
    assert "interrupted" in capsys.readouterr().err
    assert os.listdir(tmp_path) == ["in.txt"]


def test_stateful_reproduces_the_stateful_embedder_and_tensorflow(tmp_path):
    with open(FIXTURES / "sentences.json", encoding="utf-8") as handle:
        by_row = json.load(handle)
    # The order TensorFlow saw them in: batch i = sentence i of each of the 3 lists.
    lines = [by_row[row][batch] for batch in range(10) for row in range(3)]
    input_file = write_lines(tmp_path / "in.txt", lines)
    output_file = tmp_path / "out.hdf5"
    status = run_elmo(input_file, output_file, "--all", "--stateful", "--batch-size", "3")
    assert status == 0
    datasets, _ = read_output(output_file)

    stateful = ElmoEmbedder(OPTIONS_FILE, WEIGHT_FILE, stateful=True)
    expected = list(stateful.embed_sentences([line.split() for line in lines], batch_size=3))
    for index, embedding in enumerate(expected):
        # The same computation in the same batches: bit for bit.
        np.testing.assert_array_equal(datasets[str(index)], embedding)
    for index in range(len(lines)):
        row, batch = index % 3, index // 3
        with h5py.File(FIXTURES / f"lm_embeddings_{row}.hdf5", "r") as handle:
            halves = handle[str(batch)][...]
        tensorflow_top = np.concatenate([halves[0], halves[1]], axis=-1)
        np.testing.assert_allclose(datasets[str(index)][2], tensorflow_top, rtol=0, atol=2e-6)


def test_file_friendly_logging_sets_allennlps_flag(tmp_path, monkeypatch):
    monkeypatch.setattr(common_logging, "FILE_FRIENDLY_LOGGING", False)
    input_file = write_lines(tmp_path / "in.txt", LINES[:1])
    assert run_elmo(input_file, tmp_path / "out.hdf5", "--top", "--file-friendly-logging") == 0
    assert common_logging.FILE_FRIENDLY_LOGGING is True


def test_help_describes_the_layout(capsys):
    assert run_elmo("--help", model_files=False) == 0
    help_text = capsys.readouterr().out
    for text in ("--all", "--top", "--average", "--stateful", "sentence_to_index",
                 "downloads nothing", "(default = 64)"):
        assert text in help_text


# ----------------------------------------------------------------------------------------------
# The real CLI (each start costs a few seconds)


def run_allennlp(arguments: List[str]) -> subprocess.CompletedProcess:
    # cwd = the repository, whose .allennlp_plugins file makes allennlp import elmo_plugin.
    return subprocess.run(
        [sys.executable, "-m", "allennlp", "elmo"] + arguments,
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_allennlp_cli_runs_elmo(embedder, tmp_path):
    input_file = write_lines(tmp_path / "in.txt", LINES)
    output_file = tmp_path / "out.hdf5"
    result = run_allennlp([str(input_file), str(output_file), "--average"] + MODEL_ARGS)
    assert result.returncode == 0, result.stderr
    assert f"Wrote ELMo embeddings (average) of {input_file} to {output_file}" in result.stdout
    datasets, mapping = read_output(output_file)
    assert mapping == {line: str(index) for index, line in enumerate(LINES)}
    for index, line in enumerate(LINES):
        np.testing.assert_allclose(
            datasets[str(index)],
            embedder.embed_sentence(line.split()).mean(axis=0),
            rtol=0,
            atol=BATCH_TOLERANCE,
        )


def test_allennlp_cli_explains_a_missing_weight_file(tmp_path):
    input_file = write_lines(tmp_path / "in.txt", LINES)
    result = run_allennlp(
        [str(input_file), str(tmp_path / "out.hdf5"), "--top", "--options-file", OPTIONS_FILE]
    )
    assert result.returncode == 2
    expected = "allennlp elmo: error: --weight-file not given. This plugin does not download"
    assert expected in result.stderr
    assert "Traceback" not in result.stderr
    assert os.listdir(tmp_path) == ["in.txt"]
