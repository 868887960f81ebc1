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
    One ELMo representation per token, for the ``elmo_characters`` indexer's output.

    Takes every parameter of AllenNLP's ``elmo_token_embedder``, so existing configs run
    unchanged, plus ``archive_file`` (our pretraining's ``model.tar.gz``), ``scalar_mix`` and
    ``model`` (any model, named as for ``allennlp elmo``).
    Add it to a model by three edits of its config: an ``elmo_characters`` token indexer in the
    dataset reader, this embedder under the same key in ``text_field_embedder``, and the
    encoder's ``input_dim`` grown by ``get_output_dim()`` (docs/tasks.md).

    # Parameters

    options_file : `str`, optional
        bilm-tf ``options.json`` (path or URL). With ``weight_file`` it wins over ``model``.
    weight_file : `str`, optional
        bilm-tf ``weights.hdf5`` (path or URL); or a ``model.tar.gz`` when no options file is given.
    do_layer_norm : `bool`, optional (default = `False`)
        Layer-normalise each biLM layer before mixing.
    dropout : `float`, optional (default = `0.5`)
        Dropout on the mixed representation (the paper's 0.5).
    requires_grad : `bool`, optional (default = `False`)
        Fine-tune the biLM with the task model; by default only the mix (and projection) learn.
    projection_dim : `int`, optional
        Project the representation to this size with a learned linear layer.
    vocab_to_cache : `List[str]`, optional
        Tokens whose character-encoder output is computed once and reused while the biLM is
        frozen (identical vectors, less compute).
    scalar_mix_parameters : `List[float]`, optional
        A fixed, untrained mix given as pre-softmax layer weights.
    archive_file : `str`, optional
        The ``model.tar.gz`` or serialization directory of an ``elmo_bilm`` training run, in
        place of ``options_file`` and ``weight_file``.
    scalar_mix : `Lazy[ScalarMix]`, optional
        Which mix (default: the paper's softmax mix; ``{"type": "single_layer", "layer": -1}``
        for the top layer only).
    model : `str`, optional
        The model when no files are given, as `Elmo` takes it: any that
        `elmo_plugin.model_files.resolve` names (a published model's name, a directory, an NLPL
        ZIP, an ``elmo_bilm`` archive, an ELMoForManyLangs directory, indexed with
        ``elmoformanylangs_characters`` on the same directory instead of ``elmo_characters``).
        With no files and no ``model``: the published ``original``.
    precision : `str`, optional (default = `"float32"`)
        ``"bfloat16"``: the frozen biLM computes its matrix products in bfloat16 where the device
        has native bfloat16 (else one warning and float32, exactly); the representation stays
        float32. Only with a frozen biLM: with ``requires_grad`` true it is a configuration
        error (see `Elmo`).
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
        if projection_dim is not None:
            self._projection: Optional[torch.nn.Module] = torch.nn.Linear(
                self._elmo.get_output_dim(), projection_dim
            )
            self.output_dim = projection_dim
        else:
            self._projection = None
            self.output_dim = self._elmo.get_output_dim()

    @property
    def elmo(self) -> Elmo:
        return self._elmo

    def get_output_dim(self) -> int:
        return self.output_dim

    def forward(
        self, elmo_tokens: torch.Tensor, word_inputs: Optional[torch.Tensor] = None
    ) -> torch.Tensor:
        """
        ``elmo_tokens``: ``(batch, time, max_characters_per_token)`` character ids (or with more
        leading dimensions); returns ``(batch, time, output_dim)``.
        """
        representation = self._elmo(elmo_tokens, word_inputs)["elmo_representations"][0]
        if self._projection is not None:
            # nn.Linear acts on the last dimension, whatever the leading ones.
            representation = self._projection(representation)
        return representation
