"""
Tests of the ``allennlp elmo`` subcommand. Most run the command in-process through its own
argument parser (fast); three start the real ``allennlp`` CLI to check that the plugin registers
the command, that output and errors look right from a shell, and that a download goes to the
cache that ``ALLENNLP_CACHE_ROOT`` names. Downloads come from a local HTTP server
(`tests.model_server`), never from the internet, into temporary caches, never the user's.
"""
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Dict, List, Optional

import h5py
import numpy as np
import pytest
from allennlp.common import logging as common_logging
from cached_path import resource_to_filename

from elmo_plugin.elmo_embedder import ElmoEmbedder
from elmo_plugin.model_files.catalogue import PUBLISHED_MODELS
from elmo_plugin.modules.bilm import ElmoBiLm
from tests.helpers import FIXTURES, REPO_ROOT, read_output, run_elmo, write_lines
from tests.model_server import (
    DROPPED,
    HTML_PAGE,
    NOT_FOUND,
    cache_entries,
    golden_fixtures_dir,
)

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


def test_only_one_model_file_is_a_usage_error_naming_the_other(tmp_path, capsys):
    input_file = write_lines(tmp_path / "in.txt", LINES)
    status = run_elmo(
        input_file, tmp_path / "out.hdf5", "--all", "--options-file", OPTIONS_FILE, model_files=False
    )
    assert status == 2
    error = capsys.readouterr().err
    assert error.startswith("usage: allennlp elmo")
    assert (
        "allennlp elmo: error: --weight-file not given: ELMo needs --options-file and "
        "--weight-file together" in error
    )
    assert "bilm-tf options.json" in error and "--model" in error

    status = run_elmo(
        input_file, tmp_path / "out.hdf5", "--top", "--weight-file", WEIGHT_FILE, model_files=False
    )
    assert status == 2
    assert "allennlp elmo: error: --options-file not given" in capsys.readouterr().err
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
                 "--model NAME_OR_PATH", "--list-models", "ELMO_MODELS_URL", "(default = 64)"):
        assert text in help_text


# ----------------------------------------------------------------------------------------------
# The real CLI (each start costs a few seconds)


def run_allennlp(
    arguments: List[str], env: Optional[Dict[str, str]] = None
) -> subprocess.CompletedProcess:
    # cwd = the repository, whose .allennlp_plugins file makes allennlp import elmo_plugin.
    return subprocess.run(
        [sys.executable, "-m", "allennlp", "elmo"] + arguments,
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
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
    expected = "allennlp elmo: error: --weight-file not given: ELMo needs --options-file and"
    assert expected in result.stderr
    assert "Traceback" not in result.stderr
    assert os.listdir(tmp_path) == ["in.txt"]


# ----------------------------------------------------------------------------------------------
# Naming the model: the published default, --model, --list-models. A local HTTP server plays
# AllenNLP's bucket (ELMO_MODELS_URL), serving the golden fixture as the published "original".

GOLDEN = golden_fixtures_dir()
ORIGINAL = PUBLISHED_MODELS["original"]


def golden_lines() -> List[str]:
    """The fixture's sentences in the order TensorFlow saw them: batch i, sentence i of each row."""
    with open(GOLDEN / "sentences.json", encoding="utf-8") as handle:
        by_row = json.load(handle)
    return [by_row[row][batch] for batch in range(10) for row in range(3)]


def assert_matches_tensorflow(output_file: Path, num_lines: int) -> None:
    """The top layer of an ``--all --stateful --batch-size 3`` run equals bilm-tf's vectors."""
    datasets, _ = read_output(output_file)
    assert len(datasets) == num_lines
    for index in range(num_lines):
        row, batch = index % 3, index // 3
        with h5py.File(GOLDEN / f"lm_embeddings_{row}.hdf5", "r") as handle:
            halves = handle[str(batch)][...]
        tensorflow_top = np.concatenate([halves[0], halves[1]], axis=-1)
        np.testing.assert_allclose(datasets[str(index)][2], tensorflow_top, rtol=0, atol=2e-6)


def test_no_model_named_downloads_the_published_original_once(model_server, cache_dir, tmp_path):
    lines = golden_lines()
    input_file = write_lines(tmp_path / "in.txt", lines)
    arguments = ("--all", "--stateful", "--batch-size", "3")
    assert run_elmo(input_file, tmp_path / "first.hdf5", *arguments, model_files=False) == 0
    assert_matches_tensorflow(tmp_path / "first.hdf5", len(lines))
    assert sorted(model_server.gets()) == sorted(model_server.files)

    # The server gone (offline): the cached copy is used.
    model_server.stop()
    assert run_elmo(input_file, tmp_path / "second.hdf5", *arguments, model_files=False) == 0
    assert_matches_tensorflow(tmp_path / "second.hdf5", len(lines))


@pytest.mark.parametrize("behaviour", [NOT_FOUND, DROPPED, HTML_PAGE])
def test_a_failed_download_is_one_error_line_and_nothing_is_written_or_cached(
    model_server, cache_dir, tmp_path, capsys, behaviour
):
    weights_url = ORIGINAL.weights_url(model_server.url)
    model_server.misbehave[model_server.path_of(weights_url)] = behaviour
    input_file = write_lines(tmp_path / "in.txt", LINES)
    assert run_elmo(input_file, tmp_path / "out.hdf5", "--top", model_files=False) == 1
    error = capsys.readouterr().err
    # Only the download's progress bar (if it started) comes before the one error line.
    assert error.count("allennlp elmo: error: ") == 1
    last_line = error.rstrip("\n").splitlines()[-1]
    assert last_line.startswith("allennlp elmo: error: ") and weights_url in last_line
    assert "Traceback" not in error
    assert os.listdir(tmp_path) == ["in.txt"]
    prefix = resource_to_filename(weights_url)
    assert not [name for name in cache_entries(cache_dir) if name.startswith(prefix)]


def test_offline_with_an_empty_cache_is_one_line(model_server, cache_dir, tmp_path, capsys):
    model_server.stop()
    input_file = write_lines(tmp_path / "in.txt", LINES)
    assert run_elmo(input_file, tmp_path / "out.hdf5", "--all", model_files=False) == 1
    error = capsys.readouterr().err
    assert error.count("\n") == 1
    assert error.startswith(
        f"allennlp elmo: error: cannot download {ORIGINAL.options_url(model_server.url)} "
        "(Connection refused) and it is not in the cache"
    )
    assert "--model DIRECTORY" in error
    assert "--options-file OPTIONS_JSON with --weight-file WEIGHTS_HDF5" in error
    assert os.listdir(tmp_path) == ["in.txt"]
    assert cache_entries(cache_dir) == []


def test_model_directory_and_files_winning_over_model(embedder, tmp_path):
    directory = tmp_path / "exported"  # what allennlp elmo-export writes
    directory.mkdir()
    shutil.copy(OPTIONS_FILE, directory / "options.json")
    shutil.copy(WEIGHT_FILE, directory / "weights.hdf5")
    input_file = write_lines(tmp_path / "in.txt", LINES)
    status = run_elmo(
        input_file, tmp_path / "a.hdf5", "--top", "--model", directory, model_files=False
    )
    assert status == 0
    datasets, _ = read_output(tmp_path / "a.hdf5")
    for index, line in enumerate(LINES):
        expected = embedder.embed_sentence(line.split())[-1]
        np.testing.assert_allclose(datasets[str(index)], expected, rtol=0, atol=BATCH_TOLERANCE)
    # --options-file and --weight-file win: the unknown --model is not even looked at.
    assert run_elmo(input_file, tmp_path / "b.hdf5", "--top", "--model", "no-such-model") == 0


def test_unknown_model_is_one_error_line(tmp_path, capsys):
    input_file = write_lines(tmp_path / "in.txt", LINES)
    status = run_elmo(
        input_file, tmp_path / "out.hdf5", "--top", "--model", "tiny", model_files=False
    )
    assert status == 1
    error = capsys.readouterr().err
    assert error == (
        "allennlp elmo: error: unknown ELMo model 'tiny': not a published model (small, medium, "
        "original, original-5.5b) and no such file or directory\n"
    )
    assert os.listdir(tmp_path) == ["in.txt"]


def test_list_models_needs_no_other_arguments(model_server, cache_dir, capsys):
    assert run_elmo("--list-models", model_files=False) == 0
    listing = capsys.readouterr().out
    for model in PUBLISHED_MODELS.values():
        assert f"{model.name:<15}{model.parameters:>11}{model.output_dim:>12}  no" in listing
        assert model.options_url(model_server.url) in listing
        assert model.weights_url(model_server.url) in listing
    assert str(cache_dir) in listing


def test_allennlp_cli_downloads_the_default_model_into_allennlp_cache_root(
    model_server, embedder, tmp_path_factory
):
    work = tmp_path_factory.mktemp("work")
    cache_root = tmp_path_factory.mktemp("allennlp_root")
    input_file = write_lines(work / "in.txt", LINES)
    output_file = work / "out.hdf5"
    # The child reads ALLENNLP_CACHE_ROOT when AllenNLP is imported; ELMO_MODELS_URL is set by
    # the model_server fixture.
    env = {**os.environ, "ALLENNLP_CACHE_ROOT": str(cache_root)}
    result = run_allennlp([str(input_file), str(output_file), "--top"], env=env)
    assert result.returncode == 0, result.stderr
    datasets, _ = read_output(output_file)
    for index, line in enumerate(LINES):
        expected = embedder.embed_sentence(line.split())[-1]
        np.testing.assert_allclose(datasets[str(index)], expected, rtol=0, atol=BATCH_TOLERANCE)
    cached = cache_entries(cache_root / "cache")
    for url in (ORIGINAL.options_url(model_server.url), ORIGINAL.weights_url(model_server.url)):
        assert any(name.startswith(resource_to_filename(url)) for name in cached)


def test_sigterm_is_one_line_status_143_and_leaves_no_output(tmp_path):
    # Used to print a 53-line traceback. AllenNLP turns SIGTERM into SigTermReceived; the command
    # reports it on one line, and the half-written temporary output is removed.
    import random
    import signal
    import time

    words = "the a cat dog sat on mat ran river bank house old new".split()
    generator = random.Random(0)
    input_file = write_lines(
        tmp_path / "in.txt",
        [" ".join(generator.choice(words) for _ in range(20)) for _ in range(5000)],
    )
    output_file = tmp_path / "out.hdf5"
    process = subprocess.Popen(
        [sys.executable, "-m", "allennlp", "elmo", str(input_file), str(output_file), "--top",
         "--batch-size", "16", *MODEL_ARGS],
        cwd=REPO_ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        # Embedding has started once the temporary output exists.
        deadline = time.monotonic() + 120
        while not any(name.endswith(".tmp") for name in os.listdir(tmp_path)):
            assert process.poll() is None, process.communicate()
            assert time.monotonic() < deadline, "embedding did not start"
            time.sleep(0.05)
        process.send_signal(signal.SIGTERM)
        _, stderr = process.communicate(timeout=60)
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()
    # Without the progress bar's lines, so that a failure shows what else the command said.
    said = "\n".join(line for line in stderr.splitlines() if " sentences/s]" not in line)
    assert process.returncode == 143, said[-3000:]
    assert "Traceback" not in stderr, said[-3000:]
    assert stderr.rstrip("\n").split("\n")[-1] == (
        f"allennlp elmo: error: interrupted; {output_file} was not written."
    )
    assert sorted(os.listdir(tmp_path)) == ["in.txt"]


def test_each_check_and_the_model_resolution_run_once(tmp_path, monkeypatch):
    import elmo_plugin.elmo_embedder as embedder_module
    import elmo_plugin.embedding_output.job as job_module
    import elmo_plugin.model_files.resolve as resolve_module
    import elmo_plugin.model_files.stored_bilm as stored_module
    from elmo_plugin.modules.bilm import ElmoBiLm

    calls: Dict[str, int] = {}

    def counted(module, name):
        original = getattr(module, name)

        def wrapper(*args, **kwargs):
            calls[name] = calls.get(name, 0) + 1
            return original(*args, **kwargs)

        # Wherever the function was imported by name, so that no call goes uncounted.
        for holder in list(sys.modules.values()):
            if getattr(holder, "__name__", "").startswith("elmo_plugin") and (
                getattr(holder, name, None) is original
            ):
                monkeypatch.setattr(holder, name, wrapper)

    counted(job_module, "check_sentence_file")
    counted(embedder_module, "check_cuda_device")
    counted(resolve_module, "resolve_model")
    counted(resolve_module, "check_file_pair")
    counted(resolve_module, "fetch")
    counted(stored_module, "read_stored_bilm")
    from_stored = ElmoBiLm.from_stored.__func__

    def counted_from_stored(cls, *args, **kwargs):
        calls["from_stored"] = calls.get("from_stored", 0) + 1
        return from_stored(cls, *args, **kwargs)

    monkeypatch.setattr(ElmoBiLm, "from_stored", classmethod(counted_from_stored))
    input_file = write_lines(tmp_path / "in.txt", LINES)
    assert run_elmo(input_file, tmp_path / "out.hdf5", "--top") == 0
    # fetch: the options file and the weight file, once each.
    assert calls == {
        "check_sentence_file": 1,
        "check_cuda_device": 1,
        "resolve_model": 1,
        "check_file_pair": 1,
        "fetch": 2,
        "read_stored_bilm": 1,
        "from_stored": 1,
    }


def test_the_arguments_become_one_job_with_every_option():
    # Every option that changes what is computed or written reaches the job, spelled once there.
    from allennlp.commands import ArgumentParserWithDefaults

    from elmo_plugin.commands.elmo import ElmoCommand, embedding_job

    parser = ArgumentParserWithDefaults(prog="allennlp")
    ElmoCommand().add_subparser(parser.add_subparsers())
    args = parser.parse_args([
        "elmo", "in.txt", "out.hdf5", "--average", "--batch-size", "7", "--forget-sentences",
        "--layout", "flat", "--float16", "--shard-tokens", "99", "--model", "small",
        "--options-file", "o.json", "--weight-file", "w.hdf5", "--cuda-device", "3",
        "--stateful", "--precision", "bfloat16",
    ])
    job = embedding_job(args)
    assert (job.input_path, job.output_path, job.num_sentences) == ("in.txt", "out.hdf5", None)
    assert (job.output_format, job.batch_size, job.layout, job.float16) == ("average", 7, "flat", True)
    assert (job.forget_sentences, job.use_sentence_keys, job.include_sentence_indices) == (
        True, False, False
    )
    assert (job.piece_tokens, job.model, job.options_file, job.weight_file) == (
        99, "small", "o.json", "w.hdf5"
    )
    assert (job.cuda_device, job.stateful, job.precision) == (3, True, "bfloat16")
    assert job.argument_names.options_file == "--options-file"


def test_an_existing_output_is_refused_on_one_line_and_left_as_it_was(tmp_path, capsys):
    input_file = write_lines(tmp_path / "in.txt", LINES)
    notes = tmp_path / "notes.txt"
    notes.write_text("my notes\n", encoding="utf-8")
    # Refused before the model is even looked for (a model that does not exist here).
    status = run_elmo(input_file, notes, "--top", "--model", str(tmp_path / "no-model"),
                      model_files=False)
    assert status == 2
    assert capsys.readouterr().err == (
        f"allennlp elmo: error: {notes} exists; --overwrite replaces it (once the new file is "
        "complete), or choose another output file\n"
    )
    assert notes.read_text(encoding="utf-8") == "my notes\n"
    assert sorted(os.listdir(tmp_path)) == ["in.txt", "notes.txt"]


def test_overwrite_replaces_an_output_only_once_the_new_one_is_complete(
    embedder, tmp_path, capsys, monkeypatch
):
    input_file = write_lines(tmp_path / "in.txt", LINES * 3)
    output_file = tmp_path / "out.hdf5"
    output_file.write_bytes(b"an earlier result")
    calls = []
    original_forward = ElmoBiLm.forward

    def forward_that_is_interrupted(self, character_ids):
        calls.append(1)
        if len(calls) == 3:
            raise KeyboardInterrupt
        return original_forward(self, character_ids)

    with monkeypatch.context() as patch:
        patch.setattr(ElmoBiLm, "forward", forward_that_is_interrupted)
        args = ["--top", "--batch-size", "2", "--overwrite"]
        assert run_elmo(input_file, output_file, *args) == 130
    assert output_file.read_bytes() == b"an earlier result"
    assert sorted(os.listdir(tmp_path)) == ["in.txt", "out.hdf5"]

    assert run_elmo(input_file, output_file, "--top", "--overwrite") == 0
    assert f"to {output_file}" in capsys.readouterr().out
    datasets, _ = read_output(output_file)
    np.testing.assert_allclose(
        datasets["1"], embedder.embed_sentence(LINES[1].split())[2], rtol=0, atol=BATCH_TOLERANCE
    )
