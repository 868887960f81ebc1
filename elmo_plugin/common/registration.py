"""
Replacing an AllenNLP registration without AllenNLP's INFO line about it, which ``register(name,
exist_ok=True)`` logs before the output of every ``allennlp`` command.
"""
import logging
from typing import Callable, Optional, Type, TypeVar

from allennlp.common.registrable import Registrable

logger = logging.getLogger(__name__)

_REGISTRABLE_LOGGER = logging.getLogger("allennlp.common.registrable")

T = TypeVar("T", bound=Type)


def replace_registration(
    base: Type[Registrable], name: str, constructor: Optional[str] = None
) -> Callable[[T], T]:
    """
    A class decorator like ``base.register(name, constructor, exist_ok=True)`` that logs the
    replacement of an existing registration at DEBUG level instead of AllenNLP's INFO.
    """

    def drop_replacement_notice(record: logging.LogRecord) -> bool:
        message = record.getMessage()
        replaced = message.startswith(f"{name} has already been registered")
        return not (replaced and "exist_ok=True, so overwriting" in message)

    def decorate(subclass: T) -> T:
        previous = Registrable._registry[base].get(name)  # (class, constructor) or None
        _REGISTRABLE_LOGGER.addFilter(drop_replacement_notice)
        try:
            registered = base.register(name, constructor=constructor, exist_ok=True)(subclass)
        finally:
            _REGISTRABLE_LOGGER.removeFilter(drop_replacement_notice)
        if previous is not None and previous[0] is not subclass:
            logger.debug("%s %r: %s.%s replaces %s.%s", base.__name__, name, subclass.__module__,
                         subclass.__name__, previous[0].__module__, previous[0].__name__)
        return registered

    return decorate
