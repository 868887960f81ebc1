"""
A new user's first hour (issue 27), as typed:

- the quick-start block of the README (marked ``<!-- quickstart -->``) runs in a fresh shell
  right after the set-up, offline, and prints nothing from the environment;
- ``import elmo_plugin`` prints nothing, and the quick start's ``allennlp elmo`` nothing from
  the environment (torchvision's warnings, nltk's download attempts, ``pkg_resources is
  deprecated``, the plugin's "already registered ... overwriting" notices);
- the "own environment" block (``<!-- own-environment -->``, docs/getting_started.md) installs
  the plugin's wheel into a fresh Python 3.11 virtual environment, and ``allennlp elmo`` runs
  from another directory through a plugins file, with the vectors of this checkout (slow: CI runs it, ``make test-all``).

The blocks are read from README.md and docs/, so an edit that breaks them fails here.
"""
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import List

import h5py
import numpy as np
import pytest

from elmo_plugin.elmo_embedder import ElmoEmbedder
from tests.helpers import FIXTURE_OPTIONS, FIXTURE_WEIGHTS, REPO_ROOT

VENV = Path(sys.prefix)  # the virtual environment running the tests (.venv under make test)
ALLENNLP = Path(sys.executable).parent / "allennlp"

# What may appear on stderr: AllenNLP's INFO lines about plugins, the plugin's own INFO lines,
# and the progress bar. Anything else (a warning, nltk's download errors, a traceback) fails.
ALLOWED_STDERR = re.compile(
    r"^(\d{4}-\d\d-\d\d [\d:,]+ - INFO - (allennlp\.common\.plugins|elmo_plugin[\w.]*) - .*"
    r"|elmo: .*|)$"
)


def block(marker: str) -> str:
    """The fenced block after ``<!-- marker -->`` in README.md or a page of docs/."""
    for page in [REPO_ROOT / "README.md", *sorted((REPO_ROOT / "docs").rglob("*.md"))]:
        text = page.read_text(encoding="utf-8")
        match = re.search(rf"<!-- {marker} -->\s*\n```(?:bash)?\n(.*?)\n```", text, flags=re.S)
        if match is not None:
            return match.group(1)
    raise AssertionError(f"no block marked <!-- {marker} --> in README.md or docs/")


def fresh_shell_environment(home: Path) -> dict:
    """
    A new login shell of the same user: no venv active, and a HOME of its own (so that
    ``~/.allennlp`` and ``~/elmo-env`` start empty), with the user's pip configuration (which
    says where pip finds packages: on the project's machines a local CPU wheel of torch).
    """
    home.mkdir(parents=True, exist_ok=True)
    for config in (".config/pip", ".pip"):
        if (Path.home() / config).is_dir():
            shutil.copytree(Path.home() / config, home / config)
    return {
        **{name: value for name, value in os.environ.items() if name.startswith("PIP_")},
        "HOME": str(home),
        "PATH": f"{Path(sys._base_executable).parent}:/usr/local/bin:/usr/bin:/bin",
        "LANG": "C.UTF-8",
        # Only so that this checkout is the plugin that runs (the venv may hold an editable
        # install of another one); a user's shell needs nothing of the kind.
        "PYTHONPATH": str(REPO_ROOT),
    }


def unexpected_lines(stderr: str) -> List[str]:
    lines = re.split(r"[\r\n]+", stderr)
    return [line for line in lines if not ALLOWED_STDERR.match(line.strip())]


def test_the_quickstart_block_runs_as_typed_in_a_fresh_shell(tmp_path):
    # A working copy of what the block uses: the set-up's .venv, the test fixtures, the plugins
    # file (the block writes its files into the current directory, so not the checkout itself).
    work = tmp_path / "checkout"
    work.mkdir()
    (work / ".venv").symlink_to(VENV)
    (work / "tests").symlink_to(REPO_ROOT / "tests")
    shutil.copy(REPO_ROOT / ".allennlp_plugins", work / ".allennlp_plugins")
    result = subprocess.run(
        ["bash", "-e", "-c", block("quickstart")],
        cwd=work,
        env=fresh_shell_environment(tmp_path / "home"),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.splitlines()[-2:] == [
        "Wrote ELMo embeddings (all) of sentences.txt to embeddings.hdf5",
        "(3, 7, 32) (3, 9, 32)",
    ]
    assert unexpected_lines(result.stderr) == []


def test_importing_the_plugin_prints_nothing(tmp_path):
    result = subprocess.run(
        [sys.executable, "-c", "import elmo_plugin"],
        cwd=tmp_path,
        env=dict(os.environ, PYTHONPATH=str(REPO_ROOT)),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert (result.stdout, result.stderr) == ("", "")


@pytest.mark.slow
def test_the_own_environment_block_installs_the_wheel_into_a_fresh_environment(tmp_path):
    # A clean copy of the repository's files (the block builds the wheel in it).
    clone = tmp_path / "clone"
    shutil.copytree(
        REPO_ROOT,
        clone,
        ignore=shutil.ignore_patterns(".venv", "build", "dist", ".git", "*.egg-info", "__pycache__",
                                      "demo_output", "runs"),
    )
    environment = fresh_shell_environment(tmp_path / "home")
    del environment["PYTHONPATH"]  # the installed wheel, not this checkout
    install = subprocess.run(
        ["bash", "-e", "-c", block("own-environment")],
        cwd=clone,
        env=environment,
        capture_output=True,
        text=True,
        timeout=1200,
    )
    assert install.returncode == 0, install.stdout[-2000:] + install.stderr[-3000:]
    env_bin = tmp_path / "home" / "elmo-env" / "bin"

    # From another directory, through the plugins file the block wrote (~/.allennlp/plugins).
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "sentences.txt").write_text(
        "The cat sat on the mat .\nI went to the bank to deposit money .\n", encoding="utf-8"
    )
    run = subprocess.run(
        [str(env_bin / "allennlp"), "elmo", "sentences.txt", "out.hdf5", "--all",
         "--options-file", str(FIXTURE_OPTIONS), "--weight-file", str(FIXTURE_WEIGHTS)],
        cwd=elsewhere,
        env=environment,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    assert unexpected_lines(run.stderr) == []
    where = subprocess.run(
        [str(env_bin / "python"), "-c", "import elmo_plugin; print(elmo_plugin.__file__)"],
        cwd=elsewhere, env=environment, capture_output=True, text=True, timeout=300,
    )
    assert where.stderr == ""
    assert where.stdout.strip().startswith(str(tmp_path / "home" / "elmo-env" / "lib"))

    # The same vectors as this checkout's embedder.
    embedder = ElmoEmbedder(options_file=str(FIXTURE_OPTIONS), weight_file=str(FIXTURE_WEIGHTS))
    with h5py.File(elsewhere / "out.hdf5", "r") as written:
        for key, sentence in (("0", "The cat sat on the mat ."),
                              ("1", "I went to the bank to deposit money .")):
            expected = embedder.embed_sentence(sentence.split())
            np.testing.assert_allclose(written[key][()], expected, atol=1e-6)
