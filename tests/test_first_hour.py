"""
A new user's first hour (issue 27), as typed:

- the quick-start block of the README (marked ``<!-- quickstart -->``) runs in a fresh shell
  right after the set-up, offline, and prints nothing from the environment;
- ``import elmo_plugin`` prints nothing, and the quick start's ``allennlp elmo`` nothing from
  the environment (torchvision's warnings, nltk's download attempts, ``pkg_resources is
  deprecated``, the plugin's "already registered ... overwriting" notices);
- the "own environment" block (``<!-- own-environment -->``, docs/getting_started.md) installs
  the plugin's wheel into a fresh Python 3.11 virtual environment, and ``allennlp elmo`` runs
  from another directory without any plugins file (the wheel's start-up hook), with files named
  like AllenNLP's subpackages there changing nothing, with the vectors of this checkout (slow:
  CI runs it, ``make test-all``); ``from allennlp.commands.elmo import ElmoEmbedder`` works there
  through the wheel's ``.pth`` file (issue 38), and after ``pip uninstall elmo_plugin`` fails as
  it did before the plugin, both ``.pth`` files gone;
- what the docs' examples write at the top of a checkout stays out of ``git status``.

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

# What may appear on stderr: the plugin's own INFO lines and the progress bar. Anything else (a
# warning, nltk's download errors, a traceback, AllenNLP's "Plugin ... available" lines) fails.
ALLOWED_STDERR = re.compile(
    r"^(\d{4}-\d\d-\d\d [\d:,]+ - INFO - elmo_plugin[\w.]* - .*|elmo: .*|)$"
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


def git_status(work: Path) -> str:
    """`git status` of a directory, untracked files listed one by one."""
    return subprocess.run(["git", "status", "--porcelain", "--untracked-files=all"], cwd=work,
                          check=True, capture_output=True, text=True).stdout


def unexpected_lines(stderr: str) -> List[str]:
    lines = re.split(r"[\r\n]+", stderr)
    return [line for line in lines if not ALLOWED_STDERR.match(line.strip())]


def test_the_quickstart_block_runs_as_typed_in_a_fresh_shell(tmp_path):
    # A working copy of what the block uses (the set-up's .venv, the test fixtures, the plugins
    # file, .gitignore), as a git repository: the block must leave `git status` as it was.
    work = tmp_path / "checkout"
    work.mkdir()
    (work / ".venv").symlink_to(VENV)
    (work / "tests").symlink_to(REPO_ROOT / "tests")
    for name in (".allennlp_plugins", ".gitignore"):
        shutil.copy(REPO_ROOT / name, work / name)
    subprocess.run(["git", "init", "--quiet"], cwd=work, check=True)
    status_before = git_status(work)
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
        "Wrote ELMo embeddings (all) of build/quickstart/sentences.txt to "
        "build/quickstart/embeddings.hdf5",
        "(3, 7, 32) (3, 9, 32)",
    ]
    assert unexpected_lines(result.stderr) == []
    assert (work / "build" / "quickstart" / "embeddings.hdf5").is_file()
    assert git_status(work) == status_before


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

    # From another directory, without a plugins file (~/.allennlp holds none), beside files named
    # like AllenNLP's and the plugin's subpackages.
    assert not (tmp_path / "home" / ".allennlp" / "plugins").exists()
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    for name in ("data", "models", "training", "legacy", "modules", "commands"):
        (elsewhere / f"{name}.py").write_text(f"raise SystemExit('{name}.py was imported')\n")
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

    # `from allennlp.commands.elmo import ElmoEmbedder` (issue 38) in a fresh interpreter of the
    # new environment: through the wheel's .pth file, which imports nothing at start-up.
    site_packages = Path(where.stdout.strip()).parents[1]
    pth = site_packages / "elmo_plugin_allennlp_commands_elmo.pth"
    startup_pth = site_packages / "elmo_plugin_startup_hook.pth"
    assert pth.is_file() and startup_pth.is_file()
    legacy_script = (
        "import sys\n"
        "heavy = {m.split('.')[0] for m in sys.modules} & {'torch', 'allennlp', 'elmo_plugin'}\n"
        "from allennlp.commands.elmo import ElmoEmbedder, DEFAULT_BATCH_SIZE; import numpy\n"
        f"embedder = ElmoEmbedder({str(FIXTURE_OPTIONS)!r}, {str(FIXTURE_WEIGHTS)!r})\n"
        "vectors = embedder.embed_sentence(['a', 'b'])\n"
        "numpy.save('legacy.npy', vectors); print(sorted(heavy), DEFAULT_BATCH_SIZE)\n"
    )
    legacy = subprocess.run(
        [str(env_bin / "python"), "-c", legacy_script],
        cwd=elsewhere, env=environment, capture_output=True, text=True, timeout=300,
    )
    assert legacy.returncode == 0, legacy.stderr[-3000:]
    assert legacy.stdout.split() == ["[]", "64"]
    expected = embedder.embed_sentence(["a", "b"])
    np.testing.assert_allclose(np.load(elsewhere / "legacy.npy"), expected, atol=1e-6)

    # Uninstalling the plugin removes the .pth: the module is gone again, the failure is the plain
    # one, and interpreter start-up says nothing.
    uninstall = subprocess.run(
        [str(env_bin / "pip"), "uninstall", "-y", "elmo_plugin"],
        cwd=elsewhere, env=environment, capture_output=True, text=True, timeout=300,
    )
    assert uninstall.returncode == 0, uninstall.stderr[-3000:]
    assert not pth.exists() and not startup_pth.exists()
    assert not (site_packages / "elmo_plugin").exists()
    gone = subprocess.run(
        [str(env_bin / "python"), "-c", "import allennlp.commands.elmo"],
        cwd=elsewhere, env=environment, capture_output=True, text=True, timeout=300,
    )
    assert gone.returncode == 1
    assert gone.stderr.strip().splitlines()[-1] == (
        "ModuleNotFoundError: No module named 'allennlp.commands.elmo'"
    )
    quiet = subprocess.run(
        [str(env_bin / "python"), "-c", "pass"],
        cwd=elsewhere, env=environment, capture_output=True, text=True, timeout=300,
    )
    assert (quiet.returncode, quiet.stdout, quiet.stderr) == (0, "", "")


def test_what_the_docs_examples_write_stays_out_of_git_status(tmp_path):
    # The folders and files the pages' commands write at the top of a checkout.
    written = ["runs/small/model.tar.gz", "corpus/train/part-000.txt", "onnx_out/elmo.onnx",
               "vocab.txt", "demo_output/run/bilm/weights.hdf5", "build/quickstart/embeddings.hdf5"]
    work = tmp_path / "checkout"
    work.mkdir()
    shutil.copy(REPO_ROOT / ".gitignore", work / ".gitignore")
    subprocess.run(["git", "init", "--quiet"], cwd=work, check=True)
    for name in written:
        (work / name).parent.mkdir(parents=True, exist_ok=True)
        (work / name).write_text("", encoding="utf-8")
    assert git_status(work) == "?? .gitignore\n"
    # Only at the top: the package's own files of those names are not ignored.
    (work / "elmo_plugin").mkdir()
    (work / "elmo_plugin" / "vocab.txt").write_text("", encoding="utf-8")
    assert "?? elmo_plugin/vocab.txt\n" in git_status(work)
