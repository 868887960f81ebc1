"""
The ELMo layer that task models use: a frozen (or fine-tuned) biLM and learned layer mixes.
"""
import logging
from typing import Dict, List, Optional, Union

import torch
from allennlp.common import FromParams, Lazy
from allennlp.common.checks import ConfigurationError

from elmo_plugin.model_files.build_hints import with_build_hint
from elmo_plugin.modules.bilm import ElmoBiLm
from elmo_plugin.modules.precision import InferenceSettings, check_frozen, run_bilm
from elmo_plugin.modules.scalar_mix import ScalarMix
from elmo_plugin.modules.util import remove_sentence_boundaries

logger = logging.getLogger(__name__)


class Elmo(torch.nn.Module, FromParams):
    """
    ELMo as in Peters et al. (2018): the biLM's layers, mixed by ``num_output_representations``
    independent scalar mixes, each followed by dropout; AllenNLP's ``Elmo``'s inputs and outputs.

    # Parameters

    options_file : `str`, optional
        bilm-tf ``options.json`` (path or URL). With ``weight_file`` it wins over ``model``.
    weight_file : `str`, optional
        bilm-tf ``weights.hdf5``; or a ``model.tar.gz`` of our pretraining with no options file.
    num_output_representations : `int`, optional (default = `1`)
        How many independent mixes to compute from one biLM run.
    requires_grad : `bool`, optional (default = `False`)
        Fine-tune the biLM. By default it is frozen and only the mixes learn.
    do_layer_norm : `bool`, optional (default = `False`)
        Layer-normalise each biLM layer before mixing (see `ScalarMix`).
    dropout : `float`, optional (default = `0.5`)
        Dropout on each mixed representation.
    vocab_to_cache : `List[str]`, optional
        Tokens whose character-encoder output is computed once and reused while the biLM is frozen.
    keep_sentence_boundaries : `bool`, optional (default = `False`)
        Keep the ``<S>``/``</S>`` positions in the output (and its mask).
    scalar_mix_parameters : `List[float]`, optional
        A fixed, untrained mix given as pre-softmax layer weights, e.g. ``[-9e10, 1, -9e10]``.
    archive_file : `str`, optional
        The ``model.tar.gz`` (or serialization directory) of an ``elmo_bilm`` run instead of files.
    scalar_mix : `Lazy[ScalarMix]`, optional
        The mix (``{"type": "single_layer", "layer": -1}``, ...); by default the paper's.
    bilm : `ElmoBiLm`, optional
        An already built biLM, instead of files; its own training dropout is switched off.
    module : `torch.nn.Module`, optional
        AllenNLP's name for ``bilm``: any module with its ``num_layers``, ``get_output_dim()`` and ``forward``.
    model : `str`, optional
        The model when no files are given: any that `elmo_plugin.model_files.resolve` names; by
        default the published ``original``.
    precision : `str`, optional (default = `"float32"`)
        ``"bfloat16"``: the frozen biLM's products in bfloat16 where native (`elmo_plugin.modules.precision`).
    """

    def __init__(
        self,
        options_file: Optional[str] = None,
        weight_file: Optional[str] = None,
        num_output_representations: int = 1,
        requires_grad: bool = False,
        do_layer_norm: bool = False,
        dropout: float = 0.5,
        vocab_to_cache: Optional[List[str]] = None,
        keep_sentence_boundaries: bool = False,
        scalar_mix_parameters: Optional[List[float]] = None,
        archive_file: Optional[str] = None,
        scalar_mix: Optional[Lazy[ScalarMix]] = None,
        bilm: Optional[ElmoBiLm] = None,
        model: Optional[str] = None,
        module: Optional[torch.nn.Module] = None,
        precision: str = "float32",
    ) -> None:
        super().__init__()
        # Checked before a model is loaded (or downloaded), and again on the biLM itself below
        # (one passed in ready-made may have trainable parameters).
        self._execution = InferenceSettings(precision)
        check_frozen(precision, requires_grad)
        if module is not None:
            if bilm is not None:
                raise ConfigurationError("give the biLM once: as bilm or as module, not both")
            if options_file is not None or weight_file is not None:
                # AllenNLP's error for the same call.
                raise ConfigurationError("Don't provide options_file or weight_file with module")
            bilm = module  # type: ignore[assignment]
        if bilm is None:
            try:
                bilm = ElmoBiLm.from_model(
                    model,
                    options_file=options_file,
                    weight_file=weight_file,
                    archive_file=archive_file,
                    requires_grad=requires_grad,
                )
            except ConfigurationError as error:
                # A biLM that one of the Makefile's targets builds: name the target.
                paths = (options_file, weight_file, archive_file, model)
                raise with_build_hint(error, *paths) from None
        if isinstance(bilm, ElmoBiLm):
            # As in AllenNLP's Elmo, whose biLM has none: task models put theirs on the mixes.
            bilm.training_dropout = 0.0
        check_frozen(precision, any(p.requires_grad for p in bilm.parameters()))
        self._elmo_lstm = bilm
        if vocab_to_cache is not None:
            if requires_grad:
                logger.warning(
                    "vocab_to_cache is ignored while the biLM is fine-tuned (requires_grad=true): "
                    "the cached vectors would go stale"
                )
            if isinstance(bilm, ElmoBiLm):
                bilm.cache_tokens(vocab_to_cache)
        self._keep_sentence_boundaries = keep_sentence_boundaries
        self._dropout = torch.nn.Dropout(p=dropout)
        if num_output_representations < 1:
            raise ConfigurationError(
                f"num_output_representations must be at least 1, got {num_output_representations}"
            )
        scalar_mix = scalar_mix or Lazy(ScalarMix)
        self._scalar_mixes: List[ScalarMix] = []
        for k in range(num_output_representations):
            mix = scalar_mix.construct(
                num_layers=bilm.num_layers,
                do_layer_norm=do_layer_norm,
                initial_scalar_parameters=scalar_mix_parameters,
                trainable=scalar_mix_parameters is None,
            )
            # AllenNLP's names (scalar_mix_0, ...), so that regularizer regexes carry over.
            self.add_module(f"scalar_mix_{k}", mix)
            self._scalar_mixes.append(mix)

    @property
    def bilm(self) -> ElmoBiLm:
        return self._elmo_lstm

    @property
    def scalar_mixes(self) -> List[ScalarMix]:
        return list(self._scalar_mixes)

    def get_output_dim(self) -> int:
        return self._elmo_lstm.get_output_dim()

    def forward(
        self, inputs: torch.Tensor, word_inputs: Optional[torch.Tensor] = None
    ) -> Dict[str, Union[torch.Tensor, List[torch.Tensor]]]:
        """
        # Parameters

        inputs : `torch.LongTensor`
            ``(..., batch, time, max_characters_per_token)`` ids of the ``elmo_characters`` indexer.
        word_inputs : `torch.LongTensor`, optional
            AllenNLP's, unused: the token cache is looked up by character ids.

        # Returns

        ``"elmo_representations"``: ``num_output_representations`` tensors
        ``(batch, time, output_dim)``; ``"mask"``: ``(batch, time)`` bool.
        """
        original_shape = inputs.shape
        if inputs.dim() > 3:
            inputs = inputs.reshape(-1, *original_shape[-2:])
        output = run_bilm(self._elmo_lstm, inputs, self._execution.plan(inputs.device))
        layers, mask_with_boundaries = output["activations"], output["mask"]
        representations = []
        for mix in self._scalar_mixes:
            mixed = mix(layers, mask_with_boundaries)
            if self._keep_sentence_boundaries:
                mask = mask_with_boundaries
            else:
                mixed, mask = remove_sentence_boundaries(mixed, mask_with_boundaries)
            representations.append(self._dropout(mixed))
        if len(original_shape) > 3:
            leading = original_shape[:-2]
            representations = [r.reshape(*leading, -1, r.size(-1)) for r in representations]
            mask = mask.reshape(*leading, -1)
        return {"elmo_representations": representations, "mask": mask}

