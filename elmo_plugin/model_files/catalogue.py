"""
The published ELMo models: AllenNLP's English models by name, where they are downloaded from, and
the table that ``allennlp elmo --list-models`` prints.
"""
import os
from dataclasses import dataclass
from typing import Dict, Optional

from elmo_plugin.common.paths import PathLike
from elmo_plugin.model_files.bilm_tf.directory import OPTIONS_NAME, WEIGHTS_NAME
from elmo_plugin.model_files.download import cached_copy, default_cache_dir, is_remote

# Where the published models are; the environment variable (read at each use) replaces it.
MODELS_URL_VARIABLE = "ELMO_MODELS_URL"
DEFAULT_MODELS_URL = "https://allennlp.s3.amazonaws.com/models/elmo"

# The model used when none is named (AllenNLP 0.9's ``ElmoEmbedder()`` and ``allennlp elmo``).
DEFAULT_MODEL = "original"


@dataclass(frozen=True)
class PublishedModel:
    """
    An English ELMo model published by AllenNLP.

    # Parameters

    name : `str`
        The name to give ``--model`` / ``model=``.
    architecture : `str`
        AllenNLP's name of the files, e.g. ``2x4096_512_2048cnn_2xhighway``.
    parameters : `str`
        The number of parameters, as published ("93.6M").
    output_dim : `int`
        The width of every ELMo layer (forward and backward halves together).
    softmax_file, vocabulary_file : `str`, optional
        Where AllenNLP published the language model's softmax (``softmax/W``, ``softmax/b``) and
        the vocabulary of its rows, under the models' address; None where it published neither.
    """

    name: str
    architecture: str
    parameters: str
    output_dim: int
    softmax_file: Optional[str] = None
    vocabulary_file: Optional[str] = None

    def options_url(self, base_url: Optional[str] = None) -> str:
        """The ``options.json`` under ``base_url`` (default: `models_url()`)."""
        return self._file(base_url, OPTIONS_NAME)

    def weights_url(self, base_url: Optional[str] = None) -> str:
        """The ``weights.hdf5`` under ``base_url`` (default: `models_url()`)."""
        return self._file(base_url, WEIGHTS_NAME)

    def softmax_url(self, base_url: Optional[str] = None) -> Optional[str]:
        """The softmax's HDF5 under ``base_url`` (default: `models_url()`), or None."""
        return None if self.softmax_file is None else f"{(base_url or models_url()).rstrip('/')}/{self.softmax_file}"

    def vocabulary_url(self, base_url: Optional[str] = None) -> Optional[str]:
        """The softmax rows' vocabulary file under ``base_url`` (default: `models_url()`), or None."""
        if self.vocabulary_file is None:
            return None
        return f"{(base_url or models_url()).rstrip('/')}/{self.vocabulary_file}"

    def _file(self, base_url: Optional[str], suffix: str) -> str:
        base = (base_url or models_url()).rstrip("/")
        return f"{base}/{self.architecture}/elmo_{self.architecture}_{suffix}"


PUBLISHED_MODELS: Dict[str, PublishedModel] = {
    model.name: model
    for model in (
        PublishedModel("small", "2x1024_128_2048cnn_1xhighway", "13.6M", 256),
        PublishedModel("medium", "2x2048_256_2048cnn_1xhighway", "28.0M", 512),
        # The softmaxes and vocabularies as AllenNLP's own perplexity command and LAMA read them.
        PublishedModel(
            "original", "2x4096_512_2048cnn_2xhighway", "93.6M", 1024,
            "2x4096_512_2048cnn_2xhighway/elmo_2x4096_512_2048cnn_2xhighway_softmax_weights.hdf5",
            "2x4096_512_2048cnn_2xhighway/vocab-2016-09-10.txt",
        ),
        PublishedModel(
            "original-5.5b", "2x4096_512_2048cnn_2xhighway_5.5B", "93.6M", 1024,
            "2x4096_512_2048cnn_2xhighway_5.5B/elmo_2x4096_512_2048cnn_2xhighway_5.5B_softmax_weights.hdf5",
            "2x4096_512_2048cnn_2xhighway_5.5B/tf_checkpoint/vocab-enwiki-news-500000.txt",
        ),
    )
}


def models_url() -> str:
    """Where the published models are: ``$ELMO_MODELS_URL``, or AllenNLP's bucket."""
    return (os.environ.get(MODELS_URL_VARIABLE) or DEFAULT_MODELS_URL).rstrip("/")


def is_published_url(location: str) -> bool:
    """Whether ``location`` is a published model's file (at AllenNLP's address or the mirror's)."""
    return any(
        location in (model.options_url(base), model.weights_url(base), model.softmax_url(base),
                     model.vocabulary_url(base))
        for model in PUBLISHED_MODELS.values()
        for base in (DEFAULT_MODELS_URL, models_url())
    )


def models_url_note(location: str) -> str:
    """For errors about ``location``: where the published models are looked for, when
    ``$ELMO_MODELS_URL`` serves it; else ``""``."""
    base = os.environ.get(MODELS_URL_VARIABLE)
    if base and location.startswith(base.rstrip("/")):
        return f"the published models are looked for under {MODELS_URL_VARIABLE}={base}"
    return ""


def describe_published_models(cache_dir: Optional[PathLike] = None) -> str:
    """The table of ``allennlp elmo --list-models``: each published model's name, size, whether it
    is cached, and its URLs."""
    cache_dir = os.fspath(cache_dir) if cache_dir is not None else default_cache_dir()
    base_url = models_url()
    lines = [
        f"Published English ELMo models, for --model NAME (default: {DEFAULT_MODEL}). Each has",
        "3 layers: the token layer and 2 LSTM layers.",
        "",
        f"{'name':<15}{'parameters':>11}{'output dim':>12}  cached",
    ]
    for model in PUBLISHED_MODELS.values():
        urls = (model.options_url(base_url), model.weights_url(base_url))
        if not is_remote(urls[0]):
            cached = "local"
        else:
            cached = "yes" if all(cached_copy(url, cache_dir) for url in urls) else "no"
        lines.append(f"{model.name:<15}{model.parameters:>11}{model.output_dim:>12}  {cached}")
    for model in PUBLISHED_MODELS.values():
        lines += ["", f"{model.name}:", f"  {model.options_url(base_url)}", f"  {model.weights_url(base_url)}"]
    source = f"{MODELS_URL_VARIABLE}={base_url}" if os.environ.get(MODELS_URL_VARIABLE) else base_url
    lines += [
        "",
        f"Downloaded on first use from {source}",
        f"into {cache_dir} (ALLENNLP_CACHE_ROOT moves the cache; {MODELS_URL_VARIABLE} replaces",
        "the address, e.g. with a mirror or a local directory of the same layout).",
    ]
    return "\n".join(lines)
