"""
ELMo at the input *and* the output of a task model's encoder (Peters et al. 2018, section 3.3),
from a config, for models that take a ``text_field_embedder`` and an encoder: ``elmo_input_output``
runs the biLM once with two mixes, ``elmo_at_output`` wraps the encoder (docs/tasks.md, "ELMo at
the encoder's output").
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
    ``[text_field_embedder(tokens); ELMo_input; ELMo_output]``, two mixes of one biLM run (the
    paper's ``num_output_representations: 2``), for an ``elmo_at_output`` encoder whose
    ``elmo_dim`` is `get_elmo_dim` (the biLM's output size).

    # Parameters

    text_field_embedder : `TextFieldEmbedder`
        The model's own embeddings, for every indexer but ELMo's.
    elmo : `Lazy[Elmo]`
        `Elmo`'s parameters except ``num_output_representations``, which is 2 here.
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


class _EncoderWithElmoBeside:
    """The wrapped encoder, and the output-side ELMo's width, which passes by it."""

    def __init__(self, encoder: torch.nn.Module, elmo_dim: int) -> None:
        super().__init__()
        if elmo_dim < 1:
            raise ConfigurationError(f"elmo_at_output: elmo_dim must be >= 1, got {elmo_dim}")
        self._encoder = encoder
        self._elmo_dim = elmo_dim

    def get_input_dim(self) -> int:
        return self._encoder.get_input_dim() + self._elmo_dim

    def get_output_dim(self) -> int:
        return self._encoder.get_output_dim() + self._elmo_dim

    def _split_elmo(self, inputs: torch.Tensor):
        expected = self.get_input_dim()
        if inputs.size(-1) != expected:
            raise ConfigurationError(
                f"elmo_at_output: got {inputs.size(-1)} input features, expected {expected} (the "
                f"wrapped encoder's input plus elmo_dim={self._elmo_dim}); is the text field "
                "embedder elmo_input_output?"
            )
        return inputs[..., :-self._elmo_dim], inputs[..., -self._elmo_dim:]


@Seq2SeqEncoder.register("elmo_at_output")
class ElmoAtOutputSeq2Seq(_EncoderWithElmoBeside, Seq2SeqEncoder):
    """
    ``[encoder(x_k); ELMo_k]`` per token of the input ``[x_k; ELMo_k]`` of ``elmo_input_output``.

    # Parameters

    encoder : `Seq2SeqEncoder`
        The task's encoder (e.g. a BiLSTM), over the input without the output-side ELMo.
    elmo_dim : `int`
        The size of the output-side ELMo (``elmo_input_output``'s ``get_elmo_dim()``).
    """

    def __init__(self, encoder: Seq2SeqEncoder, elmo_dim: int) -> None:
        super().__init__(encoder, elmo_dim)

    def is_bidirectional(self) -> bool:
        return self._encoder.is_bidirectional()

    def forward(self, inputs: torch.Tensor, mask: torch.BoolTensor) -> torch.Tensor:
        features, elmo = self._split_elmo(inputs)
        return torch.cat([self._encoder(features, mask), elmo], dim=-1)


@Seq2VecEncoder.register("elmo_at_output")
class ElmoAtOutputSeq2Vec(_EncoderWithElmoBeside, Seq2VecEncoder):
    """
    ``[encoder(x); mean_k ELMo_k]`` of the input ``[x_k; ELMo_k]`` of ``elmo_input_output``.

    # Parameters

    encoder : `Seq2VecEncoder`
        The task's encoder, over the input without the output-side ELMo.
    elmo_dim : `int`
        The size of the output-side ELMo (``elmo_input_output``'s ``get_elmo_dim()``).
    """

    def __init__(self, encoder: Seq2VecEncoder, elmo_dim: int) -> None:
        super().__init__(encoder, elmo_dim)

    def forward(self, inputs: torch.Tensor, mask: Optional[torch.BoolTensor] = None) -> torch.Tensor:
        features, elmo = self._split_elmo(inputs)
        if mask is None:
            mask = inputs.new_ones(inputs.shape[:-1], dtype=torch.bool)
        pooled = masked_mean(elmo, mask.unsqueeze(-1), dim=1)
        return torch.cat([self._encoder(features, mask), pooled], dim=-1)
