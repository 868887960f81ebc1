"""
What ``allennlp train`` prints with the plugin (elmo_plugin.training.console): per epoch one line,
at the end what was trained, the held-out metrics, the time and the model; no config echo, no
batch-input dump, no parameter list, no warning that asks for nothing, no escape codes when
redirected; ``out.log`` keeps everything, and ``ELMO_PLUGIN_VERBOSE=1`` brings AllenNLP's console
back.
"""
import json
import logging
import re
import subprocess
import sys

import pytest
from allennlp.commands import main as allennlp_main

from elmo_plugin.training.console import (
    REPORT_LOGGER,
    VERBOSE_VARIABLE,
    ConsoleFilter,
    EpochSummaryCallback,
)
from tests.helpers import REPO_ROOT, installed_allennlp, installed_environment
from tests.training_configs.test_bilm_configs import write_sample_subset

pytestmark = pytest.mark.usefixtures("single_thread")

BILM = REPO_ROOT / "training_configs" / "bilm.jsonnet"


def record(name: str, level: int, message: str) -> logging.LogRecord:
    return logging.LogRecord(name, level, __file__, 1, message, None, None)


def test_the_console_filter_keeps_the_report_and_warnings_that_call_for_action():
    keep = ConsoleFilter().filter
    assert keep(record(REPORT_LOGGER, logging.INFO, "epoch 1/5 | ..."))
    assert not keep(record("allennlp.common.params", logging.INFO, "trainer.num_epochs = 5"))
    assert not keep(record("allennlp.training.callbacks.console_logger", logging.INFO, "Batch inputs"))
    assert keep(record("elmo_plugin.modules.precision", logging.WARNING, "no bfloat16 here"))
    assert not keep(record(
        "allennlp.training.gradient_descent_trainer", logging.WARNING,
        "You provided a validation dataset but patience was set to None, meaning that early "
        "stopping is disabled",
    ))


class _Tracker:
    tracked_metrics = [(1, "accuracy")]


class _Trainer:
    _num_epochs = 3
    _metric_tracker = _Tracker()


def test_the_epoch_line(caplog):
    callback = EpochSummaryCallback("unused")
    callback.on_start(_Trainer())
    metrics = {
        "training_loss": 0.51234, "training_accuracy": 0.8, "validation_loss": 0.6,
        "validation_accuracy": 0.75, "best_epoch": 1, "training_worker_0_memory_MB": 500.0,
    }
    with caplog.at_level(logging.INFO, logger=REPORT_LOGGER):
        callback.on_epoch(_Trainer(), metrics, epoch=1)
    (line,) = [r.getMessage() for r in caplog.records if r.name == REPORT_LOGGER]
    assert re.fullmatch(
        r"epoch 2/3 \| training loss 0\.5123, accuracy 0\.8 \| validation loss 0\.6, "
        r"accuracy 0\.75 \(best so far\) \[0:00:0\d\]",
        line,
    ), line


def train_bilm_in_process(tmp_path, capsys, monkeypatch, *extra):
    data = write_sample_subset(tmp_path / "data", train_lines=40, heldout_lines=10)
    overrides = {
        "train_data_path": data["train_data_path"],
        "validation_data_path": data["validation_data_path"],
        "trainer.num_epochs": 1,
    }
    monkeypatch.setattr(sys, "argv", [
        "allennlp", "train", str(BILM), "-s", str(tmp_path / "run"), "--include-package",
        "elmo_plugin", "-o", json.dumps(overrides), *extra,
    ])
    capsys.readouterr()
    allennlp_main(prog="allennlp")
    out, err = capsys.readouterr()
    return out + err


def test_a_biLM_run_prints_a_report(tmp_path, capsys, monkeypatch):
    monkeypatch.delenv(VERBOSE_VARIABLE, raising=False)
    printed = train_bilm_in_process(tmp_path, capsys, monkeypatch)
    lines = [line for line in printed.splitlines() if line.strip()]
    assert len(lines) <= 40, printed
    for noise in ("allennlp.common.params", "Batch inputs", "tensor(", "patience",
                  "Tunable (with gradient)", "\x1b[", "\r"):
        assert noise not in printed, noise
    assert re.search(r"^epoch 1/1 \| training ppl [\d.]+, loss [\d.]+ \| validation ppl [\d.]+, "
                     r"loss [\d.]+ \(best so far\) \[\d:\d\d:\d\d\]$", printed, flags=re.M), printed
    run = tmp_path / "run"
    assert re.search(rf"^Trained elmo_bilm \({re.escape(str(BILM))}\): 1 epoch\(s\) in \d:\d\d:\d\d$",
                     printed, flags=re.M), printed
    assert re.search(r"^  validation \(best epoch 1\): ppl [\d.]+, loss [\d.]+$", printed, flags=re.M)
    assert f"  model: {run}/model.tar.gz (log: {run}/out.log)" in printed
    assert f"  to embed with it: allennlp elmo-export {run} {run}/bilm" in printed
    # The numbers are the run's.
    metrics = json.loads((run / "metrics.json").read_text())
    assert f"ppl {metrics['best_validation_ppl']:.4g}," in printed
    # The detail stays in out.log.
    log = (run / "out.log").read_text(encoding="utf-8")
    assert "allennlp.common.params" in log and "Batch inputs" in log and "epoch 1/1 |" in log


def test_the_verbose_switch_brings_allennlps_console_back(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv(VERBOSE_VARIABLE, "1")
    printed = train_bilm_in_process(tmp_path, capsys, monkeypatch)
    assert "allennlp.common.params" in printed and "Batch inputs" in printed


@pytest.mark.slow
def test_the_command_redirected_to_a_file(tmp_path):
    """The Done-when of issue 37: the real command, as installed (the plugin's ``allennlp train``
    is the one that runs: tests.helpers.installed_allennlp), its output redirected, for one epoch."""
    data = write_sample_subset(tmp_path / "data", train_lines=100, heldout_lines=20)
    overrides = {
        "train_data_path": data["train_data_path"],
        "validation_data_path": data["validation_data_path"],
        "trainer.num_epochs": 1,
    }
    result = subprocess.run(
        installed_allennlp(tmp_path / "env")
        + ["train", str(BILM), "-s", str(tmp_path / "run"), "--include-package", "elmo_plugin",
           "-o", json.dumps(overrides)],
        cwd=REPO_ROOT, capture_output=True, text=True, timeout=300,
        env=installed_environment(tmp_path / "home"),
    )
    assert result.returncode == 0, result.stderr
    printed = result.stdout + result.stderr
    assert len([line for line in printed.splitlines() if line.strip()]) <= 40, printed
    assert "\x1b[" not in printed and "[A" not in printed and "\r" not in printed
    assert "allennlp.common.params" not in printed and "Batch inputs" not in printed
    assert "epoch 1/1 |" in printed and "Trained elmo_bilm" in printed
