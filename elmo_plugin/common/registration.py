"""
Replacing an AllenNLP registration without AllenNLP's INFO line about it: ``register(name,
exist_ok=True)`` logs each replacement before the output of every ``allennlp`` command;
`replace_registration` logs it at DEBUG level instead.
"""
import logging
from typing import Callable, Optional, Type, TypeVar

from allennlp.common.registrable import Registrable

logger = logging.getLogger(__name__)

_REGISTRABLE_LOGGER = logging.getLogger("allennlp.common.registrable")

T = TypeVar("T", bound=Type)


class _DropReplacementNotice(logging.Filter):
    """Drops AllenNLP's "already been registered" record for one name."""

    def __init__(self, name: str) -> None:
        super().__init__()
        self.registered_name = name

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        return not (
            message.startswith(f"{self.registered_name} has already been registered")
            and "exist_ok=True, so overwriting" in message
        )


def replace_registration(
    base: Type[Registrable], name: str, constructor: Optional[str] = None
) -> Callable[[T], T]:
    """
    A class decorator like ``base.register(name, constructor, exist_ok=True)`` that logs the
    replacement of an existing registration at DEBUG level instead of AllenNLP's INFO.
    """

    def decorate(subclass: T) -> T:
        previous = Registrable._registry[base].get(name)  # (class, constructor) or None
        notice_filter = _DropReplacementNotice(name)
        _REGISTRABLE_LOGGER.addFilter(notice_filter)
        try:
            registered = base.register(name, constructor=constructor, exist_ok=True)(subclass)
        finally:
            _REGISTRABLE_LOGGER.removeFilter(notice_filter)
        if previous is not None and previous[0] is not subclass:
            logger.debug("%s %r: %s.%s replaces %s.%s", base.__name__, name, subclass.__module__,
                         subclass.__name__, previous[0].__module__, previous[0].__name__)
        return registered

    return decorate
