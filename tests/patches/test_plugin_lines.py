"""
AllenNLP's "Plugin ... available" lines only with ELMO_PLUGIN_VERBOSE=1 (issue 37):
elmo_plugin/patches/plugin_lines.py (the plugin's filter, for its own line and later ones) and the
``.pth`` file of scripts/quiet_environment.py (the same filter from the interpreter's start, for
``allennlp_models``' line, which AllenNLP logs before any plugin is imported).
"""
import logging
import os
import subprocess
import sys

import pytest

from elmo_plugin.patches import plugin_lines
from tests.helpers import REPO_ROOT

sys.path.insert(0, str(REPO_ROOT / "scripts"))
import quiet_environment  # noqa: E402

VERBOSE_ENVIRONMENTS = [
    ({}, False),
    ({"ELMO_PLUGIN_VERBOSE": "1"}, True),
    ({"ELMO_PLUGIN_VERBOSE": "yes"}, True),
    ({"ELMO_PLUGIN_VERBOSE": "0"}, False),
    ({"ELMO_PLUGIN_VERBOSE": "false"}, False),
    ({"ALLENNLP_DEBUG": "1"}, True),
    ({"ALLENNLP_LOG_LEVEL": "DEBUG"}, True),
    ({"ALLENNLP_LOG_LEVEL": "INFO"}, False),
]

# What AllenNLP's import_plugins logs, then a line that must always pass.
LOG_LINES = """
import logging
logging.basicConfig(format="%(levelname)s %(message)s", level=logging.INFO)
log = logging.getLogger("allennlp.common.plugins")
log.info("Plugin %s available", "allennlp_models")
log.error("Plugin %s could not be loaded: %s", "missing_plugin", "No module named 'missing_plugin'")
log.info("something else")
"""


def clean_environment(**variables: str) -> dict:
    environment = {name: value for name, value in os.environ.items()
                   if name not in ("ELMO_PLUGIN_VERBOSE", "ALLENNLP_DEBUG", "ALLENNLP_LOG_LEVEL")}
    return {**environment, **variables}


@pytest.fixture
def plugins_log(monkeypatch):
    """The records that AllenNLP's plugins logger lets through, at INFO."""
    for name in ("ELMO_PLUGIN_VERBOSE", "ALLENNLP_DEBUG", "ALLENNLP_LOG_LEVEL"):
        monkeypatch.delenv(name, raising=False)
    logger = logging.getLogger(plugin_lines.PLUGINS_LOGGER)
    records = []
    handler = logging.Handler()
    handler.emit = records.append
    saved_level = logger.level
    logger.setLevel(logging.INFO)
    logger.addHandler(handler)
    yield logger, records
    logger.removeHandler(handler)
    logger.setLevel(saved_level)


@pytest.mark.parametrize("variables, expected", VERBOSE_ENVIRONMENTS)
def test_the_switch(monkeypatch, variables, expected):
    for name in ("ELMO_PLUGIN_VERBOSE", "ALLENNLP_DEBUG", "ALLENNLP_LOG_LEVEL"):
        monkeypatch.delenv(name, raising=False)
    for name, value in variables.items():
        monkeypatch.setenv(name, value)
    assert plugin_lines.verbose() is expected


def test_importing_the_plugin_hides_its_available_line_and_nothing_else(plugins_log, monkeypatch):
    import elmo_plugin  # noqa: F401  (installs the filter)

    logger, records = plugins_log
    assert plugin_lines.show_plugin_line in logger.filters
    logger.info("Plugin %s available", "elmo_plugin")
    logger.error("Plugin %s could not be loaded: %s", "missing", "No module named 'missing'")
    logger.info("Plugin %s is something else", "elmo_plugin")
    assert [record.getMessage() for record in records] == [
        "Plugin missing could not be loaded: No module named 'missing'",
        "Plugin elmo_plugin is something else",
    ]
    records.clear()
    monkeypatch.setenv("ELMO_PLUGIN_VERBOSE", "1")  # read when the line is logged
    logger.info("Plugin %s available", "elmo_plugin")
    assert [record.getMessage() for record in records] == ["Plugin elmo_plugin available"]


def test_install_adds_the_filter_once():
    plugin_lines.install()
    plugin_lines.install()
    filters = logging.getLogger(plugin_lines.PLUGINS_LOGGER).filters
    assert filters.count(plugin_lines.show_plugin_line) == 1


@pytest.fixture(scope="module")
def quieted_environment(tmp_path_factory):
    """A new virtual environment (no packages) that scripts/quiet_environment.py has run in."""
    environment = tmp_path_factory.mktemp("quieted") / "env"
    subprocess.run([sys._base_executable, "-m", "venv", "--without-pip", str(environment)],
                   check=True)
    python = environment / "bin" / "python"
    written = subprocess.run([str(python), str(REPO_ROOT / "scripts" / "quiet_environment.py")],
                             check=True, capture_output=True, text=True)
    assert quiet_environment.PLUGIN_LINES_PTH_NAME in written.stdout
    again = subprocess.run([str(python), str(REPO_ROOT / "scripts" / "quiet_environment.py")],
                           check=True, capture_output=True, text=True)
    assert again.stdout == ""  # nothing to do the second time
    return python


@pytest.mark.parametrize("variables, verbose", VERBOSE_ENVIRONMENTS)
def test_the_environment_filter_hides_the_line_from_the_interpreter_start(
    quieted_environment, variables, verbose
):
    # site.py runs the .pth file at start-up: the filter is there before any AllenNLP import.
    result = subprocess.run([str(quieted_environment), "-c", LOG_LINES], check=True,
                            capture_output=True, text=True, env=clean_environment(**variables))
    expected = (["INFO Plugin allennlp_models available"] if verbose else []) + [
        "ERROR Plugin missing_plugin could not be loaded: No module named 'missing_plugin'",
        "INFO something else",
    ]
    assert result.stderr.splitlines() == expected


def test_allennlp_help_prints_no_plugin_lines(tmp_path):
    # `allennlp elmo --help` through AllenNLP's own entry point, from the repository (its
    # .allennlp_plugins file), with the environment's .pth file in a site directory.
    (tmp_path / quiet_environment.PLUGIN_LINES_PTH_NAME).write_text(
        quiet_environment.PLUGIN_LINES_PTH_LINE, encoding="utf-8"
    )
    command = (f"import site, sys; site.addsitedir({str(tmp_path)!r}); "
               "sys.argv = ['allennlp', 'elmo', '--help']; "
               "from allennlp.__main__ import run; run()")
    result = subprocess.run([sys.executable, "-c", command], cwd=REPO_ROOT, capture_output=True,
                            text=True, env=clean_environment(PYTHONPATH=str(REPO_ROOT)),
                            timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "allennlp elmo" in result.stdout
    assert "Plugin" not in result.stderr
    assert result.stderr.strip() == ""


@pytest.mark.slow
def test_allennlp_help_prints_the_plugin_lines_when_asked(tmp_path):
    (tmp_path / quiet_environment.PLUGIN_LINES_PTH_NAME).write_text(
        quiet_environment.PLUGIN_LINES_PTH_LINE, encoding="utf-8"
    )
    command = (f"import site, sys; site.addsitedir({str(tmp_path)!r}); "
               "sys.argv = ['allennlp', 'elmo', '--help']; "
               "from allennlp.__main__ import run; run()")
    result = subprocess.run(
        [sys.executable, "-c", command], cwd=REPO_ROOT, capture_output=True, text=True,
        env=clean_environment(PYTHONPATH=str(REPO_ROOT), ELMO_PLUGIN_VERBOSE="1"), timeout=300,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    lines = [line.split(" - ")[-1] for line in result.stderr.splitlines()]
    assert lines == ["Plugin allennlp_models available", "Plugin elmo_plugin available",
                     "Plugin elmo_plugin.tasks available"]

