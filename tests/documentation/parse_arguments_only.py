"""
``python -m tests.documentation.parse_arguments_only SCRIPT ARGS...``: runs SCRIPT as ``python
SCRIPT ARGS...`` would until its `argparse` parser has parsed ARGS, then stops with exit status 0
(an argument the script does not take fails as it would). The documentation tests' stand-in for a
benchmark command: the command line is checked against the script as it is, without the minutes
to hours of measuring. A script that parses no arguments fails here, since it would have run whole.
"""
import argparse
import os
import runpy
import sys


class _Parsed(Exception):
    pass


def main() -> None:
    script, *arguments = sys.argv[1:]
    parse_args = argparse.ArgumentParser.parse_args

    def parse_then_stop(parser, *args, **kwargs):
        parse_args(parser, *args, **kwargs)
        raise _Parsed()

    argparse.ArgumentParser.parse_args = parse_then_stop
    sys.argv = [script, *arguments]
    # As `python SCRIPT` does: the script's folder first on the path (for its sibling modules).
    sys.path[0] = os.path.dirname(os.path.abspath(script))
    try:
        runpy.run_path(script, run_name="__main__")
    except _Parsed:
        print(f"stand-in: {script} parsed {' '.join(arguments)}", file=sys.stderr)
        return
    sys.exit(f"{script} parsed no arguments with argparse: it ran whole")


if __name__ == "__main__":
    main()
