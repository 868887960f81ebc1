"""
The language model that an adapted biLM starts from (`read_language_model_source`): its biLM, and
where it has them, its vocabulary, its softmax and bilm-tf's Adagrad accumulators; and
`AdaptedBilmVocabulary`, the source's vocabulary re-sorted (and perhaps extended) for a new corpus.
"""
import logging
import os
from dataclasses import dataclass
from typing import Dict, List, Optional, Tuple

import torch
from allennlp.common.checks import ConfigurationError
from allennlp.data import Vocabulary

from elmo_plugin.common.archive import ModelArchive, is_model_archive, open_model_archive
from elmo_plugin.common.text_files import expand_corpus_glob
from elmo_plugin.data.vocabulary import (
    DEFAULT_LM_NAMESPACE,
    SPECIAL_TOKENS,
    BilmTfVocabulary,
    count_corpus_tokens,
    read_bilm_tf_vocabulary,
)
from elmo_plugin.data.vocabulary_adaptation import adapt_vocabulary
from elmo_plugin.model_files.bilm_tf.directory import OPTIONS_NAME, SOFTMAX_NAME, VOCABULARY_NAME, read_softmax
from elmo_plugin.model_files.bilm_tf.options import BilmOptions
from elmo_plugin.model_files.catalogue import PUBLISHED_MODELS, models_url
from elmo_plugin.model_files.download import default_cache_dir, fetch
from elmo_plugin.model_files.resolve import resolve_model
from elmo_plugin.model_files.stored_bilm import read_archive_bilm, read_stored_bilm, read_stored_options
from elmo_plugin.modules.bilm import ElmoBiLm

logger = logging.getLogger(__name__)


@dataclass
class LanguageModelSource:
    """
    A trained language model to go on training from.

    # Parameters

    options : `BilmOptions`
        The biLM's architecture.
    bilm_state : `Dict[str, torch.Tensor]`
        The biLM's weights, as `ElmoBiLm.load_state_dict` takes them.
    vocabulary : `List[str]`, optional
        The words of the softmax's rows; None for a biLM published without its softmax.
    softmax : `Tuple[torch.Tensor, torch.Tensor]`, optional
        The softmax's weight ``(V, projection_dim)`` and bias ``(V,)``; None where it was not kept.
    adagrad : `Dict[str, torch.Tensor]`, optional
        Adagrad's accumulators by the ``elmo_bilm`` model's parameter names (a bilm-tf training
        checkpoint's), the softmax's rows in ``vocabulary``'s order.
    description : `str`
        Where it was read from, for messages.
    """

    options: BilmOptions
    bilm_state: Dict[str, torch.Tensor]
    vocabulary: Optional[List[str]]
    softmax: Optional[Tuple[torch.Tensor, torch.Tensor]]
    adagrad: Optional[Dict[str, torch.Tensor]] = None
    description: str = ""


@dataclass(frozen=True)
class SourceSummary:
    """What a config needs to know of a source before training: its architecture, whether it has a
    softmax (else the softmax is trained first, the biLM frozen) and Adagrad accumulators."""

    options: BilmOptions
    has_softmax: bool
    has_adagrad: bool
    vocabulary_size: Optional[int]


def _checkpoint_module():
    # The checkpoint reader imports only on demand: most sources are not checkpoints.
    from elmo_plugin.model_files.bilm_tf import checkpoint

    return checkpoint


def _published_language_model_files(name: str) -> Optional[Tuple[str, str]]:
    """The local softmax and vocabulary files of a published model (downloaded and cached as its
    weights are), or None for one published without its softmax."""
    published = PUBLISHED_MODELS.get(name.lower())
    if published is None or published.softmax_file is None:
        return None
    softmax_url, vocabulary_url = published.softmax_url(models_url()), published.vocabulary_url(models_url())
    assert softmax_url is not None and vocabulary_url is not None
    cache_dir = default_cache_dir()
    return (fetch(softmax_url, "softmax", cache_dir, immutable=True),
            fetch(vocabulary_url, "vocabulary", cache_dir, immutable=True))


def _has_exported_softmax(path: str) -> bool:
    return os.path.isdir(path) and all(
        os.path.isfile(os.path.join(path, name)) for name in (OPTIONS_NAME, SOFTMAX_NAME)
    )


def _is_checkpoint(source: str) -> bool:
    return _checkpoint_module().is_bilm_tf_checkpoint(os.path.expanduser(source))


def _refuse_elmoformanylangs(source: str) -> None:
    files = resolve_model(source)
    if files.elmoformanylangs_directory is not None:
        raise ConfigurationError(
            f"{source}: an ELMoForManyLangs model has character and word ids of its own, which the "
            "bilm_corpus reader does not make; continue its training with ELMoForManyLangs' own code"
        )


def summarize_source(source: str, vocabulary_file: Optional[str] = None) -> SourceSummary:
    """The `SourceSummary` of ``source`` (what `read_language_model_source` takes), reading as little
    as it can: the options, which files there are, and the vocabulary's length."""
    path = os.path.expanduser(source)
    if _is_checkpoint(source):
        checkpoint = _checkpoint_module().read_bilm_tf_checkpoint(path, vocabulary_file)
        size = len(checkpoint.vocabulary) if checkpoint.vocabulary is not None else None
        return SourceSummary(checkpoint.options, True, checkpoint.adagrad is not None, size)
    published = _published_language_model_files(source) if not os.path.exists(path) else None
    if published is not None:
        options = read_stored_options(resolve_model(source))
        return SourceSummary(options, True, False, len(read_bilm_tf_vocabulary(published[1])))
    if _has_exported_softmax(path):
        options = BilmOptions.from_file(os.path.join(path, OPTIONS_NAME))
        return SourceSummary(options, True, False, len(read_bilm_tf_vocabulary(os.path.join(path, VOCABULARY_NAME))))
    _refuse_elmoformanylangs(source)
    files = resolve_model(source)
    # An elmo_bilm run keeps its softmax in its weights.
    has_softmax = files.archive_file is not None
    size = len(_archive_vocabulary(files.archive_file)) if has_softmax else None
    return SourceSummary(read_stored_options(files), has_softmax, False, size)


def _archive_vocabulary(archive_file: str) -> List[str]:
    with open_model_archive(archive_file) as archive:
        namespace = archive.config["model"].get("vocab_namespace", DEFAULT_LM_NAMESPACE)
        tokens = BilmTfVocabulary.from_files(archive.vocabulary_directory).get_index_to_token_vocabulary(namespace)
    return [tokens[index] for index in range(len(tokens))]


def read_source_vocabulary(source: str, vocabulary_file: Optional[str] = None) -> Optional[List[str]]:
    """The words of ``source``'s softmax rows (`read_language_model_source`), None where it has none."""
    path = os.path.expanduser(source)
    if vocabulary_file is not None and not _is_checkpoint(source):
        raise ConfigurationError(
            f"a source vocabulary file ({vocabulary_file}) goes with a bilm-tf training checkpoint; "
            f"{source} has its own vocabulary or none"
        )
    if _is_checkpoint(source):
        return _checkpoint_module().read_bilm_tf_checkpoint(path, vocabulary_file).vocabulary
    published = _published_language_model_files(source) if not os.path.exists(path) else None
    if published is not None:
        return read_bilm_tf_vocabulary(published[1])
    if _has_exported_softmax(path):
        return read_bilm_tf_vocabulary(os.path.join(path, VOCABULARY_NAME))
    if is_model_archive(path) and not os.path.isfile(os.path.join(path, OPTIONS_NAME)):
        files = resolve_model(source)
        if files.archive_file is not None:
            return _archive_vocabulary(files.archive_file)
    return None


def read_language_model_source(source: str, vocabulary_file: Optional[str] = None) -> LanguageModelSource:
    """
    The language model of ``source``: a bilm-tf training checkpoint (``model.ckpt-N`` or its
    directory, with ``vocabulary_file`` unless one lies beside it), an ``elmo_bilm`` run or its
    ``model.tar.gz``, a directory that ``allennlp elmo-export --include-softmax`` wrote, a published
    model's name (``original`` and ``original-5.5b`` with their published softmax), or any other
    model ``allennlp elmo --model`` takes, which has no softmax. `ConfigurationError` on one line.
    """
    path = os.path.expanduser(source)
    if _is_checkpoint(source):
        checkpoint = _checkpoint_module().read_bilm_tf_checkpoint(path, vocabulary_file)
        if checkpoint.vocabulary is None:
            raise ConfigurationError(
                f"{source}: a bilm-tf checkpoint's softmax rows are the words of the vocabulary file it was "
                "trained with, which does not lie beside it: give it (--source-vocabulary FILE)"
            )
        return LanguageModelSource(checkpoint.options, checkpoint.bilm_state, checkpoint.vocabulary,
                                   checkpoint.softmax, checkpoint.adagrad, checkpoint.description)
    if vocabulary_file is not None:
        read_source_vocabulary(source, vocabulary_file)  # the error: a vocabulary for a checkpoint only
    published = _published_language_model_files(source) if not os.path.exists(path) else None
    if published is not None:
        stored = read_stored_bilm(source)
        weight, bias = read_softmax(published[0])
        return LanguageModelSource(stored.options, stored.state, read_bilm_tf_vocabulary(published[1]),
                                   (weight, bias), description=f"the published {source!r} model")
    if _has_exported_softmax(path):
        stored = read_stored_bilm(path)
        assert stored.state is not None
        return LanguageModelSource(
            stored.options, stored.state, read_bilm_tf_vocabulary(os.path.join(path, VOCABULARY_NAME)),
            read_softmax(os.path.join(path, SOFTMAX_NAME)), description=path,
        )
    files = resolve_model(source)
    if files.archive_file is not None:
        with open_model_archive(files.archive_file) as archive:
            bilm, words, softmax = read_archived_language_model(archive)
        if softmax is None:
            raise ConfigurationError(f"{source}: the weights lack softmax.softmax_weight and softmax.softmax_bias")
        return LanguageModelSource(bilm.options, bilm.state_dict(), words, (softmax[0].float(), softmax[1].float()),
                                   description=source)
    _refuse_elmoformanylangs(source)
    stored = read_stored_bilm(source)
    assert stored.state is not None
    return LanguageModelSource(stored.options, stored.state, None, None, description=source)


def read_archived_language_model(
    archive: ModelArchive,
) -> Tuple[ElmoBiLm, List[str], Optional[Tuple[torch.Tensor, torch.Tensor]]]:
    """
    Of an ``elmo_bilm`` run's archive, open as ``archive``: the biLM (an archive of an earlier
    version converted as it loads), the words of the softmax's rows, and the softmax's weight and
    bias (``None`` when the weights lack them).
    """
    weights = archive.load_weights()
    bilm = ElmoBiLm.from_stored(read_archive_bilm(archive, weights))
    namespace = archive.config["model"].get("vocab_namespace", DEFAULT_LM_NAMESPACE)
    tokens = BilmTfVocabulary.from_files(archive.vocabulary_directory).get_index_to_token_vocabulary(namespace)
    if not tokens:
        raise ConfigurationError(f"{archive.path}: the vocabulary has no namespace {namespace!r}")
    keys = ("softmax.softmax_weight", "softmax.softmax_bias")
    softmax = (weights[keys[0]], weights[keys[1]]) if all(key in weights for key in keys) else None
    return bilm, [tokens[index] for index in range(len(tokens))], softmax


@Vocabulary.register("adapted_from_source", constructor="from_source")
class AdaptedBilmVocabulary(BilmTfVocabulary):
    """
    The vocabulary of a biLM adapted to a new corpus (``{"type": "adapted_from_source", "source":
    ..., "corpus": ...}``): the source's words re-sorted by the corpus's counts (`adapt_vocabulary`),
    so that the sampled softmax's log-uniform sampler draws by the new corpus's frequencies;
    ``extend_min_count`` adds the corpus's words seen that often that the source lacks. A source
    without a vocabulary (no softmax) gets the corpus's own, as ``allennlp elmo-vocab`` builds it.
    A saved one reads back as a `BilmTfVocabulary` does.
    """

    @classmethod
    def from_source(
        cls,
        source: str,
        corpus: str,
        extend_min_count: Optional[int] = None,
        source_vocabulary_file: Optional[str] = None,
        namespace: str = DEFAULT_LM_NAMESPACE,
    ) -> "AdaptedBilmVocabulary":
        """
        # Parameters

        source : `str`
            What `read_language_model_source` takes.
        corpus : `str`
            The new corpus: a glob of tokenized files, one sentence a line (the training data).
        extend_min_count : `int`, optional (default = `None`)
            Add the corpus's words seen at least this many times that the source lacks; without a
            source vocabulary, the corpus's words seen this many times (default 1) are the vocabulary.
        source_vocabulary_file : `str`, optional
            The vocabulary of a bilm-tf checkpoint that has none beside it.
        namespace : `str`, optional (default = `"lm_targets"`)
        """
        counts = count_corpus_tokens(expand_corpus_glob(corpus), repr(corpus))
        source_tokens = read_source_vocabulary(source, source_vocabulary_file)
        if source_tokens is None:
            adapted = adapt_vocabulary(list(SPECIAL_TOKENS), counts, extend_min_count or 1)
            logger.info("%s has no softmax: its vocabulary is the corpus's, %d words", source, len(adapted.tokens))
        else:
            adapted = adapt_vocabulary(source_tokens, counts, extend_min_count)
            # The rate every user asks first, on the console.
            logger.warning("%s", adapted.describe(corpus))
        return cls.from_tokens(adapted.tokens, namespace)  # type: ignore[return-value]
