"""
The training console of `elmo_plugin.training.console` applied to AllenNLP's
``prepare_global_logging`` and ``Tqdm.tqdm``.
"""
from typing import Any

from elmo_plugin.training.console import progress_bar_arguments, quiet_console_handlers

MARKER = "_elmo_plugin_console"


def _quiet_tqdm(original: Any) -> Any:
    def tqdm(*args: Any, **kwargs: Any) -> Any:
        return original(*args, **progress_bar_arguments(kwargs))

    setattr(tqdm, MARKER, True)
    return staticmethod(tqdm)


def _quiet_global_logging(original: Any) -> Any:
    def prepare_global_logging(*args: Any, **kwargs: Any) -> None:
        original(*args, **kwargs)
        quiet_console_handlers()

    setattr(prepare_global_logging, MARKER, True)
    return prepare_global_logging


def install() -> None:
    """Wraps ``prepare_global_logging`` and ``Tqdm.tqdm`` (once each)."""
    from allennlp.common import logging as common_logging
    from allennlp.common.tqdm import Tqdm

    if not getattr(common_logging.prepare_global_logging, MARKER, False):
        common_logging.prepare_global_logging = _quiet_global_logging(common_logging.prepare_global_logging)
    if not getattr(Tqdm.tqdm, MARKER, False):
        Tqdm.tqdm = _quiet_tqdm(Tqdm.tqdm)
