"""
ELMo at the input *and* the output of a task model's encoder (Peters et al. 2018, section 3.3:
"we also include ELMo at the output of the task RNN by introducing another set of output specific
linear weights and replacing h_k with [h_k; ELMo_k^task]"), from a config, for models that take a
``text_field_embedder`` and an encoder (allennlp-models' ``crf_tagger``, AllenNLP's
``basic_classifier``, ...) without changing the model.

Two pieces that work together:

- ``elmo_input_output`` (a ``TextFieldEmbedder``) runs the biLM once and learns two mixes of its
  layers. It returns ``[the model's own embeddings; ELMo for the input; ELMo for the output]``:
  the encoder's input, followed by the output-side ELMo in the last ``get_elmo_dim()`` features.
- ``elmo_at_output`` (a ``Seq2SeqEncoder``, or a ``Seq2VecEncoder`` under the same name) takes
  those last ``elmo_dim`` features off, runs the wrapped encoder on the rest, and concatenates
  them to its output: ``[h_k; ELMo_k]`` per token, or ``[h; mean_k ELMo_k]`` for a vector.

The model itself checks that the sizes fit (the embedder's output size must be the encoder's
input size), so a wrapper whose ``elmo_dim`` does not match the embedder is a configuration
error when the model is built.
"""
from typing import Dict, Optional

import torch
from allennlp.common import Lazy
from allennlp.common.checks import ConfigurationError
from allennlp.data import TextFieldTensors
from allennlp.modules import Seq2SeqEncoder, Seq2VecEncoder, TextFieldEmbedder
from allennlp.nn.util import masked_mean

from elmo_plugin.modules.elmo import Elmo


@TextFieldEmbedder.register("elmo_input_output")
class ElmoInputOutputEmbedder(TextFieldEmbedder):
    """
    The model's own embeddings plus two ELMo representations of the same biLM run, one for the
    encoder's input and one for its output (the paper's ``num_output_representations: 2``).

    Returns ``(batch, time, text_field_embedder dim + 2 * elmo dim)``:
    ``[text_field_embedder(tokens); ELMo_input; ELMo_output]``. Pair it with an
    ``elmo_at_output`` encoder whose ``elmo_dim`` is ``get_elmo_dim()`` (the biLM's output size,
    2 x projection_dim), and whose wrapped encoder's input size is ``get_output_dim() -
    get_elmo_dim()``.

    # Parameters

    text_field_embedder : `TextFieldEmbedder`
        The model's own embeddings, for every indexer but ELMo's (e.g. a ``basic``
        ``text_field_embedder`` with ``tokens`` and ``token_characters``).
    elmo : `Lazy[Elmo]`
        `Elmo`'s parameters (``options_file`` and ``weight_file``, or ``model`` or
        ``archive_file``; ``do_layer_norm``, ``dropout``, ``requires_grad``, ...), except
        ``num_output_representations``, which is 2 here: each mix has its own layer weights
        and scale, regularised by the same ``scalar_parameters`` regex as a single one.
    elmo_key : `str`, optional (default = `"elmo"`)
        The name of the ``elmo_characters`` token indexer in the dataset reader.
    """

    def __init__(
        self,
        text_field_embedder: TextFieldEmbedder,
        elmo: Lazy[Elmo],
        elmo_key: str = "elmo",
    ) -> None:
        super().__init__()
        self._text_field_embedder = text_field_embedder
        self._elmo = elmo.construct(num_output_representations=2)
        # A num_output_representations in the config's elmo section would win over ours.
        if len(self._elmo.scalar_mixes) != 2:
            raise ConfigurationError(
                "elmo_input_output: leave num_output_representations out of its elmo section "
                f"(it is always 2: input and output), got {len(self._elmo.scalar_mixes)}"
            )
        self._elmo_key = elmo_key

    @property
    def elmo(self) -> Elmo:
        return self._elmo

    def get_elmo_dim(self) -> int:
        """The size of each ELMo representation (the ``elmo_dim`` of ``elmo_at_output``)."""
        return self._elmo.get_output_dim()

    def get_output_dim(self) -> int:
        return self._text_field_embedder.get_output_dim() + 2 * self.get_elmo_dim()

    def forward(
        self, text_field_input: TextFieldTensors, num_wrapping_dims: int = 0, **kwargs
    ) -> torch.Tensor:
        if self._elmo_key not in text_field_input:
            raise ConfigurationError(
                f"elmo_input_output: the text field has no indexer named {self._elmo_key!r} "
                f"(it has {sorted(text_field_input)}); add an elmo_characters indexer under that "
                "name to the dataset reader, or set elmo_key"
            )
        others: Dict[str, Dict[str, torch.Tensor]] = {
            key: tensors for key, tensors in text_field_input.items() if key != self._elmo_key
        }
        embedded = self._text_field_embedder(others, num_wrapping_dims=num_wrapping_dims, **kwargs)
        (character_ids,) = text_field_input[self._elmo_key].values()
        elmo_input, elmo_output = self._elmo(character_ids)["elmo_representations"]
        return torch.cat([embedded, elmo_input, elmo_output], dim=-1)


def _split_elmo(inputs: torch.Tensor, elmo_dim: int, name: str, expected: int):
    if inputs.size(-1) != expected:
        raise ConfigurationError(
            f"{name}: got {inputs.size(-1)} input features, expected {expected} (the wrapped "
            f"encoder's input plus elmo_dim={elmo_dim}); is the text field embedder "
            "elmo_input_output?"
        )
    return inputs[..., :-elmo_dim], inputs[..., -elmo_dim:]


class _EncoderWithElmoBeside:
    """
    What both ``elmo_at_output`` wrappers share: the wrapped encoder and the output-side ELMo's
    width, which passes by the encoder, so it adds to both the input and the output size.
    """

    _encoder: torch.nn.Module
    _elmo_dim: int

    def get_input_dim(self) -> int:
        return self._encoder.get_input_dim() + self._elmo_dim

    def get_output_dim(self) -> int:
        return self._encoder.get_output_dim() + self._elmo_dim


def _wrap_encoder(wrapper: _EncoderWithElmoBeside, encoder: torch.nn.Module, elmo_dim: int) -> None:
    if elmo_dim < 1:
        raise ConfigurationError(f"elmo_at_output: elmo_dim must be >= 1, got {elmo_dim}")
    wrapper._encoder = encoder
    wrapper._elmo_dim = elmo_dim


@Seq2SeqEncoder.register("elmo_at_output")
class ElmoAtOutputSeq2Seq(_EncoderWithElmoBeside, Seq2SeqEncoder):
    """
    ``[encoder(x_k); ELMo_k]`` per token, where the input is ``[x_k; ELMo_k]`` as
    ``elmo_input_output`` gives it (ELMo in the last ``elmo_dim`` features).

    # Parameters

    encoder : `Seq2SeqEncoder`
        The task's encoder (e.g. a BiLSTM), over the input without the output-side ELMo.
    elmo_dim : `int`
        The size of the output-side ELMo (``elmo_input_output``'s ``get_elmo_dim()``: 2 x the
        biLM's projection_dim, 256 for our small biLMs, 1024 for the published Original).
    """

    def __init__(self, encoder: Seq2SeqEncoder, elmo_dim: int) -> None:
        super().__init__()
        _wrap_encoder(self, encoder, elmo_dim)

    def is_bidirectional(self) -> bool:
        return self._encoder.is_bidirectional()

    def forward(self, inputs: torch.Tensor, mask: torch.BoolTensor) -> torch.Tensor:
        features, elmo = _split_elmo(inputs, self._elmo_dim, "elmo_at_output", self.get_input_dim())
        return torch.cat([self._encoder(features, mask), elmo], dim=-1)


@Seq2VecEncoder.register("elmo_at_output")
class ElmoAtOutputSeq2Vec(_EncoderWithElmoBeside, Seq2VecEncoder):
    """
    ``[encoder(x); mean_k ELMo_k]`` for a whole sequence (a classifier's ``seq2vec_encoder``):
    the wrapped encoder's vector, followed by the output-side ELMo averaged over the sequence's
    tokens (padding left out). The input is ``[x_k; ELMo_k]`` as ``elmo_input_output`` gives it.

    # Parameters

    encoder : `Seq2VecEncoder`
        The task's encoder (e.g. a BiLSTM's final states), over the input without the
        output-side ELMo.
    elmo_dim : `int`
        The size of the output-side ELMo (``elmo_input_output``'s ``get_elmo_dim()``).
    """

    def __init__(self, encoder: Seq2VecEncoder, elmo_dim: int) -> None:
        super().__init__()
        _wrap_encoder(self, encoder, elmo_dim)

    def forward(self, inputs: torch.Tensor, mask: Optional[torch.BoolTensor] = None) -> torch.Tensor:
        features, elmo = _split_elmo(inputs, self._elmo_dim, "elmo_at_output", self.get_input_dim())
        if mask is None:
            mask = inputs.new_ones(inputs.shape[:-1], dtype=torch.bool)
        pooled = masked_mean(elmo, mask.unsqueeze(-1), dim=1)
        return torch.cat([self._encoder(features, mask), pooled], dim=-1)
