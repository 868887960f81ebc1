"""
The package's metadata is in pyproject.toml. This file adds one thing setuptools cannot be told
there: two ``.pth`` files, placed at the top of the wheel, that is of site-packages, and listed in
the wheel's RECORD so that ``pip uninstall`` removes them:

- ``elmo_plugin_startup_hook.pth``: the plugin's ``allennlp`` commands in any folder, and no
  file of the current folder imported in place of a package's modules
  (`elmo_plugin.patches.startup_hook` says how and why);
- ``elmo_plugin_allennlp_commands_elmo.pth``: ``import allennlp.commands.elmo`` (AllenNLP 0.9's
  module) works while the plugin is installed (`elmo_plugin.legacy`).

How they get there:

- a wheel (``pip wheel .``, ``pip install .``): ``build_py`` copies them into the build tree;
- an editable install (``pip install -e .``, what ``make venv`` runs): setuptools builds the
  editable wheel from its own finder files only, so ``editable_wheel`` adds the ``.pth`` files
  (with their RECORD lines) to the wheel it built.
"""
import base64
import hashlib
import os
import zipfile
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py
from setuptools.command.editable_wheel import editable_wheel

PTH_SOURCES = [
    Path(__file__).parent / "elmo_plugin/patches/elmo_plugin_startup_hook.pth",
    Path(__file__).parent / "elmo_plugin/legacy/elmo_plugin_allennlp_commands_elmo.pth",
]


class BuildPyWithPth(build_py):
    def run(self) -> None:
        super().run()
        if not getattr(self, "editable_mode", False):
            for source in PTH_SOURCES:
                target = os.path.join(self.build_lib, source.name)
                self.copy_file(str(source), target, preserve_mode=False)


class EditableWheelWithPth(editable_wheel):
    def run(self) -> None:
        before = set(Path(self.dist_dir).glob("*.whl"))
        super().run()
        for wheel in set(Path(self.dist_dir).glob("*.whl")) - before:
            for source in PTH_SOURCES:
                add_to_wheel(wheel, source.name, source.read_bytes())


def add_to_wheel(wheel: Path, name: str, data: bytes) -> None:
    """Adds a file at the top of a built wheel, with its line in the wheel's RECORD."""
    with zipfile.ZipFile(wheel) as source:
        entries = [(info, source.read(info)) for info in source.infolist()]
    record_info, record = next(
        (info, content) for info, content in entries if info.filename.endswith(".dist-info/RECORD")
    )
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode("ascii")
    record += f"{name},sha256={digest},{len(data)}\n".encode("utf-8")
    partial = wheel.with_name(wheel.name + ".partial")
    with zipfile.ZipFile(partial, "w", zipfile.ZIP_DEFLATED) as target:
        for info, content in entries:
            if info is not record_info:
                target.writestr(info, content)
        target.writestr(name, data)
        target.writestr(record_info, record)  # RECORD stays the last entry
    os.replace(partial, wheel)


setup(cmdclass={"build_py": BuildPyWithPth, "editable_wheel": EditableWheelWithPth})
