"""
Tests of benchmarks/bad_inputs.py: its verdicts catch what they must (data loss, garbage output,
a raw traceback, a wrong exit status, an unclear message), and a few of its cases run for real.
"""
import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers import REPO_ROOT

_PATH = REPO_ROOT / "benchmarks" / "bad_inputs.py"
_SPEC = importlib.util.spec_from_file_location("bad_inputs", _PATH)
bad_inputs = importlib.util.module_from_spec(_SPEC)
sys.modules["bad_inputs"] = bad_inputs
_SPEC.loader.exec_module(bad_inputs)


def _case(**kwargs):
    return bad_inputs.Case(
        input="x", command="elmo-vocab", args=[], setup=lambda d: None, **kwargs
    )


def _judge(tmp_path: Path, case, before, status, stderr="", stdout=""):
    return bad_inputs.judge(case, tmp_path, before, bad_inputs.Result(status, stdout, stderr, 0.0))


def test_verdicts(tmp_path: Path):
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("the cat\n")
    before = bad_inputs.snapshot(tmp_path)
    error = "allennlp elmo-vocab: error: the output file would replace the corpus file\n"
    case = _case(words=["would replace"])
    assert _judge(tmp_path, case, before, 1, error)["verdict"] == "ok"

    corpus.write_text("<S>\n</S>\n<UNK>\n")  # the corpus replaced by the vocabulary
    verdict = _judge(tmp_path, case, before, 0, "")["verdict"]
    assert "DATA LOSS (corpus.txt)" in verdict and "WRONG EXIT" in verdict
    assert "UNCLEAR MESSAGE" in verdict
    corpus.write_text("the cat\n")

    (tmp_path / ".out.hdf5.abc.tmp").write_text("half")
    verdict = _judge(tmp_path, case, before, 1, error)["verdict"]
    assert verdict == "GARBAGE OUTPUT (.out.hdf5.abc.tmp)"
    (tmp_path / ".out.hdf5.abc.tmp").unlink()

    crash = "Traceback (most recent call last):\n  ...\nAttributeError: x\n" + error
    assert _judge(tmp_path, case, before, 1, crash)["verdict"] == "RAW TRACEBACK"
    # allennlp train: AllenNLP's own traceback is allowed when the plugin's message is the error.
    train = bad_inputs.Case("x", "train", [], lambda d: None, words=["no sentences"])
    logged = "Traceback (most recent call last):\n...\nallennlp.common.checks.ConfigurationError: " \
        "bilm_corpus: the corpus 'x' contains no sentences\n"
    row = _judge(tmp_path, train, before, 1, logged)
    assert row["verdict"] == "ok (AllenNLP traceback)"
    assert row["message"].endswith("contains no sentences")


@pytest.mark.slow  # subprocesses: in `make test-all` (CI), kept out of `make test`'s time
def test_a_few_cases_against_the_command_line():
    result = subprocess.run(
        [sys.executable, str(_PATH), "--only", "elmo-vocab: output = input",
         "elmo: UTF-16 without BOM"],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, result.stdout + result.stderr[-3000:]
    table = result.stdout
    # Rows are numbered in the script's order, not in --only's.
    assert "| output = input | `elmo-vocab corpus.txt corpus.txt --no-progress` | 1 |" in table
    assert "NUL byte" in table
    assert "2 cases, 0 failed." in table
