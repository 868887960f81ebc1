"""
The finder behind ``allennlp.commands.elmo``: the ``.pth`` line checks the name and calls
`find_spec` here, so that the line stays one expression that never changes.
"""
import importlib.abc
import importlib.util
import os
import sys
from importlib.machinery import ModuleSpec
from typing import Optional, Sequence

# The module AllenNLP 0.9 had and 1.0 removed.
MODULE_NAME = "allennlp.commands.elmo"

# What the module is loaded from: this package's file, executed under MODULE_NAME.
SHIM_FILE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "allennlp_commands_elmo.py")


def find_spec(name: str) -> Optional[ModuleSpec]:
    """The spec of ``allennlp.commands.elmo`` (from `SHIM_FILE`); None for any other name."""
    if name != MODULE_NAME:
        return None
    return importlib.util.spec_from_file_location(name, SHIM_FILE)


class AllennlpCommandsElmoFinder(importlib.abc.MetaPathFinder):
    """`find_spec` as a meta-path finder, for interpreters that did not run the ``.pth`` file
    (``python -S``): `install` appends it."""

    @classmethod
    def find_spec(
        cls, fullname: str, path: Optional[Sequence[str]] = None, target: object = None
    ) -> Optional[ModuleSpec]:
        return find_spec(fullname)


def install() -> None:
    """Makes ``allennlp.commands.elmo`` importable in this interpreter (once), after every finder
    already there, so that a real ``allennlp/commands/elmo.py`` would still win."""
    installed = ("AllennlpCommandsElmoFinder", "ElmoPluginAllennlpCommandsElmo")  # ours, the .pth's
    if not any(getattr(entry, "__name__", "") in installed for entry in sys.meta_path):
        sys.meta_path.append(AllennlpCommandsElmoFinder)
