"""
What the plugin's ``allennlp`` subcommands share: their strict parsers, argument types, and how
they report a problem: one line ``allennlp NAME: error: ...`` on stderr and an exit status.
"""
import argparse
import contextlib
import difflib
import sys
from typing import Callable, Iterator, List, NoReturn, Optional, Sequence, Tuple, Type, TypeVar, Union

import torch
from allennlp.common import logging as common_logging
from allennlp.common.checks import ConfigurationError
from allennlp.common.util import SigTermReceived

from elmo_plugin.common.termination import watch_interruptions

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


class _StrictSubcommandParser(argparse.ArgumentParser):
    """The parser of one of the plugin's subcommands (see `subcommand_parser`)."""

    def parse_known_args(self, args: Optional[Sequence[str]] = None, namespace=None):
        # A mistyped long option first: it is the mistake, whatever else then seems missing.
        for arg in args if args is not None else sys.argv[1:]:
            if arg == "--":
                break
            if arg.startswith("--") and arg.split("=", 1)[0] not in self._option_string_actions:
                self.error(self._unrecognized([arg]))
        namespace, extras = super().parse_known_args(args, namespace)
        if extras:
            self.error(self._unrecognized(extras))
        return namespace, extras

    def _unrecognized(self, extras: List[str]) -> str:
        """``unrecognized arguments: ...``, with "did you mean --x?" for each mistyped option."""
        guesses = []
        for extra in (extra for extra in extras if extra.startswith("-")):
            close = difflib.get_close_matches(extra.split("=", 1)[0], list(self._option_string_actions), n=1)
            if close and close[0] not in guesses:
                guesses.append(close[0])
        message = f"unrecognized arguments: {' '.join(extras)}"
        return message + (f" (did you mean {' or '.join(guesses)}?)" if guesses else "")


def subcommand_parser(
    parser: argparse._SubParsersAction,
    name: str,
    description: str,
    help: str,  # noqa: A002 (argparse's name)
    formatter_class: Type[argparse.HelpFormatter] = argparse.RawDescriptionHelpFormatter,
) -> argparse.ArgumentParser:
    """
    The parser of the plugin subcommand ``name``, strict: it reports what it does not know itself
    ("did you mean --model?" rather than the top-level usage, to which argparse hands unknown
    arguments back) and takes long options only as spelled out (``--al`` is not ``--all``).
    `usage_line` gives its usage line.
    """
    subparser = parser.add_parser(name, description=description, help=help, formatter_class=formatter_class)
    subparser.__class__ = type("StrictSubcommandParser", (_StrictSubcommandParser, type(subparser)), {})
    subparser.allow_abbrev = False
    # The parser itself, so that the usage line shows every argument added after this.
    subparser.set_defaults(subcommand_parser=subparser)
    return subparser


def usage_line(args: argparse.Namespace) -> str:
    """The usage line of the subcommand that parsed ``args`` ("" for a namespace built by hand)."""
    parser = getattr(args, "subcommand_parser", None)
    return parser.format_usage() if parser is not None else ""


def add_file_friendly_logging(subparser: argparse.ArgumentParser) -> None:
    """``--file-friendly-logging``, which `use_file_friendly_logging` applies."""
    subparser.add_argument(
        "--file-friendly-logging", action="store_true",
        help="print the progress bar on separate lines, less often (for log files)",
    )


def use_file_friendly_logging(args: argparse.Namespace) -> None:
    if args.file_friendly_logging:
        common_logging.FILE_FRIENDLY_LOGGING = True


@contextlib.contextmanager
def gpu_memory_as_error(batch_size: int, before: str = "", after: str = "") -> Iterator[None]:
    """Turns running out of GPU memory into a `ConfigurationError` that suggests a smaller batch."""
    try:
        yield
    except torch.cuda.OutOfMemoryError:
        raise ConfigurationError(
            f"{before}the GPU ran out of memory with --batch-size {batch_size}; try a smaller batch size{after}"
        ) from None


def exit_with_error(command: str, message: str, status: int = EXIT_ERROR, usage: str = "") -> NoReturn:
    """Writes ``[usage]allennlp COMMAND: error: MESSAGE`` to stderr and exits with ``status``."""
    sys.stderr.write(f"{usage}allennlp {command}: error: {message}\n")
    sys.exit(status)


def run_reporting_errors(
    command: str,
    work: Callable[[], T],
    interrupted: Union[str, Callable[[], str]],
    errors: Tuple[Type[BaseException], ...] = (ConfigurationError,),
    usage_errors: Tuple[Type[BaseException], ...] = (),
    usage: str = "",
) -> T:
    """
    Runs ``work()`` and returns its result. ``errors`` (bad input) end the command with one line
    and status 1; ``usage_errors`` with the ``usage`` line, that line and status 2; Ctrl-C and
    SIGTERM with the line ``interrupted`` (or what that function returns) and status 130 or 143.
    """
    try:
        with watch_interruptions():
            return work()
    except usage_errors as error:
        exit_with_error(command, str(error), EXIT_USAGE, usage)
    except errors as error:
        exit_with_error(command, str(error))
    except (KeyboardInterrupt, SigTermReceived) as error:
        message = interrupted if isinstance(interrupted, str) else interrupted()
        exit_with_error(command, message, EXIT_INTERRUPTED if isinstance(error, KeyboardInterrupt) else EXIT_TERMINATED)
