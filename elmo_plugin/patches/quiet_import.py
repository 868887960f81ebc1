"""
Imports AllenNLP for ``import elmo_plugin`` without the two torchvision warnings of the tested
environment, ignored for this import only (the ``allennlp`` command imports torchvision before
any plugin code: there scripts/quiet_environment.py takes care of it).
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
