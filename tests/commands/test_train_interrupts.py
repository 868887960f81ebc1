"""
``allennlp train`` interrupted (Ctrl-C, SIGTERM): one line, exit status 130 or 143, no traceback;
a run that saved no checkpoint removes the folder it made (the same command then runs again), one
that did says the command that resumes it, which does. From Python the interruption is raised
as it came. Which of the two happens is decided by which function runs: the command
(``allennlp.commands.train.train_model_from_args``, the plugin's once it is imported) or the
Python function (``train_model_from_file``), not by who called.

In-process, AllenNLP's ``train_model`` is replaced by one that makes the run folder (as it does)
and is interrupted; the real command is interrupted by a real signal in a subprocess, as installed
(`tests.helpers.installed_allennlp`).
"""
import argparse
import json
import os
import shlex
import shutil
import signal
import subprocess
import time
from pathlib import Path
from typing import Optional

import pytest
from allennlp.commands import train
from allennlp.common.util import SigTermReceived

from elmo_plugin.commands import train_command
from tests.commands import pause_callback
from tests.commands.pause_callback import PAUSE_SECONDS
from tests.commands.test_user_mistakes import run_allennlp
from tests.helpers import CONFIG_DIR, ctrl_c_as_in_a_terminal, installed_allennlp, installed_environment
from tests.training_configs.test_bilm_configs import write_sample_subset

BILM = CONFIG_DIR / "bilm.jsonnet"


def interrupted_training(interruption: BaseException, checkpoint: Optional[str] = None):
    """AllenNLP's train_model as far as an interruption: the run folder made, maybe a checkpoint."""

    def train_model(params, serialization_dir, **kwargs):
        os.makedirs(serialization_dir, exist_ok=kwargs.get("recover", False))
        Path(serialization_dir, "config.json").write_text("{}", encoding="utf-8")
        if checkpoint is not None:
            Path(serialization_dir, checkpoint).write_bytes(b"")
        raise interruption

    return train_model


def tiny_run(tmp_path: Path, pause_after_epoch: Optional[int] = None) -> str:
    data = write_sample_subset(tmp_path / "data", train_lines=40, heldout_lines=10)
    overrides = {
        "train_data_path": data["train_data_path"],
        "validation_data_path": data["validation_data_path"],
        "trainer.num_epochs": 2,
    }
    if pause_after_epoch is not None:  # start_training includes its package
        overrides["trainer.callbacks"] = [{"type": "test_pause", "after_epoch": pause_after_epoch}]
    return json.dumps(overrides)


@pytest.mark.parametrize("interruption, status", [(KeyboardInterrupt(), 130), (SigTermReceived(), 143)])
def test_an_interrupted_run_without_a_checkpoint_removes_its_folder(
    interruption, status, tmp_path, capsys, monkeypatch
):
    monkeypatch.setattr(train, "train_model", interrupted_training(interruption))
    run = tmp_path / "run"
    exit_status, out, err = run_allennlp(["train", BILM, "-s", run], capsys, monkeypatch)
    assert exit_status == status
    assert (out, err) == ("", f"allennlp train: error: interrupted before the first checkpoint; {run} "
                              "was removed\n")
    assert not run.exists()


def test_an_interrupted_run_with_a_checkpoint_says_how_to_resume(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(train, "train_model",
                        interrupted_training(KeyboardInterrupt(), "model_state_e1_b0.th"))
    run = tmp_path / "my run"
    overrides = '{"trainer.num_epochs": 3}'
    status, _, err = run_allennlp(
        ["train", BILM, "-s", run, "-o", overrides, "--include-package", "elmo_plugin", "-f"],
        capsys, monkeypatch,
    )
    assert status == 130
    # -f left out: with --recover AllenNLP refuses it.
    assert err == (
        f"allennlp train: error: interrupted; to go on from the last checkpoint in {run}: "
        f"allennlp train {BILM} -s '{run}' -o '{overrides}' --include-package elmo_plugin "
        "--recover\n"
    )
    assert sorted(os.listdir(run)) == ["config.json", "model_state_e1_b0.th"]


def test_a_recovered_run_is_never_removed(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(train, "train_model", interrupted_training(KeyboardInterrupt()))
    run = tmp_path / "run"
    run.mkdir()
    status, _, err = run_allennlp(["train", BILM, "-s", run, "--recover"], capsys, monkeypatch)
    assert status == 130
    assert err == (f"allennlp train: error: interrupted before the first checkpoint; {run} holds "
                   "no checkpoint\n")
    assert run.is_dir()


def test_python_callers_get_the_interruption_and_the_folder_is_removed(tmp_path, monkeypatch):
    monkeypatch.setattr(train, "train_model", interrupted_training(KeyboardInterrupt()))
    with pytest.raises(KeyboardInterrupt):
        train.train_model_from_file(str(BILM), str(tmp_path / "run"))
    assert not (tmp_path / "run").exists()


def test_the_command_and_the_python_function_are_two_functions():
    # The command reports; the function raises: AllenNLP's names, the plugin's functions.
    assert train.train_model_from_args is train_command.train_model_from_args
    assert train.train_model_from_file is train_command.train_model_from_file
    source = Path(train_command.__file__).read_text(encoding="utf-8")
    assert "_getframe" not in source and "f_code" not in source


def test_the_resume_command_is_the_command_line_with_recover():
    parser = argparse.ArgumentParser()
    train.Train().add_subparser(parser.add_subparsers())
    args = parser.parse_args(["train", "c.jsonnet", "-s", "runs/a b", "-o", '{"x": 1}', "--node-rank",
                              "1", "--file-friendly-logging", "-f"])
    args.include_package = ["elmo_plugin", "my_package"]
    assert shlex.split(train_command.resume_command(args)) == [
        "allennlp", "train", "c.jsonnet", "-s", "runs/a b", "-o", '{"x": 1}', "--node-rank", "1",
        "--include-package", "elmo_plugin", "--include-package", "my_package",
        "--file-friendly-logging", "--recover",
    ]


# -- the real command, a real signal -------------------------------------------------------------


# The tiny run trains in a fraction of a second: without a pause, a signal sent once its files
# appear may land after it has finished (exit status 0 where 130 is expected). The
# callback's module goes beside the launcher, first on its import path (a `tests` package of
# another project is importable there too).
PAUSE = "elmo_test_pause"


def start_training(tmp_path: Path, run: Path, overrides: str, *extra: str) -> subprocess.Popen:
    """The command, holding for a minute where ``overrides``' pause callback says."""
    command = installed_allennlp(tmp_path / "env")
    shutil.copyfile(pause_callback.__file__, tmp_path / "env" / f"{PAUSE}.py")
    return subprocess.Popen(
        command + ["train", str(BILM), "-s", str(run), "-o", overrides, "--include-package", PAUSE, *extra],
        cwd=tmp_path,
        env=installed_environment(tmp_path / "home", OMP_NUM_THREADS="1", **{PAUSE_SECONDS: "60"}),
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, preexec_fn=ctrl_c_as_in_a_terminal,
    )


def wait_for(path_pattern: Path, process: subprocess.Popen, timeout: float = 300) -> None:
    deadline = time.monotonic() + timeout
    while not list(path_pattern.parent.glob(path_pattern.name)):
        assert process.poll() is None, process.communicate()
        assert time.monotonic() < deadline, f"no {path_pattern}"
        time.sleep(0.1)


@pytest.mark.slow  # subprocesses: in `make test-all` (CI), kept out of `make test`'s time
def test_ctrl_c_of_allennlp_train_is_one_line_and_the_same_command_then_runs(tmp_path):
    run = tmp_path / "run"
    overrides = tiny_run(tmp_path, pause_after_epoch=-1)
    training = start_training(tmp_path, run, overrides)
    wait_for(run / "config.json", training)  # made before the first batch (and the pause)
    training.send_signal(signal.SIGINT)
    out, err = training.communicate(timeout=300)
    assert training.returncode == 130, err
    assert err == f"allennlp train: error: interrupted before the first checkpoint; {run} was removed\n"
    assert "Traceback" not in out
    assert not run.exists()
    # The same command runs again (AllenNLP refuses an existing folder): it gets as far as before.
    again = start_training(tmp_path, run, overrides)
    wait_for(run / "config.json", again)
    again.send_signal(signal.SIGINT)
    _, err = again.communicate(timeout=300)
    assert again.returncode == 130 and len(err.splitlines()) == 1, err


@pytest.mark.slow  # two epochs, then two more
def test_sigterm_after_a_checkpoint_says_the_command_that_resumes_and_it_does(tmp_path):
    run = tmp_path / "run"
    overrides = tiny_run(tmp_path, pause_after_epoch=1)  # after the first checkpoint
    training = start_training(tmp_path, run, overrides)
    wait_for(run / "model_state_e*.th", training)
    training.send_signal(signal.SIGTERM)
    _, err = training.communicate(timeout=300)
    assert training.returncode == 143, err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in err
    prefix = f"allennlp train: error: interrupted; to go on from the last checkpoint in {run}: "
    assert lines[0].startswith(prefix)
    resume = shlex.split(lines[0][len(prefix):])
    assert resume == ["allennlp", "train", str(BILM), "-s", str(run), "-o", overrides,
                      "--include-package", PAUSE, "--recover"]
    resumed = subprocess.run(  # no pause: TEST_PAUSE_SECONDS is not set
        installed_allennlp(tmp_path / "env") + resume[1:], cwd=tmp_path,
        env=installed_environment(tmp_path / "home", OMP_NUM_THREADS="1"),
        capture_output=True, text=True, timeout=600,
    )
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert json.loads((run / "metrics.json").read_text())["epoch"] == 1  # both epochs done
    assert (run / "model.tar.gz").is_file()
