"""
The models trained with plain AllenNLP (`allennlp_reference_models.py`), made once per test
session: training all six takes one subprocess of about 15 seconds.
"""
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any, Dict

import pytest

from tests.helpers import FIXTURE_OPTIONS, FIXTURE_WEIGHTS

HERE = Path(__file__).resolve().parent


def plain_allennlp_environment() -> Dict[str, str]:
    """The environment without PYTHONPATH (which may point at this repository) and with one
    intra-op thread, for a subprocess that must not see elmo_plugin."""
    env = {key: value for key, value in os.environ.items() if key != "PYTHONPATH"}
    env.update(OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")
    return env


@pytest.fixture(scope="session")
def allennlp_reference(tmp_path_factory) -> Dict[str, Any]:
    """
    ``reference.json`` of `allennlp_reference_models.py`, plus ``"directory"``: where its
    archives and data files are. The subprocess runs in an empty directory (no
    ``.allennlp_plugins`` to discover) without this repository on its path, and itself checks
    that elmo_plugin was never imported and that the ELMo registrations are AllenNLP's.
    """
    root = tmp_path_factory.mktemp("allennlp_reference")
    output = root / "models"
    result = subprocess.run(
        [sys.executable, str(HERE / "allennlp_reference_models.py"),
         str(FIXTURE_OPTIONS), str(FIXTURE_WEIGHTS), str(output)],
        cwd=root,
        env=plain_allennlp_environment(),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr[-4000:]
    with open(output / "reference.json", encoding="utf-8") as handle:
        reference = json.load(handle)
    reference["directory"] = output
    return reference
