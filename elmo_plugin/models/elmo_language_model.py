"""
The biLM as an AllenNLP `Model`: what ``allennlp train training_configs/bilm.jsonnet`` trains.
"""
import dataclasses
import logging
import math
from typing import Any, Dict, List, Optional, Sequence, Tuple, Union

import torch
from allennlp.common import Params
from allennlp.common.checks import ConfigurationError
from allennlp.data import TextFieldTensors, Vocabulary
from allennlp.models import Model
from allennlp.nn import InitializerApplicator

from elmo_plugin.data.bilm_fields import character_ids, target_ids
from elmo_plugin.data.character_ids import BOS_TOKEN, EOS_TOKEN
from elmo_plugin.data.vocabulary import DEFAULT_LM_NAMESPACE, UNK_TOKEN, VocabularyOrderCheck
from elmo_plugin.data.vocabulary_adaptation import added_row_log_shares
from elmo_plugin.model_files.bilm_tf.options import BilmOptions
from elmo_plugin.model_files.bilm_tf.weights import read_bilm_tf_weights
from elmo_plugin.models.language_model_source import (  # noqa: F401 (read_archived_language_model: kept here)
    LanguageModelSource,
    read_archived_language_model,
    read_language_model_source,
)
from elmo_plugin.modules.bilm import ElmoBiLm
from elmo_plugin.modules.execution.bfloat16 import NativeBfloat16
from elmo_plugin.modules.execution.plan import (
    ExecutionPlan,
    check_compile_setting,
    running,
    tf32_through_backward,
)
from elmo_plugin.modules.sampled_softmax_loss import SampledCandidates, SampledSoftmaxLoss
from elmo_plugin.modules.util import add_sentence_boundaries, character_mask

logger = logging.getLogger(__name__)


@Model.register("elmo_bilm")
class ElmoLanguageModel(Model):
    """
    The biLM trained as bilm-tf trains it: forward and backward LMs over one `ElmoBiLm`, sharing a
    sampled softmax; the loss is the mean of the two directions' mean token losses, and evaluation
    uses the full softmax (true perplexities). Registered as a `Model` with name ``"elmo_bilm"``.

    # Parameters

    vocab : `Vocabulary`
        The bilm-tf vocabulary file in ``vocab_namespace`` (the ``"from_bilm_tf_file"`` type).
    options : `Dict[str, Any]`
        The architecture in bilm-tf's ``options.json`` form (``char_cnn``, ``lstm``, ``dropout``);
        exported unchanged to ``options.json``.
    num_samples : `int`, optional (default = `8192`)
        Negative samples per batch for the sampled softmax (bilm-tf: 8192).
    vocab_namespace : `str`, optional (default = `"lm_targets"`)
        Where the target ids live in the vocabulary and in the ``TextField``s.
    initial_weight_file : `str`, optional (default = `None`)
        A bilm-tf ``weights.hdf5`` of the same architecture to start from (the softmax starts anew).
    start_from : `str`, optional (default = `None`)
        A trained language model to go on training (`read_language_model_source`: a run, an export
        with its softmax, a published name, a bilm-tf checkpoint, or a biLM alone): its biLM, and
        each word's softmax row that it has, wherever the vocabulary now puts the word (the
        ``adapted_from_source`` vocabulary re-sorts it for the new corpus). A word it lacks starts
        from ``<UNK>``'s row (`added_row_log_shares`); without a softmax the softmax starts anew.
        Neither is read again when the trained model is loaded.
    source_vocabulary_file : `str`, optional (default = `None`)
        The vocabulary of a ``start_from`` bilm-tf checkpoint that has none beside it.
    mixed_precision : `bool`, optional (default = `False`)
        Train with the matrix products in bfloat16 on a device with native bfloat16 (elsewhere
        one warning and float32); evaluation in float32 (docs/implementation.md).
    compile : `Union[bool, str]`, optional (default = `"auto"`)
        Compile the LSTM's recurrence in training for batches without padding: one of
        `elmo_plugin.modules.execution.plan.COMPILE_SETTINGS`.
    tf32 : `bool`, optional (default = `False`)
        On a CUDA GPU, float32 matrix products in TF32 in the forward and training's backward passes.
    sparse_softmax_gradients : `bool`, optional (default = `False`)
        Sparse gradients of the softmax's weight and bias holding only the rows a training step
        uses, for ``dense_sparse_adagrad``; dense under DDP, with one log line.
    fixed_shape_stream : `bool`, optional (default = `False`)
        Train stream batches with a plan's ``fixed_shape`` (`ExecutionPlan`; docs/implementation.md,
        "The fixed-shape stream step").
    check_vocabulary_order : `bool`, optional (default = `True`)
        Stop with a `ConfigurationError` if the first 100,000 training targets show that the
        vocabulary is clearly not sorted by descending frequency (`VocabularyOrderCheck`).
    initializer : `InitializerApplicator`, optional
        AllenNLP's initializers, applied after ``initial_weight_file`` (training_configs/
        bilm_ko_small.jsonnet restarts from a finished run's ``best.th`` with one).
    """

    def __init__(
        self,
        vocab: Vocabulary,
        options: Dict[str, Any],
        num_samples: int = 8192,
        vocab_namespace: str = DEFAULT_LM_NAMESPACE,
        initial_weight_file: Optional[str] = None,
        mixed_precision: bool = False,
        check_vocabulary_order: bool = True,
        initializer: Optional[InitializerApplicator] = None,
        compile: Union[bool, str] = "auto",
        tf32: bool = False,
        sparse_softmax_gradients: bool = False,
        fixed_shape_stream: bool = False,
        start_from: Optional[str] = None,
        source_vocabulary_file: Optional[str] = None,
    ) -> None:
        super().__init__(vocab)
        self._fixed_shape_stream = fixed_shape_stream
        self._mixed_precision = mixed_precision
        self._compile = check_compile_setting(compile, "model.compile", ConfigurationError)
        self._tf32 = tf32
        # How the forward passes run, by device and training or not (`_plan`).
        self._plans: Dict[Tuple[torch.device, bool], ExecutionPlan] = {}
        # Whether training uses bfloat16 on each device, decided on its first training batch there.
        self._native_bfloat16 = NativeBfloat16(
            "mixed_precision: bfloat16 autocast in training (%s)", "%s; mixed_precision is off, training in float32",
            logger,
        )
        self._vocabulary_order = VocabularyOrderCheck(vocab, vocab_namespace, enabled=check_vocabulary_order)
        self.bilm_options = BilmOptions.from_dict(options, source="model.options")
        self.bilm = ElmoBiLm(self.bilm_options)
        if initial_weight_file is not None:
            weights = read_bilm_tf_weights(initial_weight_file, self.bilm_options, options_source="model.options")
            self.bilm.load_state_dict(weights)
        num_words = vocab.get_vocab_size(vocab_namespace)
        if num_words < 4:
            raise ConfigurationError(
                f"vocabulary namespace '{vocab_namespace}' has {num_words} entries; use the "
                "'from_bilm_tf_file' vocabulary with a bilm-tf vocabulary file"
            )
        token_to_index = vocab.get_token_to_index_vocabulary(vocab_namespace)
        for special in (BOS_TOKEN, EOS_TOKEN):
            if special not in token_to_index:
                raise ConfigurationError(
                    f"vocabulary namespace '{vocab_namespace}' lacks {special}; a bilm-tf "
                    "vocabulary file starts with <S>, </S>, <UNK>"
                )
        self._boundary_ids = (token_to_index[BOS_TOKEN], token_to_index[EOS_TOKEN])
        self._projection_dim = self.bilm_options.projection_dim
        self._dropout = torch.nn.Dropout(self.bilm_options.dropout)
        self._sparse_softmax_gradients = sparse_softmax_gradients
        self.softmax = SampledSoftmaxLoss(
            num_words, self._projection_dim, num_samples, sparse_gradients=sparse_softmax_gradients
        )
        # Adagrad's accumulators of a start_from checkpoint, for the trainer's optimizer
        # (`ContinuePretrainingCallback`); None otherwise.
        self.source_adagrad: Optional[Dict[str, torch.Tensor]] = None
        # Whether the softmax came from start_from (its perplexity at the start means something).
        self.started_with_softmax = False
        if start_from is not None:
            if initial_weight_file is not None:
                raise ConfigurationError("give model.start_from or model.initial_weight_file, not both")
            self._start_from(read_language_model_source(start_from, source_vocabulary_file), vocab_namespace)
        # Per-direction sums of token losses and token counts since the last metrics reset, kept
        # on the model's device (made at the first batch) and read only by `get_metrics`.
        self._loss_sums: Optional[torch.Tensor] = None
        self._token_counts: Optional[torch.Tensor] = None
        if initializer is not None:
            initializer(self)

    @classmethod
    def _load(cls, config: Params, serialization_dir, weights_file=None, cuda_device: int = -1) -> Model:
        # A trained model's weights hold what it started from, which may be gone by now: loading it
        # never reads that again (as AllenNLP drops its initializers and pretrained files).
        model_params = config.get("model")
        for key in ("start_from", "source_vocabulary_file", "initial_weight_file"):
            model_params.pop(key, None)
        return super()._load(config, serialization_dir, weights_file, cuda_device)

    def _start_from(self, source: LanguageModelSource, namespace: str) -> None:
        """The biLM, the softmax rows and the Adagrad accumulators of ``source``, each softmax row
        (and its accumulators) moved to where this model's vocabulary has its word."""
        self.bilm.load_state_dict(source.bilm_state)
        tokens = self.vocab.get_index_to_token_vocabulary(namespace)
        tokens = [tokens[index] for index in range(len(tokens))]
        if source.softmax is None or source.vocabulary is None:
            logger.warning(
                "%s has no softmax: the softmax starts anew; train it first with the biLM frozen "
                "(the continue_pretraining callback's softmax_first_epochs)", source.description,
            )
            return
        self.started_with_softmax = True
        source_index = {token: index for index, token in enumerate(source.vocabulary)}
        rows = [source_index.get(token) for token in tokens]
        known = torch.tensor([index for index, row in enumerate(rows) if row is not None], dtype=torch.long)
        from_rows = torch.tensor([row for row in rows if row is not None], dtype=torch.long)
        weight, bias = source.softmax
        with torch.no_grad():
            self.softmax.softmax_weight[known] = weight[from_rows].to(self.softmax.softmax_weight.dtype)
            self.softmax.softmax_bias[known] = bias[from_rows].to(self.softmax.softmax_bias.dtype)
            shares = added_row_log_shares(tokens, rows)
            if shares:
                unknown = source_index[UNK_TOKEN]
                added = torch.tensor(list(shares), dtype=torch.long)
                self.softmax.softmax_weight[added] = weight[unknown].to(self.softmax.softmax_weight.dtype)
                log_shares = torch.tensor(list(shares.values()), dtype=self.softmax.softmax_bias.dtype)
                self.softmax.softmax_bias[added] = bias[unknown] + log_shares
        if source.adagrad is not None:
            self.source_adagrad = dict(source.adagrad)
            for name in ("softmax.softmax_weight", "softmax.softmax_bias"):
                if name in self.source_adagrad:
                    sums = self.source_adagrad[name]
                    # New words start as a new variable does, with Adagrad's initial accumulator.
                    moved = torch.full((len(tokens), *sums.shape[1:]), 1.0, dtype=sums.dtype)
                    moved[known] = sums[from_rows]
                    self.source_adagrad[name] = moved
        logger.info(
            "started from %s: %d of %d words with their softmax rows%s", source.description, len(known), len(tokens),
            f", {len(shares)} new ones from <UNK>'s" if shares else "",
        )

    def _direction_loss(
        self, direction: int, outputs: torch.Tensor, targets: torch.Tensor, mask: torch.Tensor, sampled
    ) -> torch.Tensor:
        """Mean token loss of one direction, accumulated into the perplexity on the device. Training
        masks padding out (no host read); evaluation selects the real positions (full softmax)."""
        if self.training:
            flat_mask = mask.reshape(-1)
            flat_targets = targets.reshape(-1)
            if direction == 0:
                # One direction: in sentences mode both predict the same tokens.
                self._vocabulary_order.count(flat_targets, flat_mask)
            embeddings = self._dropout(outputs.reshape(-1, outputs.size(-1)))
            losses = self.softmax(embeddings, flat_targets, sampled=sampled)
            losses = torch.where(flat_mask, losses, losses.new_zeros(()))
        else:
            losses = self.softmax(self._dropout(outputs[mask]), targets[mask], sampled=sampled)
        total = losses.sum()
        count = mask.sum()
        self._accumulate_metrics(direction, total.detach(), count)
        return total / count.clamp(min=1)

    def _accumulate_metrics(self, direction: int, total: torch.Tensor, count: torch.Tensor) -> None:
        if self._loss_sums is None or self._loss_sums.device != total.device:
            # float64 sums as Python's floats were (MPS has no float64).
            dtype = torch.float32 if total.device.type == "mps" else torch.float64
            self._loss_sums = torch.zeros(2, dtype=dtype, device=total.device)
            self._token_counts = torch.zeros(2, dtype=torch.long, device=total.device)
        assert self._token_counts is not None
        self._loss_sums[direction] += total.to(self._loss_sums.dtype)
        self._token_counts[direction] += count

    def forward(  # type: ignore
        self,
        tokens: Optional[TextFieldTensors] = None,
        forward_tokens: Optional[TextFieldTensors] = None,
        forward_targets: Optional[TextFieldTensors] = None,
        backward_tokens: Optional[TextFieldTensors] = None,
        backward_targets: Optional[TextFieldTensors] = None,
    ) -> Dict[str, torch.Tensor]:
        """
        Sentence mode: ``tokens`` (one sentence per row, no boundary tokens; zero state). Stream
        mode: the four ``forward_*``/``backward_*`` fields (windows of bilm-tf's streams, the LSTM
        state carried between batches).
        """
        return self.forward_with_negatives(
            None, tokens, forward_tokens, forward_targets, backward_tokens, backward_targets
        )

    def forward_with_negatives(
        self,
        sampled: Optional[SampledCandidates],
        tokens: Optional[TextFieldTensors] = None,
        forward_tokens: Optional[TextFieldTensors] = None,
        forward_targets: Optional[TextFieldTensors] = None,
        backward_tokens: Optional[TextFieldTensors] = None,
        backward_targets: Optional[TextFieldTensors] = None,
    ) -> Dict[str, torch.Tensor]:
        """`forward` with the training step's negatives drawn by the caller (a captured step draws
        them outside its graph); None: drawn here."""
        if self.training and sampled is None:
            sampled = self.softmax.sample(self._device())
        if self.training and self._sparse_softmax_gradients:
            self._choose_softmax_gradients()
        if tokens is None and (forward_tokens is None or backward_tokens is None):
            raise ConfigurationError(
                "elmo_bilm needs either a 'tokens' field (sentences mode) or 'forward_tokens', "
                "'forward_targets', 'backward_tokens', 'backward_targets' (stream mode)"
            )
        plan = self._plan(self._device(), stream=tokens is None)
        # The biLM is handed the plan; the rest of the pass (the softmax) runs under it.
        with running(plan):
            if tokens is not None:
                forward_loss, backward_loss = self._sentences_forward(tokens, sampled, plan)
            else:
                streams = ((forward_tokens, forward_targets), (backward_tokens, backward_targets))
                forward_loss, backward_loss = self._stream_forward(streams, sampled, plan)
        output = {
            "loss": 0.5 * (forward_loss + backward_loss),
            "forward_loss": forward_loss.detach(),
            "backward_loss": backward_loss.detach(),
        }
        tf32_through_backward(plan, output["loss"], self.parameters())
        return output

    def _choose_softmax_gradients(self) -> None:
        """Sparse softmax gradients, as asked, except under DDP (dense all-reduce only)."""
        distributed = torch.distributed.is_available() and torch.distributed.is_initialized()
        if self.softmax.sparse_gradients and distributed:
            logger.info("sparse_softmax_gradients: dense gradients in distributed training (DDP "
                        "all-reduces dense gradients only)")
        self.softmax.sparse_gradients = not distributed

    def _device(self) -> torch.device:
        return self.softmax.softmax_weight.device

    def _plan(self, device: torch.device, stream: bool = False) -> ExecutionPlan:
        """
        How a forward pass runs on ``device``, decided on its first one there: training with
        ``mixed_precision`` (where native), ``compile`` and for ``stream`` batches
        ``fixed_shape_stream``; evaluation in float32, eagerly; ``tf32`` in both.
        """
        if stream and self.training and self._fixed_shape_stream:
            key = (device, True, "fixed_shape")
            if key not in self._plans:
                self._plans[key] = dataclasses.replace(self._plan(device), fixed_shape=True)
            return self._plans[key]
        key = (device, self.training)
        if key not in self._plans:
            bfloat16 = self.training and self._mixed_precision and self._native_bfloat16.on(device)
            plan = ExecutionPlan.build(device, torch.bfloat16 if bfloat16 else None,
                                       self._compile if self.training else False, self._tf32)
            if self.training and plan.tf32 is not None:
                logger.info("tf32: float32 matrix products on %s in %s (model.tf32)", device,
                            "TF32" if plan.tf32 else "plain float32")
            self._plans[key] = plan
        return self._plans[key]

    def _sentences_forward(self, tokens: TextFieldTensors, sampled, plan: ExecutionPlan) -> List[torch.Tensor]:
        self.bilm.end_stream()  # sentences are stateless (validation after stream training)
        characters = character_ids(tokens)
        token_mask = character_mask(characters)
        # Target ids (batch, time + 2) for <S> tokens </S>, matching the biLM's layout.
        targets = target_ids(tokens)
        bos, eos = (targets.new_tensor(index) for index in self._boundary_ids)
        targets = add_sentence_boundaries(targets, token_mask, bos, eos)[0]
        output = self.bilm(characters, execution=plan)
        top, mask = output["activations"][-1], output["mask"]
        # Position p of the forward LM predicts p + 1; position p of the backward LM predicts
        # p - 1. Both pairs exist exactly where position p + 1 (resp. p) is a real token.
        pair_mask = mask[:, 1:]
        return [
            self._direction_loss(0, top[:, :-1, : self._projection_dim], targets[:, 1:], pair_mask, sampled),
            self._direction_loss(1, top[:, 1:, self._projection_dim :], targets[:, :-1], pair_mask, sampled),
        ]

    def _stream_forward(
        self, streams: Sequence[Tuple[TextFieldTensors, TextFieldTensors]], sampled, plan: ExecutionPlan
    ) -> List[torch.Tensor]:
        """The two directions' losses of ``streams``, each direction's (tokens, targets)."""
        losses: List[torch.Tensor] = []
        for direction, (inputs, targets) in enumerate(streams):
            top, mask = self.bilm.stream_direction(direction, character_ids(inputs), plan)
            # The reader gives every input position its next token, so the input mask is the
            # target mask. (A mask computed from the target ids would drop <S>, whose id is 0.)
            losses.append(self._direction_loss(direction, top, target_ids(targets), mask, sampled))
        return losses

    def get_metrics(self, reset: bool = False) -> Dict[str, float]:
        """``forward_ppl``, ``backward_ppl`` and ``ppl`` (their average, as bilm-tf reports it), sampled
        in training; the sums are read from the device here, so that no step waits."""
        metrics: Dict[str, float] = {}
        perplexities = []
        if self._loss_sums is not None and self._token_counts is not None:
            loss_sums, token_counts = self._loss_sums.tolist(), self._token_counts.tolist()
            for direction, name in enumerate(("forward_ppl", "backward_ppl")):
                if token_counts[direction]:
                    mean_loss = loss_sums[direction] / token_counts[direction]
                    metrics[name] = math.exp(min(mean_loss, 50.0))
                    perplexities.append(metrics[name])
        if perplexities:
            metrics["ppl"] = sum(perplexities) / len(perplexities)
        if self._vocabulary_order.due or (reset and self.training):
            # At the end of a training epoch a corpus smaller than the check's sample is
            # judged on what the epoch counted.
            self._vocabulary_order.finish()
        if reset:
            self._loss_sums = None
            self._token_counts = None
        return metrics
