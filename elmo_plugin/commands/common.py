"""
What the plugin's ``allennlp`` subcommands share: argument types, and how they report a
problem: one line ``allennlp NAME: error: ...`` on stderr and an exit status, never a traceback.
"""
import argparse
import sys
from typing import Callable, NoReturn, Tuple, Type, TypeVar

from allennlp.common.checks import ConfigurationError
from allennlp.common.util import SigTermReceived

from elmo_plugin.common.termination import watch_sigterm

T = TypeVar("T")

# Exit statuses: 1 for bad input or settings, 2 for usage errors (argparse's), and the shell's
# 128 + signal number when interrupted: 130 for Ctrl-C (SIGINT), 143 for SIGTERM.
EXIT_ERROR = 1
EXIT_USAGE = 2
EXIT_INTERRUPTED = 130
EXIT_TERMINATED = 143


def positive_int(value: str) -> int:
    """An argparse ``type`` for counts that must be at least 1 (batch sizes, minimum counts)."""
    try:
        number = int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a positive integer, got {value!r}") from None
    if number < 1:
        raise argparse.ArgumentTypeError(f"must be a positive integer, got {value}")
    return number


def exit_with_error(command: str, message: str, status: int = EXIT_ERROR, usage: str = "") -> NoReturn:
    """Writes ``[usage]allennlp COMMAND: error: MESSAGE`` to stderr and exits with ``status``."""
    sys.stderr.write(f"{usage}allennlp {command}: error: {message}\n")
    sys.exit(status)


def run_reporting_errors(
    command: str,
    work: Callable[[], T],
    interrupted: str,
    errors: Tuple[Type[BaseException], ...] = (ConfigurationError,),
    usage_errors: Tuple[Type[BaseException], ...] = (),
    usage: str = "",
) -> T:
    """
    Runs ``work()`` and returns its result. ``errors`` (bad input) end the command with one line
    and status 1; ``usage_errors`` (arguments that do not go together, found only by the work)
    with the ``usage`` line, that line and status 2, as argparse's own; Ctrl-C and SIGTERM (which the ``allennlp`` command turns into
    `SigTermReceived`) with the line ``interrupted`` and status 130 or 143. The work is expected
    to leave no partial output behind in these cases (the plugin writes every output atomically).
    """
    try:
        with watch_sigterm():
            return work()
    except usage_errors as error:
        exit_with_error(command, str(error), EXIT_USAGE, usage)
    except errors as error:
        exit_with_error(command, str(error))
    except KeyboardInterrupt:
        exit_with_error(command, interrupted, EXIT_INTERRUPTED)
    except SigTermReceived:
        exit_with_error(command, interrupted, EXIT_TERMINATED)
