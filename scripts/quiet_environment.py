"""
Removes the console noise that AllenNLP 2.10.1 and its dependencies make in a Python 3.11, 3.12
or 3.13 environment with the tested set (requirements/constraints.txt), so that
`import elmo_plugin` and every `allennlp` command print only their own output. Run it with the environment's own Python:

    .venv/bin/python scripts/quiet_environment.py          # `make venv` does this
    ~/my-env/bin/python scripts/quiet_environment.py       # your own environment (docs/getting_started.md)

It changes that environment only (the plugin's import does none of this, but for the filter of
3 on lines logged after it), and only where the cause is there, so it is a no-op in an
environment without it:

1. nltk downloads on every command. AllenNLP imports its default plugin allennlp_models with all
   its submodules before any command runs; allennlp_models/rc/tools/narrativeqa.py calls
   ``nltk.download("punkt")`` and ``("wordnet")`` whenever ``nltk.data.find("tokenizers/punkt")``
   fails: a network attempt (and 8 lines of errors offline) on every command. ELMo never uses
   NarrativeQA's metrics, so the environment gets an ``nltk_data/tokenizers/punkt`` directory
   (holding only a README that says why), which is what that check looks for. Whoever needs
   NarrativeQA's metrics installs the real data with ``nltk.download`` (it replaces the folder).

2. torchvision's warnings on every import of AllenNLP. ``allennlp.data`` imports torchvision
   unconditionally (for its image loader), so torchvision must be importable. No CPU build of
   torchvision for torch 2.13 can be installed from PyPI: the PyPI wheels are CUDA builds, and
   0.28 (torch 2.13's own) fails to import beside a CPU torch. The tested set therefore pins
   torchvision 0.15.2, which imports with its native parts unloaded (AllenNLP's text models never
   use them) and says so on every import ("Failed to load image Python extension", and twice
   "still Beta", the latter because transformers imports torchvision.transforms.v2). Only where
   that torchvision is installed beside a torch of another version, the environment gets a
   ``.pth`` file that ignores exactly these two messages from exactly these torchvision modules:
   a narrow filter, set when the interpreter starts, because the ``allennlp`` command imports
   torchvision before any plugin code runs. With a matching torchvision (``make TORCH=cuda``
   installs torch 2.13.0 and torchvision 0.28.0 from PyPI, both CUDA builds) nothing is written,
   and an old file is removed.

3. AllenNLP's "Plugin allennlp_models available" / "Plugin elmo_plugin available" lines, which
   every ``allennlp`` command, ``--help`` included, prints first. The plugin hides its own line
   when it is imported (elmo_plugin/patches/plugin_lines.py), but AllenNLP imports
   ``allennlp_models`` and logs its line before any plugin code runs, so the environment gets a
   ``.pth`` file that puts the same filter on that one logger when the interpreter starts: it
   drops only records with exactly that message, and only while ``ELMO_PLUGIN_VERBOSE``,
   ``ALLENNLP_DEBUG`` or ``ALLENNLP_LOG_LEVEL=DEBUG`` do not ask for everything. It costs the
   import of ``logging`` (a few milliseconds) at each start of the environment's Python.

The fourth source of noise, py-rouge's ``import pkg_resources`` ("pkg_resources is deprecated"),
is fixed by the pinned setuptools (79.0.1: the same notice as a DeprecationWarning, which Python
shows only for code run as __main__). The plugin's own replacements of AllenNLP registrations log
at debug level (elmo_plugin/common/registration.py).
"""
import os
import sys
import sysconfig
from importlib import metadata

PTH_NAME = "elmo_plugin_torchvision_warnings.pth"

# One line: site.py executes .pth lines that start with "import".
PTH_LINE = (
    "import warnings; "
    'warnings.filterwarnings("ignore", message="Failed to load image Python extension", '
    'category=UserWarning, module="torchvision.io.image"); '
    'warnings.filterwarnings("ignore", message="The torchvision.datapoints and '
    'torchvision.transforms.v2 namespaces are still Beta", category=UserWarning, '
    r'module="torchvision\.(datapoints|transforms\.v2)")'
    "\n"
)

PLUGIN_LINES_PTH_NAME = "elmo_plugin_plugin_lines.pth"

# One line (site.py executes .pth lines that start with "import"): the filter of
# elmo_plugin/patches/plugin_lines.py, written out, since importing the plugin here would import
# AllenNLP at every start of Python.
PLUGIN_LINES_PTH_LINE = (
    "import logging, os; "
    'logging.getLogger("allennlp.common.plugins").addFilter(lambda record: '
    'record.msg != "Plugin %s available" '
    'or os.environ.get("ELMO_PLUGIN_VERBOSE", "").strip().lower() not in ("", "0", "false", "no") '
    'or bool(os.environ.get("ALLENNLP_DEBUG")) '
    'or os.environ.get("ALLENNLP_LOG_LEVEL", "").upper() == "DEBUG")'
    "\n"
)

PUNKT_README = """\
Placeholder written by elmo_plugin's scripts/quiet_environment.py.

allennlp_models (imported by AllenNLP on every command) downloads nltk's punkt and wordnet when
this directory is missing, which is a network attempt on every command. ELMo does not use them.
For the real data: python -c "import nltk; nltk.download('punkt')" (it replaces this folder).
"""


def _release(version: str) -> tuple:
    """(major, minor) of a version such as "2.13.0+cpu"."""
    return tuple(int(part) for part in version.split("+")[0].split(".")[:2])


def torchvision_mismatched() -> bool:
    """Whether the installed torchvision was built for another torch than the installed one
    (torchvision 0.N goes with torch 2.(N - 15))."""
    try:
        torch_version = _release(metadata.version("torch"))
        vision_version = _release(metadata.version("torchvision"))
    except metadata.PackageNotFoundError:
        return False
    return not (torch_version[0] == 2 and vision_version == (0, torch_version[1] + 15))


def _read(path: str) -> str:
    """The text of a file, or "" where there is none."""
    if not os.path.exists(path):
        return ""
    with open(path, encoding="utf-8") as file:
        return file.read()


def main() -> None:
    nltk_punkt = os.path.join(sys.prefix, "nltk_data", "tokenizers", "punkt")
    if not os.path.exists(nltk_punkt):
        os.makedirs(nltk_punkt)
        with open(os.path.join(nltk_punkt, "README.txt"), "w", encoding="utf-8") as readme:
            readme.write(PUNKT_README)
        print(f"wrote {nltk_punkt} (no nltk download on every allennlp command)")

    site_packages = sysconfig.get_paths()["purelib"]
    plugin_lines_path = os.path.join(site_packages, PLUGIN_LINES_PTH_NAME)
    if _read(plugin_lines_path) != PLUGIN_LINES_PTH_LINE:
        with open(plugin_lines_path, "w", encoding="utf-8") as pth:
            pth.write(PLUGIN_LINES_PTH_LINE)
        print(f"wrote {plugin_lines_path} (AllenNLP's 'Plugin ... available' lines only with "
              "ELMO_PLUGIN_VERBOSE=1)")

    pth_path = os.path.join(site_packages, PTH_NAME)
    if torchvision_mismatched():
        with open(pth_path, "w", encoding="utf-8") as pth:
            pth.write(PTH_LINE)
        print(f"wrote {pth_path} (torchvision {metadata.version('torchvision')} beside torch "
              f"{metadata.version('torch')}: its two import warnings ignored)")
    elif os.path.exists(pth_path):
        os.remove(pth_path)
        print(f"removed {pth_path}: torchvision matches torch")


if __name__ == "__main__":
    main()
