"""
The start-up hook that the plugin's wheel and editable install put in site-packages
(`elmo_plugin.patches.startup_hook`): with it, the ``allennlp`` command of the environment

- has the plugin's commands in any folder, without a plugins file (as allennlp-models' commands);
- imports no file of the current folder named like a package's subpackage (``data.py``,
  ``models.py``, ``training.py``, ``legacy.py``, ``modules.py``, ``commands.py``), for any command,
  ``--help`` included;
- says what to install where the plugin cannot be imported.

The commands run as in an installed environment (`tests.helpers.installed_allennlp`: the
``.pth`` files in a site directory), from an empty folder with a HOME of its own. The pieces are
checked against AllenNLP's own functions (which modules they import, what they yield).
"""
import importlib
import logging
import os
import subprocess
import sys
import types
from pathlib import Path

import h5py
import numpy as np
import pytest
from allennlp.common import util as allennlp_util

from elmo_plugin.elmo_embedder import ElmoEmbedder
from elmo_plugin.patches import startup_hook
from tests.helpers import (
    FIXTURE_OPTIONS,
    FIXTURE_WEIGHTS,
    REPO_ROOT,
    installed_allennlp,
    installed_environment,
)

# The names of subpackages of allennlp, allennlp_models and elmo_plugin, as files of the current
# folder: each would stop the command if imported.
TRAPS = ["data", "models", "training", "legacy", "modules", "commands"]


def folder_with_traps(folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for name in TRAPS:
        (folder / f"{name}.py").write_text(
            f"raise SystemExit('{name}.py of the current folder was imported')\n", encoding="utf-8"
        )
    return folder


def run_installed(tmp_path: Path, folder: Path, *arguments: str, **variables: str):
    return subprocess.run(
        installed_allennlp(tmp_path / "env") + [str(a) for a in arguments],
        cwd=folder, env=installed_environment(tmp_path / "home", **variables),
        capture_output=True, text=True, timeout=600,
    )


# -- the command, installed ----------------------------------------------------------------------


@pytest.mark.slow  # subprocesses: in `make test-all` (CI), kept out of `make test`'s time
def test_the_commands_work_from_any_folder_and_no_file_there_is_imported(tmp_path):
    folder = folder_with_traps(tmp_path / "my data")
    assert not (folder / ".allennlp_plugins").exists()
    helped = run_installed(tmp_path, folder, "--help")
    assert helped.returncode == 0, helped.stderr[-3000:]
    for command in ("elmo", "elmo-export", "elmo-tokenize", "elmo-vocab", "train"):
        assert f"\n    {command} " in helped.stdout, command
    assert "current folder was imported" not in helped.stdout + helped.stderr

    # --include-package walks the plugin's subpackages too (legacy, commands, data, ...).
    (folder / "in.txt").write_text("The cat sat .\nA bank .\n", encoding="utf-8")
    embedded = run_installed(tmp_path, folder, "elmo", "in.txt", "out.hdf5", "--all",
                             "--options-file", FIXTURE_OPTIONS, "--weight-file", FIXTURE_WEIGHTS,
                             "--include-package", "elmo_plugin")
    assert embedded.returncode == 0, embedded.stderr[-3000:]
    assert "Traceback" not in embedded.stderr
    embedder = ElmoEmbedder(str(FIXTURE_OPTIONS), str(FIXTURE_WEIGHTS))
    with h5py.File(folder / "out.hdf5", "r") as written:
        for key, sentence in (("0", "The cat sat ."), ("1", "A bank .")):
            np.testing.assert_allclose(written[key][()], embedder.embed_sentence(sentence.split()),
                                       atol=1e-6)


def test_allennlp_train_is_the_plugins_command(tmp_path):
    # AllenNLP built the parser before it imported the plugin: the hook makes the plugin's
    # command the one that runs (one line, no traceback).
    folder = folder_with_traps(tmp_path / "elsewhere")
    result = run_installed(tmp_path, folder, "train", "nope.jsonnet", "-s", "run",
                           "--include-package", "elmo_plugin")
    assert result.returncode == 1
    assert result.stderr.strip().splitlines() == [
        "allennlp train: error: the config file nope.jsonnet does not exist"
    ]
    assert sorted(os.listdir(folder)) == sorted(f"{name}.py" for name in TRAPS)


@pytest.mark.slow
def test_a_plugin_that_cannot_be_imported_is_told_what_to_install(tmp_path):
    # A plugin whose import needs a module the environment lacks.
    broken = tmp_path / "broken"
    (broken / "elmo_plugin" / "__init__.py").parent.mkdir(parents=True)
    (broken / "elmo_plugin" / "__init__.py").write_text("import h5py_of_another_world\n")
    # The hook, and where a .pth written before it moved looks for it.
    for hook in ("patches/startup_hook.py", "common/startup_hook.py"):
        (broken / "elmo_plugin" / hook).parent.mkdir()
        (broken / "elmo_plugin" / hook).write_bytes((REPO_ROOT / "elmo_plugin" / hook).read_bytes())
    folder = tmp_path / "folder"
    folder.mkdir()
    environment = installed_environment(tmp_path / "home")
    environment["PYTHONPATH"] = str(broken)
    result = subprocess.run(installed_allennlp(tmp_path / "env") + ["elmo", "in.txt", "out.hdf5"],
                            cwd=folder, env=environment, capture_output=True, text=True,
                            timeout=600)
    assert result.returncode == 2
    errors = [line for line in result.stderr.splitlines() if " - ERROR - " in line]
    assert len(errors) == 1
    assert errors[0].endswith(
        "Plugin elmo_plugin could not be loaded: No module named 'h5py_of_another_world'; add it "
        f"to this environment ({sys.prefix}): pip install --no-deps -r "
        "requirements/constraints.txt (in the repository), then run the command again"
    )


# -- the pieces ----------------------------------------------------------------------------------


def test_the_pth_line_puts_one_finder_first_that_answers_for_three_modules_only():
    lines = [line for line in startup_hook_pth().splitlines() if line.startswith("import")]
    assert len(lines) == 1
    saved = list(sys.meta_path)
    try:
        sys.meta_path[:] = [entry for entry in saved
                            if getattr(entry, "__name__", "") != startup_hook.FINDER_NAME]
        exec(lines[0], {})
        exec(lines[0], {})  # site-packages processed twice: still one finder
        ours = [entry for entry in sys.meta_path
                if getattr(entry, "__name__", "") == startup_hook.FINDER_NAME]
        first = sys.meta_path[0]
    finally:
        sys.meta_path[:] = saved
    assert len(ours) == 1 and first is ours[0]
    assert ours[0].find_spec("json") is None
    assert ours[0].find_spec("allennlp.commands.elmo") is None
    spec = ours[0].find_spec("allennlp.common.plugins", importlib.import_module("allennlp.common").__path__)
    assert spec is not None and spec.origin.endswith(os.path.join("allennlp", "common", "plugins.py"))
    assert set(startup_hook.HOOKED_MODULES) == {
        "allennlp.common.util", "allennlp.common.plugins", "allennlp.commands.train"}


def test_a_pth_line_written_before_the_move_still_finds_the_hook():
    # Environments installed earlier keep a .pth that runs elmo_plugin/common/startup_hook.py.
    line = next(line for line in startup_hook_pth().splitlines() if line.startswith("import"))
    old_line = line.replace('"patches", "startup_hook.py"', '"common", "startup_hook.py"')
    assert old_line != line
    saved = list(sys.meta_path)
    try:
        sys.meta_path[:] = [entry for entry in saved
                            if getattr(entry, "__name__", "") != startup_hook.FINDER_NAME]
        exec(old_line, {})
        finder = sys.meta_path[0]
    finally:
        sys.meta_path[:] = saved
    spec = finder.find_spec("allennlp.common.plugins", importlib.import_module("allennlp.common").__path__)
    assert spec is not None and spec.origin.endswith(os.path.join("allennlp", "common", "plugins.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert getattr(module.discover_plugins, startup_hook.MARKER, False)  # repaired


def startup_hook_pth() -> str:
    return (REPO_ROOT / "elmo_plugin" / "patches" / "elmo_plugin_startup_hook.pth").read_text()


def make_package(root: Path, name: str) -> None:
    """A package with the subpackages ``data`` and ``models`` (each with a module) and a module."""
    for sub in ("data", "models"):
        (root / name / sub).mkdir(parents=True)
        (root / name / sub / "__init__.py").write_text("")
        (root / name / sub / "reader.py").write_text("")
    (root / name / "__init__.py").write_text("")
    (root / name / "util.py").write_text("")


def test_submodules_are_imported_as_allennlp_does_but_never_from_the_current_folder(
    tmp_path, monkeypatch
):
    make_package(tmp_path / "packages", "pkg_a")
    make_package(tmp_path / "packages", "pkg_b")
    folder = folder_with_traps(tmp_path / "folder")
    monkeypatch.syspath_prepend(str(tmp_path / "packages"))
    monkeypatch.chdir(folder)
    expected = {"pkg_a", "pkg_a.data", "pkg_a.data.reader", "pkg_a.models", "pkg_a.models.reader",
                "pkg_a.util"}
    module = types.SimpleNamespace(push_python_path=allennlp_util.push_python_path)
    module.import_module_and_submodules = startup_hook.submodule_importer(module)
    before = set(sys.modules)
    module.import_module_and_submodules("pkg_a")
    assert {name for name in set(sys.modules) - before if not name.startswith("checklist")} == expected

    # AllenNLP's own imports the same, and the current folder's data.py on the way.
    original = allennlp_util.import_module_and_submodules
    if getattr(original, startup_hook.MARKER, False):  # an environment with the hook installed
        pytest.skip("this environment's AllenNLP already has the repaired function")
    with pytest.raises(SystemExit, match="data.py of the current folder was imported"):
        original("pkg_b")
    for name in [name for name in sys.modules if name.split(".")[0] in ("pkg_a", "pkg_b")]:
        del sys.modules[name]


def test_the_plugin_is_discovered_after_the_plugins_files_once(monkeypatch):
    def files(*names):
        return lambda: iter(names)

    tasks = "elmo_plugin.tasks"  # after elmo_plugin (imported here), allennlp-models installed
    assert list(startup_hook.with_the_plugin(files())()) == ["elmo_plugin", tasks]
    assert list(startup_hook.with_the_plugin(files("my_plugin"))()) == ["my_plugin", "elmo_plugin", tasks]
    assert list(startup_hook.with_the_plugin(files("elmo_plugin", "x"))()) == ["elmo_plugin", "x", tasks]
    assert list(startup_hook.with_the_plugin(files(tasks, "elmo_plugin"))()) == [tasks, "elmo_plugin"]
    # The task line only where allennlp-models can be found, and only after the plugin imported.
    real_find_spec = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == "allennlp_models" else real_find_spec(name, *a))
    assert list(startup_hook.with_the_plugin(files())()) == ["elmo_plugin"]
    monkeypatch.undo()
    monkeypatch.delitem(sys.modules, "elmo_plugin")
    assert list(startup_hook.with_the_plugin(files())()) == ["elmo_plugin"]


def test_allennlps_line_for_a_missing_module_says_what_to_install(monkeypatch):
    monkeypatch.setattr(startup_hook.metadata, "requires",
                        lambda name: ["allennlp==2.10.1", "h5py==3.16.0", 'kiwipiepy==0.24.1; extra == "korean"'])

    def logged(message: str) -> str:
        record = logging.LogRecord("allennlp.common.plugins", logging.ERROR, __file__, 0, message,
                                   None, None)
        assert startup_hook.with_what_to_install(record)
        return record.getMessage()

    assert logged("Plugin elmo_plugin could not be loaded: No module named 'h5py'") == (
        "Plugin elmo_plugin could not be loaded: No module named 'h5py'; add it to this "
        f"environment ({sys.prefix}): pip install --no-deps h5py==3.16.0, then run the command again"
    )
    assert logged("Plugin elmo_plugin could not be loaded: No module named 'kiwipiepy'").endswith(
        "pip install --no-deps -r requirements/constraints.txt (in the repository), then run the "
        "command again")
    assert logged("Plugin other could not be loaded: No module named 'h5py'") == (
        "Plugin other could not be loaded: No module named 'h5py'")


def test_the_train_command_is_looked_up_when_it_runs():
    module = types.SimpleNamespace(train_model_from_args=lambda args: ("allennlp's", args))
    bound = startup_hook.late_bound(module, "train_model_from_args")
    module.train_model_from_args = bound
    assert bound("a") == ("allennlp's", "a")  # nothing replaced it: AllenNLP's own
    module.train_model_from_args = lambda args: ("the plugin's", args)
    assert bound("b") == ("the plugin's", "b")


def test_every_repair_is_applied_once():
    util = types.SimpleNamespace(push_python_path=None, import_module_and_submodules=lambda p: None)
    startup_hook.repair_submodule_walk(util)
    repaired = util.import_module_and_submodules
    startup_hook.repair_submodule_walk(util)
    assert util.import_module_and_submodules is repaired

    plugins = types.ModuleType("plugins_of_a_test")
    plugins.discover_plugins = lambda: iter(())
    for _ in range(2):
        startup_hook.repair_plugin_discovery(plugins)
    assert list(plugins.discover_plugins()) == ["elmo_plugin", "elmo_plugin.tasks"]  # tasks: allennlp-models here
    filters = logging.getLogger("plugins_of_a_test").filters
    assert len(filters) == 1
    logging.getLogger("plugins_of_a_test").removeFilter(filters[0])


def test_a_failing_repair_leaves_allennlps_module_as_it_was(monkeypatch):
    monkeypatch.setitem(startup_hook.REPAIRS, "allennlp.common.plugins",
                        lambda module: 1 / 0)
    spec = startup_hook.find_spec("allennlp.common.plugins",
                                  importlib.import_module("allennlp.common").__path__)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)  # no ZeroDivisionError
    assert callable(module.discover_plugins)
    assert not getattr(module.discover_plugins, startup_hook.MARKER, False)
