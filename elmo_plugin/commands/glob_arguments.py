"""
The ``"GLOB" OUTPUT`` arguments of ``allennlp elmo-vocab`` and ``elmo-tokenize``: the words of a
glob the shell expanded are collected by a hidden argument, and `check_single_glob` turns them
into one usage error that says to quote the glob, instead of argparse's "unrecognized arguments".
"""
import argparse
import os
from typing import List

from elmo_plugin.commands.common import EXIT_USAGE, exit_with_error, usage_line

_EXTRA = "unquoted_glob_extra"


def add_glob_and_output_arguments(
    subparser: argparse.ArgumentParser,
    glob_name: str,
    glob_help: str,
    output_name: str,
    output_help: str,
) -> None:
    """Adds the positional ``glob_name`` and ``output_name`` and the hidden catch-all."""
    subparser.add_argument(glob_name, help=glob_help)
    subparser.add_argument(output_name, help=output_help)
    subparser.add_argument(_EXTRA, nargs="*", help=argparse.SUPPRESS)


def _suggested_glob(paths: List[str]) -> str:
    directories = {os.path.dirname(path) for path in paths}
    extensions = {os.path.splitext(path)[1] for path in paths}
    directory = directories.pop() if len(directories) == 1 else "DIRECTORY"
    extension = extensions.pop() if len(extensions) == 1 else ""
    return os.path.join(directory, "*" + extension) if directory else "*" + extension


def check_single_glob(command: str, args: argparse.Namespace, glob_name: str, output_name: str) -> None:
    """Exits with a usage error (status 2) if the shell expanded an unquoted glob into several paths."""
    extra = getattr(args, _EXTRA, None) or []
    if not extra:
        return
    words = [getattr(args, glob_name), getattr(args, output_name), *extra]
    inputs, output = words[:-1], words[-1]
    suggestion = _suggested_glob(inputs)
    exit_with_error(
        command,
        f"{len(inputs)} input paths before {output} ({', '.join(inputs[:3])}"
        f"{', ...' if len(inputs) > 3 else ''}): the shell expanded an unquoted glob. Quote it, "
        f'so that the command reads every matching file itself: allennlp {command} "{suggestion}" '
        f"{output} ...",
        EXIT_USAGE,
        usage_line(args),
    )
