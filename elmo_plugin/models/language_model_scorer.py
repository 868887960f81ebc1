"""
The biLM as the language model it was trained to be (``allennlp elmo-score``): sentence scores as
``allennlp evaluate`` computes them for ``elmo_bilm`` in sentence mode (``<S> tokens </S>`` from a
zero state, the full softmax: ``n`` tokens make ``n + 1`` predictions per direction), and lexical
substitutes as simple_elmo's ``get_elmo_substitutes``, with log-probabilities, best first.
"""
import itertools
import json
import logging
import math
import os
import sys
from dataclasses import dataclass
from typing import IO, Any, Dict, Iterable, Iterator, List, Optional, Sequence, Tuple

import torch
from allennlp.common.checks import ConfigurationError
from allennlp.common.tqdm import Tqdm

from elmo_plugin.common.archive import is_model_archive, open_model_archive
from elmo_plugin.common.atomic_output import atomic_output, input_at
from elmo_plugin.common.paths import PathLike
from elmo_plugin.data.character_ids import BOS_TOKEN, EOS_TOKEN
from elmo_plugin.data.sentence_file import check_sentence_file, read_sentences
from elmo_plugin.data.vocabulary import UNK_TOKEN, read_bilm_tf_vocabulary
from elmo_plugin.model_files.bilm_tf.directory import (
    OPTIONS_NAME,
    SOFTMAX_NAME,
    VOCABULARY_NAME,
    WEIGHTS_NAME,
    read_softmax,
)
from elmo_plugin.model_files.catalogue import PUBLISHED_MODELS
from elmo_plugin.model_files.elmoformanylangs import is_elmoformanylangs_directory
from elmo_plugin.model_files.tf_hub.elmo_module import is_tf_hub_module
from elmo_plugin.models.language_model_source import read_archived_language_model
from elmo_plugin.modules.bilm import ElmoBiLm

logger = logging.getLogger(__name__)

DEFAULT_BATCH_SIZE = 64
# The softmax's (rows, vocabulary) logits are computed this many at most at a time: 64M floats,
# 256 MB, as the training model's full softmax (`SampledSoftmaxLoss.max_eval_logits`).
MAX_LOGITS = 64 * 1024 * 1024

NO_SOFTMAX = (
    "scoring needs a biLM trained with its softmax: the model.tar.gz (or serialization "
    "directory) of `allennlp train` with an elmo_bilm config, or its export with "
    f"`allennlp elmo-export RUN OUT --include-softmax` ({SOFTMAX_NAME} and {VOCABULARY_NAME} "
    f"beside {OPTIONS_NAME} and {WEIGHTS_NAME})"
)


@dataclass
class BilmLanguageModel:
    """
    A biLM with the softmax it was trained with.

    # Parameters

    bilm : `ElmoBiLm`
        The biLM, stateless and frozen.
    softmax_weight, softmax_bias : `torch.Tensor`
        ``(vocabulary size, projection_dim)`` and ``(vocabulary size,)``, shared by both directions.
    vocabulary : `List[str]`
        The words in softmax row order, ``<S>``, ``</S>``, ``<UNK>`` among them.
    description : `str`
        Where it was read from, for messages.
    """

    bilm: ElmoBiLm
    softmax_weight: torch.Tensor
    softmax_bias: torch.Tensor
    vocabulary: List[str]
    description: str = ""

    def __post_init__(self) -> None:
        rows, width = self.softmax_weight.shape
        if rows != len(self.vocabulary) or tuple(self.softmax_bias.shape) != (rows,):
            raise ConfigurationError(
                f"{self.description}: the softmax has {rows} rows and {tuple(self.softmax_bias.shape)} "
                f"biases for a vocabulary of {len(self.vocabulary)} words"
            )
        if width != self.bilm.options.projection_dim:
            raise ConfigurationError(
                f"{self.description}: the softmax takes vectors of {width}, the biLM's LMs give "
                f"{self.bilm.options.projection_dim}"
            )
        self.token_to_id = {token: index for index, token in enumerate(self.vocabulary)}
        for special in (BOS_TOKEN, EOS_TOKEN, UNK_TOKEN):
            if special not in self.token_to_id:
                raise ConfigurationError(f"{self.description}: the vocabulary lacks {special}")


def _no_softmax(model: str, what: str) -> ConfigurationError:
    return ConfigurationError(f"{model} is {what}, without the language model's softmax; {NO_SOFTMAX}")


def load_language_model(model: PathLike) -> BilmLanguageModel:
    """The biLM and softmax of ``model``: an ``elmo_bilm`` ``model.tar.gz`` or serialization directory,
    or what ``allennlp elmo-export --include-softmax`` wrote; else a `ConfigurationError` (`NO_SOFTMAX`)."""
    name = os.fspath(model)
    if name.lower() in PUBLISHED_MODELS:
        raise _no_softmax(name, "a published bilm-tf model (its files hold the biLM only)")
    path = os.path.expanduser(name)
    if not os.path.exists(path):
        raise ConfigurationError(f"no model at {path}: {NO_SOFTMAX}")
    if os.path.isdir(path):
        if is_tf_hub_module(path):
            raise _no_softmax(path, "a TF-Hub module")
        if is_elmoformanylangs_directory(path):
            raise _no_softmax(path, "an ELMoForManyLangs model")
        if os.path.isfile(os.path.join(path, OPTIONS_NAME)):
            return _exported_language_model(path)
    if not is_model_archive(path):
        raise ConfigurationError(f"{path} is neither a model directory nor a model.tar.gz; {NO_SOFTMAX}")
    return _archive_language_model(path)


def _exported_language_model(directory: str) -> BilmLanguageModel:
    softmax_file = os.path.join(directory, SOFTMAX_NAME)
    vocabulary_file = os.path.join(directory, VOCABULARY_NAME)
    if not os.path.isfile(softmax_file):
        raise _no_softmax(directory, f"bilm-tf files with no {SOFTMAX_NAME}")
    if not os.path.isfile(vocabulary_file):
        raise ConfigurationError(
            f"{directory} has {SOFTMAX_NAME} but no {VOCABULARY_NAME}, the words of its rows; "
            "export the run again with --include-softmax"
        )
    bilm = ElmoBiLm.from_files(os.path.join(directory, OPTIONS_NAME), os.path.join(directory, WEIGHTS_NAME))
    weight, bias = read_softmax(softmax_file)
    return BilmLanguageModel(bilm, weight, bias, read_bilm_tf_vocabulary(vocabulary_file), directory)


def _archive_language_model(path: str) -> BilmLanguageModel:
    with open_model_archive(path) as archive:
        model_type = archive.config.get("model", {}).get("type")
        if model_type != "elmo_bilm":
            raise _no_softmax(path, f"a {model_type!r} task model")
        bilm, words, softmax = read_archived_language_model(archive)
    if softmax is None:
        raise ConfigurationError(f"{path}: the model's weights lack softmax.softmax_weight and softmax.softmax_bias")
    return BilmLanguageModel(bilm, softmax[0].float(), softmax[1].float(), words, path)


@dataclass
class Candidates:
    """The words a language model expects at a position, best first."""

    ids: List[int]
    words: List[str]
    log_probs: List[float]

    def to_json(self) -> Dict[str, Any]:
        # simple_elmo's names (its "logp" are unnormalised scores; these are log-probabilities).
        return {"candidates": self.ids, "candidate_words": self.words, "logp": self.log_probs}


@dataclass
class Substitutes:
    """What the language models expect in place of one token: ``forward`` from the words before
    it, ``backward`` from the words after it, ``both`` by the sum of the two log-probabilities."""

    word: str
    forward: Candidates
    backward: Candidates
    both: Candidates

    def to_json(self) -> Dict[str, Any]:
        return {"word": self.word, **{name: getattr(self, name).to_json() for name in ("forward", "backward", "both")}}


class _Perplexities:
    """The perplexities of ``forward_log_prob`` and ``backward_log_prob`` over ``predictions`` per
    direction; ``perplexity`` is their mean, as the training model (and ``evaluate``) reports ``ppl``."""

    predictions: int
    forward_log_prob: float
    backward_log_prob: float

    @property
    def forward_perplexity(self) -> float:
        return math.exp(-self.forward_log_prob / max(self.predictions, 1))

    @property
    def backward_perplexity(self) -> float:
        return math.exp(-self.backward_log_prob / max(self.predictions, 1))

    @property
    def perplexity(self) -> float:
        return 0.5 * (self.forward_perplexity + self.backward_perplexity)


@dataclass
class SentenceScore(_Perplexities):
    """
    One sentence's natural-log probabilities under the two language models (its tokens and
    ``</S>`` forward, its tokens and ``<S>`` backward) and their perplexities; ``substitutes``:
    one entry per token, when asked for.
    """

    tokens: List[str]
    forward_log_prob: float
    backward_log_prob: float
    substitutes: Optional[List[Substitutes]] = None

    @property
    def predictions(self) -> int:  # type: ignore[override]
        """Predictions per direction: the tokens and one sentence boundary."""
        return len(self.tokens) + 1

    def to_json(self) -> Dict[str, Any]:
        names = ("forward_log_prob", "backward_log_prob", "forward_perplexity", "backward_perplexity", "perplexity")
        record: Dict[str, Any] = {"tokens": len(self.tokens), **{name: getattr(self, name) for name in names}}
        if self.substitutes is not None:
            record["substitutes"] = [substitute.to_json() for substitute in self.substitutes]
        return record


@dataclass
class CorpusScore(_Perplexities):
    """The sums over sentences: a file's perplexity as ``allennlp evaluate`` computes it (not a mean of sentences')."""

    sentences: int = 0
    predictions: int = 0  # per direction
    forward_log_prob: float = 0.0
    backward_log_prob: float = 0.0

    def add(self, score: SentenceScore) -> None:
        self.sentences += 1
        self.predictions += score.predictions
        self.forward_log_prob += score.forward_log_prob
        self.backward_log_prob += score.backward_log_prob


class LanguageModelScorer:
    """
    Scores tokenized sentences with a biLM and its softmax (see the module documentation).

    # Parameters

    model : `PathLike` or `BilmLanguageModel`
        An ``elmo_bilm`` ``model.tar.gz`` or serialization directory, or an export with its
        softmax (`load_language_model`), or one already loaded.
    cuda_device : `int`, optional (default = `-1`)
        The GPU to run on; -1 runs on the CPU.
    """

    def __init__(self, model, cuda_device: int = -1) -> None:
        if cuda_device >= 0 and not (torch.cuda.is_available() and cuda_device < torch.cuda.device_count()):
            visible = torch.cuda.device_count() if torch.cuda.is_available() else 0
            raise ConfigurationError(
                f"cuda_device={cuda_device} was requested, but {visible} CUDA device(s) are visible "
                f"(torch {torch.__version__}); use -1 (--cuda-device -1) for the CPU"
            )
        self.device = torch.device("cuda", cuda_device) if cuda_device >= 0 else torch.device("cpu")
        self.language_model = language_model = (
            model if isinstance(model, BilmLanguageModel) else load_language_model(model)
        )
        self.bilm = language_model.bilm.to(self.device).eval()
        self.softmax_weight = language_model.softmax_weight.to(self.device)
        self.softmax_bias = language_model.softmax_bias.to(self.device)
        self.vocabulary = language_model.vocabulary
        self._token_to_id = language_model.token_to_id
        self._unknown = self._token_to_id[UNK_TOKEN]
        self._boundaries = [self._token_to_id[BOS_TOKEN], self._token_to_id[EOS_TOKEN]]

    def _target_ids(self, batch: Sequence[Sequence[str]]) -> torch.Tensor:
        """``(batch, longest + 2)``: the ids of ``<S> tokens </S>``, padded with ``<S>``'s id (masked out)."""
        bos, eos = self._boundaries
        width = max(len(sentence) for sentence in batch) + 2
        rows = [
            [bos, *(self._token_to_id.get(token, self._unknown) for token in sentence), eos]
            + [bos] * (width - len(sentence) - 2)
            for sentence in batch
        ]
        return torch.tensor(rows, dtype=torch.long, device=self.device)

    def _log_softmax_chunks(self, vectors: torch.Tensor) -> Iterator[Tuple[int, torch.Tensor]]:
        """``(start, log-probabilities of rows start..)``, at most `MAX_LOGITS` logits at a time."""
        rows = max(1, MAX_LOGITS // len(self.vocabulary))
        for start in range(0, vectors.size(0), rows):
            logits = torch.addmm(self.softmax_bias, vectors[start : start + rows], self.softmax_weight.t())
            yield start, torch.log_softmax(logits, dim=-1)

    @torch.no_grad()
    def _run(self, batch: Sequence[Sequence[str]], k: int) -> List[SentenceScore]:
        check_tokens(batch)
        ids = self.bilm.character_ids.batch_to_ids(batch).to(self.device)
        output = self.bilm(ids)
        top, mask = output["activations"][-1], output["mask"]
        targets = self._target_ids(batch)
        projection = self.bilm.options.projection_dim
        # Position p of the forward LM predicts p + 1, of the backward LM p - 1; both pairs exist
        # where position p + 1 (resp. p) is real: mask[:, 1:], as the training model pairs them.
        pairs = mask[:, 1:]
        directions = (
            (top[:, :-1, :projection][pairs], targets[:, 1:][pairs]),
            (top[:, 1:, projection:][pairs], targets[:, :-1][pairs]),
        )
        target_log_probs = []
        top_candidates: List[Tuple[torch.Tensor, torch.Tensor]] = []
        for vectors, direction_targets in directions:
            gathered = torch.empty(vectors.size(0), device=self.device)
            best_values, best_ids = [], []
            for start, log_probs in self._log_softmax_chunks(vectors):
                rows = log_probs.size(0)
                gathered[start : start + rows] = log_probs.gather(
                    1, direction_targets[start : start + rows].unsqueeze(1)
                ).squeeze(1)
                if k:
                    log_probs[:, self._boundaries] = -math.inf  # simple_elmo's "no delimiters"
                    values, indices = log_probs.topk(min(k, log_probs.size(1)), dim=1)
                    best_values.append(values)
                    best_ids.append(indices)
            target_log_probs.append(gathered)
            if k:
                top_candidates.append((torch.cat(best_values), torch.cat(best_ids)))
        # Each sentence's predictions are consecutive rows (row-major selection by the mask).
        counts = pairs.sum(dim=1).tolist()
        sums = [_split_sums(log_probs, counts) for log_probs in target_log_probs]
        scores = [SentenceScore(list(sentence), forward, backward) for sentence, forward, backward in zip(batch, *sums)]
        if k:
            both = self._both_candidates(directions[0][0], directions[1][0], counts, k)
            self._attach_substitutes(scores, counts, top_candidates, both)
        return scores

    def _both_candidates(
        self, forward: torch.Tensor, backward: torch.Tensor, counts: List[int], k: int
    ) -> Tuple[torch.Tensor, torch.Tensor]:
        """For each token, the ``k`` words with the highest forward + backward log-probability: the
        forward LM's prediction of token i is row i of its sentence, the backward LM's row i + 1."""
        starts = itertools.accumulate([0, *counts])
        rows = [row for start, count in zip(starts, counts) for row in range(start, start + count - 1)]
        index = torch.tensor(rows, dtype=torch.long, device=self.device)
        values, indices = [], []
        chunks = zip(self._log_softmax_chunks(forward[index]), self._log_softmax_chunks(backward[index + 1]))
        for (_, forward_log_probs), (_, backward_log_probs) in chunks:
            summed = forward_log_probs + backward_log_probs
            summed[:, self._boundaries] = -math.inf
            best = summed.topk(min(k, summed.size(1)), dim=1)
            values.append(best.values)
            indices.append(best.indices)
        return torch.cat(values), torch.cat(indices)

    def _attach_substitutes(
        self,
        scores: List[SentenceScore],
        counts: List[int],
        directions: List[Tuple[torch.Tensor, torch.Tensor]],
        both: Tuple[torch.Tensor, torch.Tensor],
    ) -> None:
        forward, backward, both_lists = ((values.tolist(), ids.tolist()) for values, ids in (*directions, both))

        def candidates(lists: Tuple[List[List[float]], List[List[int]]], row: int) -> Candidates:
            values, ids = lists
            return Candidates(ids[row], [self.vocabulary[index] for index in ids[row]], values[row])

        start = both_row = 0
        for score, count in zip(scores, counts):
            score.substitutes = []
            for position, token in enumerate(score.tokens):
                score.substitutes.append(Substitutes(
                    token,
                    forward=candidates(forward, start + position),
                    backward=candidates(backward, start + position + 1),
                    both=candidates(both_lists, both_row),
                ))
                both_row += 1
            start += count

    def score(
        self, sentences: Iterable[Sequence[str]], batch_size: int = DEFAULT_BATCH_SIZE, substitutes: int = 0
    ) -> List[SentenceScore]:
        """The score of each tokenized sentence (of at least one token), in order; with ``substitutes``
        k > 0 also each token's `Substitutes` (k words per list)."""
        given = list(sentences)
        check_tokens(given)
        sentences = [list(sentence) for sentence in given]
        scores: List[SentenceScore] = []
        for start in range(0, len(sentences), batch_size):
            scores.extend(self._run(sentences[start : start + batch_size], substitutes))
        return scores

    def substitutes(
        self, sentences: Iterable[Sequence[str]], k: int = 3, batch_size: int = DEFAULT_BATCH_SIZE
    ) -> List[List[Substitutes]]:
        """For each sentence, for each token, the ``k`` words the language models expect there."""
        if k < 1:
            raise ConfigurationError(f"k must be at least 1, got {k}")
        return [score.substitutes or [] for score in self.score(sentences, batch_size, substitutes=k)]

    def score_file(
        self,
        input_file: PathLike,
        output_file: Optional[PathLike] = None,
        substitutes: int = 0,
        batch_size: int = DEFAULT_BATCH_SIZE,
        progress: bool = True,
        num_sentences: Optional[int] = None,
    ) -> CorpusScore:
        """The `CorpusScore` of a file of tokenized sentences (checked by `check_scoring_files` unless
        ``num_sentences`` is given), each one's score a JSON line in ``output_file`` (whole or not at all) or stdout."""
        if num_sentences is None:
            num_sentences = check_scoring_files(input_file, output_file)
        if output_file is None:
            return self._write_scores(input_file, num_sentences, sys.stdout, substitutes, batch_size, progress)
        with atomic_output(os.fspath(output_file)) as temporary:
            with open(temporary, "w", encoding="utf-8", newline="\n") as out:
                return self._write_scores(input_file, num_sentences, out, substitutes, batch_size, progress)

    def _write_scores(
        self, input_file: PathLike, num_sentences: int, out: IO[str], substitutes: int, batch_size: int,
        progress: bool,
    ) -> CorpusScore:
        corpus = CorpusScore()
        batch: List[Tuple[int, List[str]]] = []
        with Tqdm.tqdm(total=num_sentences, disable=not progress, unit=" sentences", desc="elmo-score") as bar:
            # One line at a time: a file larger than memory is scored too. The None ends it.
            for line in itertools.chain(read_sentences(input_file), [None]):
                if line is not None:
                    batch.append(line)
                if batch and (len(batch) == batch_size or line is None):
                    for (line_index, _), score in zip(batch, self._run([tokens for _, tokens in batch], substitutes)):
                        corpus.add(score)
                        out.write(json.dumps({"line": line_index + 1, **score.to_json()}, ensure_ascii=False) + "\n")
                    bar.update(len(batch))
                    batch = []
        return corpus


def _split_sums(values: torch.Tensor, counts: List[int]) -> List[float]:
    return [float(part.double().sum()) for part in torch.split(values, counts)]


def check_tokens(batch: Sequence[Sequence[str]]) -> None:
    """A sentence must be a non-empty list (not a string) of non-blank string tokens."""
    for index, sentence in enumerate(batch):
        if isinstance(sentence, str):
            raise ConfigurationError(
                f"sentence {index}: sentences must be lists of tokens, got a string; split it first"
            )
        if len(sentence) == 0:
            raise ConfigurationError(f"sentence {index} has no tokens: there is nothing to score")
        for position, token in enumerate(sentence):
            if not isinstance(token, str) or not token.strip():
                raise ConfigurationError(
                    f"sentence {index}, token {position}: {token!r} is not a token (a non-empty string)"
                )


def check_scoring_files(input_file: PathLike, output_file: Optional[PathLike]) -> int:
    """The number of sentences of the input (`check_sentence_file`), once it is checked, and the
    output too, that it can be written without replacing it (before any model is loaded)."""
    input_path = os.fspath(input_file)
    num_sentences = check_sentence_file(input_path)
    if output_file is not None:
        output_path = os.fspath(output_file)
        directory = os.path.dirname(os.path.abspath(output_path))
        if not os.path.isdir(directory):
            raise ConfigurationError(f"the output directory does not exist: {directory}")
        if os.path.isdir(output_path):
            raise ConfigurationError(f"the output path is a directory: {output_path}")
        if input_at(output_path, [input_path]) is not None:
            raise ConfigurationError(f"the output file would replace the input file: {output_path}")
    return num_sentences


__all__ = [
    "BilmLanguageModel",
    "Candidates",
    "CorpusScore",
    "LanguageModelScorer",
    "SentenceScore",
    "Substitutes",
    "load_language_model",
]
