"""
``elmo_token_embedder``: ELMo in a ``text_field_embedder``, replacing AllenNLP's registration.
"""
from typing import List, Optional

import torch
from allennlp.common import Lazy
from allennlp.modules.token_embedders import TokenEmbedder

from elmo_plugin.common.registration import replace_registration
from elmo_plugin.modules.elmo import Elmo
from elmo_plugin.modules.scalar_mix import ScalarMix


@replace_registration(TokenEmbedder, "elmo_token_embedder")
class ElmoTokenEmbedder(TokenEmbedder):
    """
    One ELMo representation per token, for the ``elmo_characters`` indexer's output: every parameter
    of AllenNLP's ``elmo_token_embedder``, so existing configs run unchanged, plus ``archive_file``,
    ``scalar_mix``, ``model`` and ``precision`` (docs/tasks.md).

    # Parameters

    options_file, weight_file, archive_file, model : `str`, optional
        The biLM, as `Elmo` takes it.
    do_layer_norm, dropout, requires_grad, vocab_to_cache, scalar_mix_parameters, scalar_mix, precision : optional
        As `Elmo` takes them, for its one mix.
    projection_dim : `int`, optional
        Project the representation to this size with a learned linear layer.
    """

    def __init__(
        self,
        options_file: Optional[str] = None,
        weight_file: Optional[str] = None,
        do_layer_norm: bool = False,
        dropout: float = 0.5,
        requires_grad: bool = False,
        projection_dim: Optional[int] = None,
        vocab_to_cache: Optional[List[str]] = None,
        scalar_mix_parameters: Optional[List[float]] = None,
        archive_file: Optional[str] = None,
        scalar_mix: Optional[Lazy[ScalarMix]] = None,
        model: Optional[str] = None,
        precision: str = "float32",
    ) -> None:
        super().__init__()
        self._elmo = Elmo(
            options_file=options_file,
            weight_file=weight_file,
            num_output_representations=1,
            requires_grad=requires_grad,
            do_layer_norm=do_layer_norm,
            dropout=dropout,
            vocab_to_cache=vocab_to_cache,
            scalar_mix_parameters=scalar_mix_parameters,
            archive_file=archive_file,
            scalar_mix=scalar_mix,
            model=model,
            precision=precision,
        )
        self.output_dim = self._elmo.get_output_dim() if projection_dim is None else projection_dim
        self._projection: Optional[torch.nn.Module] = (
            None if projection_dim is None else torch.nn.Linear(self._elmo.get_output_dim(), projection_dim)
        )

    @property
    def elmo(self) -> Elmo:
        return self._elmo

    def get_output_dim(self) -> int:
        return self.output_dim

    def forward(
        self, elmo_tokens: torch.Tensor, word_inputs: Optional[torch.Tensor] = None
    ) -> torch.Tensor:
        """``(..., time, max_characters_per_token)`` character ids to ``(..., time, output_dim)``."""
        representation = self._elmo(elmo_tokens, word_inputs)["elmo_representations"][0]
        if self._projection is not None:
            representation = self._projection(representation)
        return representation
