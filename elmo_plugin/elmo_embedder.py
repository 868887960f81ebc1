"""
`ElmoEmbedder`: the biLM layers of tokenized sentences as numpy arrays or an HDF5 file; AllenNLP
0.9's ``ElmoEmbedder`` on top of `ElmoBiLm`, but stateless by default (docs/embedding.md).
"""
import logging
from dataclasses import replace
from typing import IO, Iterable, Iterator, List, Optional, Sequence, Tuple, Union

import numpy as np
import torch
from allennlp.common.checks import ConfigurationError
from allennlp.common.util import lazy_groups_of

from elmo_plugin.common.paths import PathLike
from elmo_plugin.common.threads import fix_threads
from elmo_plugin.embedding_output.batch_loop import write_embeddings
from elmo_plugin.embedding_output.batching import DEFAULT_SORT_CHUNK_BATCHES
from elmo_plugin.embedding_output.job import (
    DEFAULT_BATCH_SIZE,
    OUTPUT_FORMATS,
    EmbeddingJob,
    check_batch_size,
    check_output_format,
)
from elmo_plugin.embedding_output.layout import PER_SENTENCE, SENTENCE_INDICES, SENTENCE_TO_INDEX
from elmo_plugin.embedding_output.sentence_vectors import token_mean
from elmo_plugin.model_files.resolve import PYTHON_ARGUMENTS, ArgumentNames, ModelFiles
from elmo_plugin.modules.bilm import ElmoBiLm
from elmo_plugin.modules.precision import InferenceSettings, run_bilm
from elmo_plugin.modules.util import remove_sentence_boundaries

__all__ = [
    "DEFAULT_BATCH_SIZE",
    "DEFAULT_SORT_CHUNK_BATCHES",
    "OUTPUT_FORMATS",
    "SENTENCE_INDICES",
    "SENTENCE_TO_INDEX",
    "ElmoEmbedder",
    "EmbeddingJob",
    "check_cuda_device",
    "check_sentences",
]

logger = logging.getLogger(__name__)


def check_cuda_device(cuda_device: int) -> torch.device:
    """The torch device for ``cuda_device`` (-1: the CPU), or a `ConfigurationError` that says
    why that GPU cannot be used. Cheap, so callers can check before a model download."""
    if cuda_device < 0:
        return torch.device("cpu")
    if not torch.cuda.is_available():
        no_cuda_build = torch.version.cuda is None
        reason = "this PyTorch build has no CUDA support" if no_cuda_build else "no CUDA GPU is visible"
        raise ConfigurationError(
            f"cuda_device={cuda_device} was requested, but {reason} (torch {torch.__version__}). "
            "Use cuda_device=-1 (--cuda-device -1) to run on the CPU."
        )
    if cuda_device >= torch.cuda.device_count():
        raise ConfigurationError(
            f"cuda_device={cuda_device} was requested, but only {torch.cuda.device_count()} "
            f"CUDA device(s) are visible (0 to {torch.cuda.device_count() - 1}). Use one of "
            "those, or cuda_device=-1 (--cuda-device -1) to run on the CPU."
        )
    return torch.device("cuda", cuda_device)


def check_sentences(batch: Sequence[Sequence[str]], first_index: int = 0) -> None:
    """
    Checks tokenized sentences before they reach the biLM. Errors name the sentence
    (``first_index`` + its position in ``batch``) and the token: a `TypeError` for a non-sequence
    or a token that is not a ``str``, a `ConfigurationError` for a string sentence, a
    `ValueError` for an empty or whitespace-only token.
    """
    for position, sentence in enumerate(batch):
        index = first_index + position
        if isinstance(sentence, str):
            raise ConfigurationError(
                f"sentence {index}: sentences must be lists of tokens, got a string; split it "
                "first, e.g. sentence.split()"
            )
        is_sequence = hasattr(sentence, "__len__") and hasattr(sentence, "__iter__")
        if isinstance(sentence, (bytes, bytearray)) or not is_sequence:
            raise TypeError(
                f"sentence {index}: a sentence must be a list of string tokens, got "
                f"{type(sentence).__name__} {sentence!r:.60}"
            )
        for token_position, token in enumerate(sentence):
            if not isinstance(token, str):
                is_bytes = isinstance(token, (bytes, bytearray))
                hint = " (decode it first, e.g. token.decode('utf-8'))" if is_bytes else ""
                raise TypeError(
                    f"sentence {index}, token {token_position}: tokens must be strings, got "
                    f"{type(token).__name__} {token!r:.60}{hint}"
                )
            if not token or token.isspace():
                raise ValueError(
                    f"sentence {index}, token {token_position}: {token!r} is an empty or "
                    "whitespace-only token, which no ELMo model has seen (allennlp elmo splits "
                    "lines on whitespace, which never gives one); leave it out"
                )


class ElmoEmbedder:
    """
    Computes all ELMo layers (the biLM activations) of tokenized sentences.

    # Parameters

    options_file, weight_file : `PathLike`, optional
        A bilm-tf ``options.json`` and its ``weights.hdf5`` (paths or URLs); they win over ``model``.
    cuda_device : `int` or `torch.device`, optional (default = `-1`)
        The GPU to run on; -1 means the CPU.
    stateful : `bool`, optional (default = `False`)
        Carry the LSTM state from each batch to the next, row by row, as AllenNLP 0.9 did.
    model : `str`, `PathLike` or `ModelFiles`, optional
        The model when no files are given (`elmo_plugin.model_files.resolve`); by default the
        published ``original``, as in 0.9.
    precision : `str`, optional (default = `"float32"`)
        ``"bfloat16"`` runs the matrix products in bfloat16 where the device has it natively
        (`elmo_plugin.modules.precision`).
    compile : `Union[bool, str]`, optional (default = `False`)
        Run the recurrence of unpadded batches with ``torch.compile``, as training's ``compile``.
    tf32 : `bool`, optional (default = `False`)
        On a CUDA GPU, run the float32 matrix products in TF32.
    threads : `int`, optional
        The CPU threads of this process from now on (`elmo_plugin.common.threads.fix_threads`).
        By default a call of fewer than 8 sentences runs on one, a larger one on the cores that
        other work leaves idle (at most PyTorch's setting); ``OMP_NUM_THREADS`` also fixes them.
    argument_names : `ArgumentNames`, optional (default = `PYTHON_ARGUMENTS`)
        How errors about the model spell its arguments (``--options-file`` for ``allennlp elmo``).
    """

    def __init__(
        self,
        options_file: Optional[PathLike] = None,
        weight_file: Optional[PathLike] = None,
        cuda_device: Union[int, torch.device] = -1,
        stateful: bool = False,
        model: Optional[Union[PathLike, ModelFiles]] = None,
        precision: str = "float32",
        argument_names: ArgumentNames = PYTHON_ARGUMENTS,
        compile: Union[bool, str] = False,
        tf32: bool = False,
        threads: Optional[int] = None,
    ) -> None:
        fix_threads(threads)
        settings = InferenceSettings(precision, compile, tf32)
        # The device first: a missing GPU should not wait for a model download.
        self._device = cuda_device if isinstance(cuda_device, torch.device) else check_cuda_device(cuda_device)
        self.cuda_device = -1 if self._device.type == "cpu" else self._device.index or 0
        self.elmo_bilm = ElmoBiLm.from_model(
            model,
            options_file=options_file,
            weight_file=weight_file,
            stateful=stateful,
            argument_names=argument_names,
        )
        # eval(): no dropout. The parameters already have requires_grad=False.
        self.elmo_bilm.eval()
        self.elmo_bilm.to(self._device)
        # How the biLM runs, decided (and any warning given) now.
        self.execution = settings.plan(self._device)

    @property
    def precision(self) -> str:
        """``"bfloat16"`` only where it was asked for and the device has it natively."""
        return "float32" if self.execution is None or not self.execution.products else "bfloat16"

    @property
    def stateful(self) -> bool:
        return self.elmo_bilm.stateful

    @property
    def device(self) -> torch.device:
        return self._device

    @classmethod
    def for_job(
        cls, job: EmbeddingJob, cuda_device: Optional[Union[int, torch.device]] = None
    ) -> "ElmoEmbedder":
        """The embedder that ``job`` names: its model, device, statefulness and precision
        (``cuda_device``, a sharded run's own device, replaces the job's)."""
        return cls(
            options_file=job.options_file,
            weight_file=job.weight_file,
            cuda_device=job.cuda_device if cuda_device is None else cuda_device,
            stateful=job.stateful,
            model=job.model,
            precision=job.precision,
            argument_names=job.argument_names,
        )

    def reset_states(self) -> None:
        """Forgets the LSTM state carried between batches (stateful mode only)."""
        self.elmo_bilm.reset_states()

    @property
    def num_layers(self) -> int:
        """Number of layers in every embedding: the token layer plus one per LSTM layer."""
        return self.elmo_bilm.num_layers

    def get_output_dim(self) -> int:
        """Width of every layer (forward and backward halves)."""
        return self.elmo_bilm.get_output_dim()

    @torch.no_grad()
    def batch_to_embeddings(
        self, batch: Sequence[Sequence[str]]
    ) -> Tuple[torch.Tensor, torch.Tensor]:
        """
        The biLM's ``activations`` of tokenized sentences (empty ones allowed) without the
        sentence boundaries, ``(batch_size, num_layers, num_timesteps, dim)``, zero beyond each
        sentence's length, and their ``mask`` ``(batch_size, num_timesteps)``, on the device.
        """
        batch_size = len(batch)
        check_sentences(batch)
        if max((len(sentence) for sentence in batch), default=0) == 0:
            # Nothing to run. 0.9 skipped the biLM for [[]] too, so a stateful embedder's state is
            # not changed by an all-empty batch.
            activations = torch.zeros(
                batch_size, self.num_layers, 0, self.get_output_dim(), device=self._device
            )
            return activations, torch.zeros(batch_size, 0, dtype=torch.bool, device=self._device)
        character_ids = self.elmo_bilm.character_ids.batch_to_ids(batch).to(self._device)
        output = run_bilm(self.elmo_bilm, character_ids, self.execution)
        layers = torch.stack(output["activations"], dim=2)  # (batch, time + 2, layers, dim)
        activations, mask = remove_sentence_boundaries(layers, output["mask"])
        activations = activations.transpose(1, 2)  # (batch, layers, time, dim)
        return activations, mask

    def embed_arrays(
        self, batch: Sequence[Sequence[str]], output_format: str
    ) -> List[np.ndarray]:
        """One float32 array per sentence of ``batch``: ``output_format``'s layers (`OUTPUT_FORMATS`),
        ``(num_layers, num_tokens, dim)`` for ``"all"``, ``(num_tokens, dim)`` otherwise."""
        activations, mask = self.batch_to_embeddings(batch)
        # Reduce on the device: "top" and "average" move 1/num_layers of the data to the CPU.
        if output_format == "top":
            activations = activations[:, -1]
        elif output_format == "average":
            activations = activations.mean(dim=1)
        as_numpy = activations.cpu().numpy()
        lengths = mask.sum(dim=1).tolist()
        # copy(): each array owns its memory, so keeping one does not keep the whole batch alive.
        return [as_numpy[row][..., :length, :].copy() for row, length in enumerate(lengths)]

    def embed_sentence(self, sentence: Sequence[str]) -> np.ndarray:
        """The ELMo layers of one tokenized sentence, a ``(num_layers, num_tokens, dim)`` float32 array."""
        return self.embed_batch([sentence])[0]

    def embed_batch(self, batch: Sequence[Sequence[str]]) -> List[np.ndarray]:
        """The ELMo layers of a batch of tokenized sentences, run through the biLM together: one
        ``(num_layers, num_tokens, dim)`` float32 array per sentence, in order."""
        return self.embed_arrays(batch, "all")

    def embed_sentence_vectors(
        self, batch: Sequence[Sequence[str]], output_format: str = "average"
    ) -> List[np.ndarray]:
        """One vector per sentence of ``batch``: the mean over its tokens of ``output_format``'s
        output, ``(num_layers, dim)`` for ``"all"``, ``(dim,)`` otherwise (zeros for an empty
        sentence). What ``allennlp elmo --sentence-vectors`` writes."""
        check_output_format(output_format)
        return [token_mean(array) for array in self.embed_arrays(batch, output_format)]

    def embed_sentences(
        self, sentences: Iterable[Sequence[str]], batch_size: int = DEFAULT_BATCH_SIZE
    ) -> Iterator[np.ndarray]:
        """
        Embeds an iterable of tokenized ``sentences`` lazily, ``batch_size`` at a time (in
        stateful mode that decides which share a row of carried state), and yields one
        ``(num_layers, num_tokens, dim)`` array per sentence in order.
        """
        check_batch_size(batch_size)  # here, not in the generator: an error at the call
        return self._embed_stream(sentences, batch_size)

    def _embed_stream(
        self, sentences: Iterable[Sequence[str]], batch_size: int
    ) -> Iterator[np.ndarray]:
        first_index = 0
        for batch in lazy_groups_of(iter(sentences), batch_size):
            # Checked here too, so that an error gives the sentence's index in the whole stream.
            check_sentences(batch, first_index)
            yield from self.embed_batch(batch)
            first_index += len(batch)

    def embed_file(
        self,
        input_file: Union[PathLike, IO],
        output_file_path: PathLike,
        output_format: str = "all",
        batch_size: int = DEFAULT_BATCH_SIZE,
        forget_sentences: bool = False,
        use_sentence_keys: bool = False,
        progress: bool = True,
        sort_chunk_batches: int = DEFAULT_SORT_CHUNK_BATCHES,
        include_sentence_indices: bool = False,
        layout: str = PER_SENTENCE,
        float16: bool = False,
        sentence_vectors: bool = False,
    ) -> None:
        """
        Embeds ``input_file`` (one whitespace-tokenized sentence a line; a path, or a file opened
        from one) into the HDF5 file ``output_file_path``, which is replaced only when everything
        succeeded; ``progress`` shows a progress bar. ``output_format``, ``batch_size``,
        ``forget_sentences``, ``use_sentence_keys``, ``sort_chunk_batches``,
        ``include_sentence_indices``, ``layout``, ``float16``, ``sentence_vectors``: as
        `EmbeddingJob`'s fields.
        """
        job = EmbeddingJob.prepare(
            input_file,
            output_file_path,
            output_format=output_format,
            batch_size=batch_size,
            forget_sentences=forget_sentences,
            use_sentence_keys=use_sentence_keys,
            include_sentence_indices=include_sentence_indices,
            layout=layout,
            float16=float16,
            sentence_vectors=sentence_vectors,
            sort_chunk_batches=sort_chunk_batches,
            stateful=self.stateful,
            precision=self.precision,
        )
        self.run(job, progress=progress)

    def run(self, job: EmbeddingJob, progress: bool = True) -> None:
        """Carries out a prepared `EmbeddingJob` with this embedder (whose statefulness and
        precision the job takes)."""
        job = replace(job, stateful=self.stateful, precision=self.precision)
        write_embeddings(job, self, progress)
