"""
The biLM as an AllenNLP `Model`: what ``allennlp train training_configs/bilm.jsonnet`` trains.
"""
import dataclasses
import logging
import math
from typing import Any, Dict, List, Optional, Tuple, Union

import torch
from allennlp.common.checks import ConfigurationError
from allennlp.data import TextFieldTensors, Vocabulary
from allennlp.models import Model
from allennlp.nn import InitializerApplicator

from elmo_plugin.data.bilm_fields import character_ids, target_ids
from elmo_plugin.data.character_ids import BOS_TOKEN, EOS_TOKEN
from elmo_plugin.data.vocabulary import DEFAULT_LM_NAMESPACE, VocabularyOrderCheck
from elmo_plugin.model_files.bilm_tf.options import BilmOptions
from elmo_plugin.model_files.bilm_tf.weights import read_bilm_tf_weights
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
    A character-based bidirectional language model trained as bilm-tf trains it: forward and
    backward LMs over the same character encoder, each predicting its next token with a
    sampled softmax whose weights the two directions share. The loss is the mean of the two
    directions' mean token losses. In evaluation the full softmax is used, so the reported
    perplexities are true perplexities.

    The biLM itself is the same `ElmoBiLm` used for embedding; `allennlp elmo-export` writes
    it out in the bilm-tf format.

    Registered as a `Model` with name ``"elmo_bilm"``.

    # Parameters

    vocab : `Vocabulary`
        Must hold the bilm-tf vocabulary file in ``vocab_namespace`` (use the
        ``"from_bilm_tf_file"`` vocabulary type), frequency-sorted, with ``<S>``, ``</S>``
        and ``<UNK>``.
    options : `Dict[str, Any]`
        The architecture in bilm-tf's ``options.json`` form (``char_cnn``, ``lstm``, ``dropout``);
        exported unchanged to ``options.json``.
    num_samples : `int`, optional (default = `8192`)
        Negative samples per batch for the sampled softmax (bilm-tf: 8192).
    vocab_namespace : `str`, optional (default = `"lm_targets"`)
        Where the target ids live in the vocabulary and in the ``TextField``s.
    initial_weight_file : `str`, optional (default = `None`)
        A bilm-tf ``weights.hdf5`` to start from (continued pretraining, or fine-tuning the LM
        on a new domain); its architecture must match ``options``.
    mixed_precision : `bool`, optional (default = `False`)
        Train with the matrix products in bfloat16 (the LSTM's per-step ones included), while the
        weights, their gradients, the optimizer, the LSTM's cell state and the loss stay float32
        (no loss scaling: bfloat16 has float32's range); validation and ``allennlp evaluate`` run
        in float32. Only on a device with native bfloat16
        (`elmo_plugin.common.hardware.bfloat16_support`); elsewhere bfloat16 is emulated (17
        times slower than float32 on an AVX2-only CPU), so the first training batch logs a
        warning and the model trains in float32. docs/implementation.md has the measurements.
    compile : `Union[bool, str]`, optional (default = `"auto"`)
        Run the LSTM's recurrence in training compiled with ``torch.compile`` (forward and
        backward) for batches without padding (stream batching's windows), within float32
        rounding of the eager path; other batches, validation and evaluation run eagerly.
        ``true``, ``false``, a torch.compile mode by name (``"reduce-overhead"``: CUDA graphs on
        a GPU), or ``"auto"``: compiled only where measured faster
        (`elmo_plugin.modules.execution.plan.COMPILED_BY_DEFAULT`: nowhere yet). The compile
        time is logged once per shape.
    tf32 : `bool`, optional (default = `False`)
        On a CUDA GPU, float32 matrix products in TF32 (Ampere and newer) in the forward passes
        and training's backward passes, with one log line. Off by default until GPU runs show
        that it leaves the perplexity curve unchanged; no effect on a CPU.
    sparse_softmax_gradients : `bool`, optional (default = `False`)
        Give the softmax's weight and bias sparse gradients that hold only the rows a training
        step uses (its targets and its negatives; `SampledSoftmaxLoss`'s ``sparse_gradients``),
        for an optimizer that then updates only those rows: ``dense_sparse_adagrad`` gives
        exactly the dense Adagrad update (dense gradients stay the reference). At a vocabulary
        of hundreds of thousands of words the dense update of the softmax costs more than the
        rest of a step. In distributed training (DDP, whose all-reduce takes dense gradients
        only) the gradients stay dense, with one log line; ``dense_sparse_adagrad`` takes both.
    fixed_shape_stream : `bool`, optional (default = `False`)
        Train stream batches with a plan's ``fixed_shape``
        (`elmo_plugin.modules.execution.plan.ExecutionPlan`): every row runs every step, no
        lengths read by the host, no token deduplicated, no shape that depends on the data, so
        that a training step never waits on the device inside the network either, and can be
        captured whole (`elmo_plugin.training.captured_step`). The same losses and gradients as
        the general path for full windows (every row ``unroll_steps`` tokens: all of a stream
        epoch's but its last batches, where a stream runs dry); at the end of a pass, a row that
        ran dry carries to the next batch a state that ran over its padding (its loss is
        masked as always).
    check_vocabulary_order : `bool`, optional (default = `True`)
        Count the targets of the first 100,000 training tokens (or of the first epoch, if
        fewer) and stop with a `ConfigurationError` naming the vocabulary file and its first
        line out of order if the vocabulary is clearly not sorted by descending frequency,
        which the sampled softmax assumes (see `VocabularyOrderCheck`). Set it to false for a
        vocabulary whose order is intended.
    initializer : `InitializerApplicator`, optional
        AllenNLP's initializers, applied after the weights are built (and after
        ``initial_weight_file``). To train more epochs on top of a finished run (a warm
        restart: new optimizer, new learning-rate schedule), start from all of its weights,
        softmax included: ``{"regexes": [[".*", {"type": "pretrained", "weights_file_path":
        "RUN/best.th"}]]}``. AllenNLP drops ``initializer`` when it loads an archive, so the new
        run's ``model.tar.gz`` does not need the old run.
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
    ) -> None:
        super().__init__(vocab)
        self._fixed_shape_stream = fixed_shape_stream
        self._mixed_precision = mixed_precision
        try:
            self._compile = check_compile_setting(compile, "model.compile")
        except ValueError as error:
            raise ConfigurationError(str(error)) from None
        self._tf32 = tf32
        # How the forward passes run, by device and training or not (`_plan`).
        self._plans: Dict[Tuple[torch.device, bool], ExecutionPlan] = {}
        # Whether training uses bfloat16 on each device, decided on its first training batch
        # there (`_plan`).
        self._native_bfloat16 = NativeBfloat16(
            "mixed_precision: bfloat16 autocast in training (%s)",
            "%s; mixed_precision is off, training in float32",
            logger,
        )
        self._namespace = vocab_namespace
        self._vocabulary_order = VocabularyOrderCheck(
            vocab, vocab_namespace, enabled=check_vocabulary_order
        )
        self.bilm_options = BilmOptions.from_dict(options, source="model.options")
        self.bilm = ElmoBiLm(self.bilm_options)
        if initial_weight_file is not None:
            self.bilm.load_state_dict(
                read_bilm_tf_weights(
                    initial_weight_file, self.bilm_options, options_source="model.options"
                )
            )
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
        self._bos_index = token_to_index[BOS_TOKEN]
        self._eos_index = token_to_index[EOS_TOKEN]
        self._projection_dim = self.bilm_options.projection_dim
        self._dropout = torch.nn.Dropout(self.bilm_options.dropout)
        self._sparse_softmax_gradients = sparse_softmax_gradients
        self.softmax = SampledSoftmaxLoss(
            num_words, self._projection_dim, num_samples,
            sparse_gradients=sparse_softmax_gradients,
        )
        # Per-direction sums of token losses and token counts since the last metrics reset, kept
        # on the model's device (made at the first batch) and read only by `get_metrics`.
        self._loss_sums: Optional[torch.Tensor] = None
        self._token_counts: Optional[torch.Tensor] = None
        if initializer is not None:
            initializer(self)

    def _direction_loss(
        self,
        direction: int,
        outputs: torch.Tensor,
        targets: torch.Tensor,
        mask: torch.Tensor,
        sampled,
    ) -> torch.Tensor:
        """
        Mean token loss of one direction; also accumulates the perplexity metric, on the device.

        In training every position goes through the sampled softmax and padding is masked out
        of the sum: shapes fixed by the batch's, no host reads, so the step never waits on the
        device (padding in stream batching is only at the end of an epoch). Evaluation selects
        the real positions first: the full softmax costs a vocabulary of logits per position.
        """
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

    def _with_boundary_targets(self, targets: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """Target ids ``(batch, time + 2)`` for ``<S> tokens </S>``, matching the biLM's layout."""
        bos, eos = (targets.new_tensor(index) for index in (self._bos_index, self._eos_index))
        return add_sentence_boundaries(targets, mask, bos, eos)[0]

    def forward(  # type: ignore
        self,
        tokens: Optional[TextFieldTensors] = None,
        forward_tokens: Optional[TextFieldTensors] = None,
        forward_targets: Optional[TextFieldTensors] = None,
        backward_tokens: Optional[TextFieldTensors] = None,
        backward_targets: Optional[TextFieldTensors] = None,
    ) -> Dict[str, torch.Tensor]:
        """
        Sentence mode: ``tokens`` (one sentence per row, no boundary tokens; the biLM adds
        ``<S>``/``</S>`` and starts from zero state). Stream mode: ``forward_tokens``/
        ``forward_targets`` and ``backward_tokens``/``backward_targets`` (windows of bilm-tf's
        continuous streams; the LSTM state carries over between batches, row by row). In
        training the negatives are drawn here, once per batch for both directions.
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
        """
        `forward` with the training step's negatives drawn by the caller
        (`SampledSoftmaxLoss.sample`; a captured step draws them outside its graph); None:
        drawn here.
        """
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
                output = self._sentences_forward(tokens, sampled, plan)
            else:
                output = self._stream_forward(
                    forward_tokens, forward_targets, backward_tokens, backward_targets, sampled,
                    plan,
                )
        tf32_through_backward(plan, output["loss"], self.parameters())
        return output

    def _choose_softmax_gradients(self) -> None:
        """Sparse softmax gradients, as asked, except under DDP (dense all-reduce only)."""
        distributed = torch.distributed.is_available() and torch.distributed.is_initialized()
        if self.softmax.sparse_gradients and distributed:
            logger.info(
                "sparse_softmax_gradients: dense gradients in distributed training (DDP "
                "all-reduces dense gradients only)"
            )
        self.softmax.sparse_gradients = not distributed

    def _device(self) -> torch.device:
        return self.softmax.softmax_weight.device

    def _plan(self, device: torch.device, stream: bool = False) -> ExecutionPlan:
        """
        How a forward pass runs on ``device``, decided on its first one there: in training with
        ``mixed_precision``'s bfloat16 products where the device has native bfloat16 (asked once
        per device; a device without it gets one warning, and training goes on in float32) and
        ``compile``, and for ``stream`` batches with ``fixed_shape_stream``'s fixed shapes; in
        evaluation in float32, eagerly; ``tf32`` in both.
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

    def _sentences_forward(
        self, tokens: TextFieldTensors, sampled, plan: ExecutionPlan
    ) -> Dict[str, torch.Tensor]:
        self.bilm.end_stream()  # sentences are stateless (validation after stream training)
        characters = character_ids(tokens)
        token_mask = character_mask(characters)
        targets = self._with_boundary_targets(target_ids(tokens), token_mask)
        output = self.bilm(characters, execution=plan)
        top, mask = output["activations"][-1], output["mask"]
        forward_outputs = top[:, :-1, : self._projection_dim]
        backward_outputs = top[:, 1:, self._projection_dim :]
        # Position p of the forward LM predicts p + 1; position p of the backward LM predicts
        # p - 1. Both pairs exist exactly where position p + 1 (resp. p) is a real token.
        pair_mask = mask[:, 1:]
        forward_loss = self._direction_loss(0, forward_outputs, targets[:, 1:], pair_mask, sampled)
        backward_loss = self._direction_loss(
            1, backward_outputs, targets[:, :-1], pair_mask, sampled
        )
        return {
            "loss": 0.5 * (forward_loss + backward_loss),
            "forward_loss": forward_loss.detach(),
            "backward_loss": backward_loss.detach(),
        }

    def _stream_forward(
        self,
        forward_tokens: TextFieldTensors,
        forward_targets: TextFieldTensors,
        backward_tokens: TextFieldTensors,
        backward_targets: TextFieldTensors,
        sampled,
        plan: ExecutionPlan,
    ) -> Dict[str, torch.Tensor]:
        losses: List[torch.Tensor] = []
        for direction, (inputs, targets) in enumerate(
            ((forward_tokens, forward_targets), (backward_tokens, backward_targets))
        ):
            top, mask = self.bilm.stream_direction(direction, character_ids(inputs), plan)
            # The reader gives every input position its next token, so the input mask is the
            # target mask. (A mask computed from the target ids would drop <S>, whose id is 0.)
            losses.append(
                self._direction_loss(direction, top, target_ids(targets), mask, sampled)
            )
        return {
            "loss": 0.5 * (losses[0] + losses[1]),
            "forward_loss": losses[0].detach(),
            "backward_loss": losses[1].detach(),
        }

    def get_metrics(self, reset: bool = False) -> Dict[str, float]:
        """
        ``forward_ppl``, ``backward_ppl`` and ``ppl`` (their average, as bilm-tf reports it).
        In training these come from the sampled softmax (an estimate); in validation and
        ``allennlp evaluate`` from the full softmax (true perplexity). The sums live on the
        model's device: this is where they are read (the plugin's trainer asks at its logging
        interval, not every batch). The vocabulary's order is judged here too, once enough
        targets are counted, so that no training step waits for it.
        """
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
