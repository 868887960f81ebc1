"""
``make demo`` (scripts/demo.py): every step on one thread (the model is tiny; beside another busy
process PyTorch's threads made it several times slower), the biLM exported where the training
run's report says, and Ctrl-C or SIGTERM as one line with status 130 or 143 and no traceback
(slow: the demo is interrupted while it trains, in an environment where the plugin is
installed, `tests.helpers.installed_python`).
"""
import importlib.util
import logging
import os
import signal
import subprocess
import time

import pytest

from elmo_plugin.commands.train_command import report_end
from elmo_plugin.training.console import REPORT_LOGGER
from tests.helpers import REPO_ROOT, ctrl_c_as_in_a_terminal, installed_environment, installed_python

DEMO = REPO_ROOT / "scripts" / "demo.py"


def demo_module():
    spec = importlib.util.spec_from_file_location("demo", DEMO)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_steps_run_on_one_thread_unless_told(monkeypatch):
    demo = demo_module()
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    assert demo.step_environment()["OMP_NUM_THREADS"] == "1"
    monkeypatch.setenv("OMP_NUM_THREADS", "2")
    assert demo.step_environment()["OMP_NUM_THREADS"] == "2"


def test_the_biLM_is_exported_where_the_training_report_says(tmp_path, caplog):
    run_dir, bilm_dir = demo_module().directories(str(tmp_path / "demo_output"))
    with caplog.at_level(logging.INFO, logger=REPORT_LOGGER):
        report_end({"model": {"type": "elmo_bilm"}}, "bilm.jsonnet", run_dir, 1.0)
    assert f"  to embed with it: allennlp elmo-export {run_dir} {bilm_dir}" in caplog.messages


def interrupt_the_demo(tmp_path, signum: int):
    python = installed_python(tmp_path / "env")
    output = tmp_path / "demo_output"
    demo = subprocess.Popen(
        [str(python), str(DEMO), str(output)], cwd=REPO_ROOT,
        env=installed_environment(tmp_path / "home"),
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, preexec_fn=ctrl_c_as_in_a_terminal,
    )
    deadline = time.monotonic() + 300
    while not (output / "run" / "config.json").exists():
        assert demo.poll() is None, demo.communicate()
        assert time.monotonic() < deadline
        time.sleep(0.1)
    demo.send_signal(signum)  # to the demo alone, as `make` passes SIGTERM on
    out, err = demo.communicate(timeout=300)
    return demo.returncode, out, err, output


@pytest.mark.slow
@pytest.mark.parametrize("signum, status", [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_interrupting_the_demo_is_one_line(signum, status, tmp_path):
    returncode, out, err, output = interrupt_the_demo(tmp_path, signum)
    assert returncode == status, err
    assert "Traceback" not in out + err
    assert err.splitlines() == [
        f"allennlp train: error: interrupted before the first checkpoint; {output / 'run'} was "
        "removed"
    ]
    assert out.splitlines()[0] == "1. Pretrain a tiny biLM on the built-in sample corpus"
    assert not (output / "run").exists()
    assert os.listdir(output) == []
