"""
Imports AllenNLP for ``import elmo_plugin`` without the two torchvision warnings of the tested
environment, and without changing any warning filter beyond this import.

AllenNLP's ``allennlp.data`` imports torchvision (for its image loader), and transformers, which
``allennlp.modules`` imports, imports ``torchvision.transforms.v2``. The tested set pins
torchvision 0.15.2 beside torch 2.13 (no matching CPU build installs from PyPI), which warns
"Failed to load image Python extension" and twice "still Beta" on import, about parts AllenNLP's
text models never use. They are ignored inside ``warnings.catch_warnings()`` (which restores the
filters afterwards), only these two messages, only from the modules that emit them.

The ``allennlp`` command imports torchvision before any plugin code runs; there the environment
takes care of it (scripts/quiet_environment.py, run by ``make venv``).
"""
import warnings

with warnings.catch_warnings():
    warnings.filterwarnings(
        "ignore",
        message="Failed to load image Python extension",
        category=UserWarning,
        module="torchvision.io.image",
    )
    warnings.filterwarnings(
        "ignore",
        message="The torchvision.datapoints and torchvision.transforms.v2 namespaces are still Beta",
        category=UserWarning,
        module=r"torchvision\.(datapoints|transforms\.v2)",
    )
    import allennlp.data  # noqa: F401  (torchvision)
    import allennlp.models  # noqa: F401
    import allennlp.modules  # noqa: F401  (transformers -> torchvision.transforms.v2)
