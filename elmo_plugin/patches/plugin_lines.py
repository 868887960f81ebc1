"""
AllenNLP's "Plugin ... available" lines only when asked for.

Every ``allennlp`` command, ``--help`` included, imports its plugins first and logs one INFO line
for each (``allennlp.common.plugins``: ``Plugin allennlp_models available``, ``Plugin elmo_plugin
available``) before anything the command itself prints. They say nothing a user acts on, so they
are dropped unless the console is asked to show everything (`verbose`: ``ELMO_PLUGIN_VERBOSE=1``,
the switch of the training console too, or AllenNLP's ``ALLENNLP_DEBUG=1`` /
``ALLENNLP_LOG_LEVEL=DEBUG``), read when a line is logged. A plugin that cannot be loaded is
still reported (an ERROR, with another message).

The filter sits on that one logger and matches that one message. Installed when the plugin is
imported, it hides the plugin's own line and those of plugins imported after it; the line of
``allennlp_models``, which AllenNLP imports before any plugin, needs the filter in place when the
interpreter starts: ``scripts/quiet_environment.py`` (run by ``make venv``) writes the same
filter as a ``.pth`` file into the environment.
"""
import logging

from elmo_plugin.training.console import VERBOSE_VARIABLE, verbose  # noqa: F401

PLUGINS_LOGGER = "allennlp.common.plugins"
# The message AllenNLP's `import_plugins` logs (with the module name as its argument).
AVAILABLE_MESSAGE = "Plugin %s available"


def show_plugin_line(record: logging.LogRecord) -> bool:
    """A logging filter: False for a "Plugin ... available" record unless `verbose`."""
    return record.msg != AVAILABLE_MESSAGE or verbose()


def install() -> None:
    """Puts `show_plugin_line` on AllenNLP's plugins logger (once)."""
    logger = logging.getLogger(PLUGINS_LOGGER)
    if show_plugin_line not in logger.filters:
        logger.addFilter(show_plugin_line)
