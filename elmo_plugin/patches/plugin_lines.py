"""
AllenNLP's "Plugin ... available" lines only when asked for (`verbose`); a plugin that cannot be
loaded is still reported. ``allennlp_models``' line, logged before any plugin is imported, gets
the same filter from ``scripts/quiet_environment.py``'s ``.pth`` file.
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
