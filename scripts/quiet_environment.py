"""
Removes the console noise that AllenNLP 2.10.1's dependencies make in a Python 3.11 environment
with the tested set (requirements/constraints.txt), so that `import elmo_plugin` and every
`allennlp` command print only their own output. Run it with the environment's own Python:

    .venv/bin/python scripts/quiet_environment.py          # `make venv` does this
    ~/my-env/bin/python scripts/quiet_environment.py       # your own environment (README.md, "In your own environment")

It changes that environment only (nothing in the plugin's import does any of this), and only
where the cause is there, so it is a no-op in an environment without it:

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

The third source of noise, py-rouge's ``import pkg_resources`` ("pkg_resources is deprecated"),
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


def main() -> None:
    nltk_punkt = os.path.join(sys.prefix, "nltk_data", "tokenizers", "punkt")
    if not os.path.exists(nltk_punkt):
        os.makedirs(nltk_punkt)
        with open(os.path.join(nltk_punkt, "README.txt"), "w", encoding="utf-8") as readme:
            readme.write(PUNKT_README)
        print(f"wrote {nltk_punkt} (no nltk download on every allennlp command)")

    pth_path = os.path.join(sysconfig.get_paths()["purelib"], PTH_NAME)
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
