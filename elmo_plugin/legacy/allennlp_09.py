"""
AllenNLP 0.9's ``allennlp/commands/elmo.py`` on the plugin's `elmo_plugin.ElmoEmbedder`
(docs/legacy.md has the table of what is the same and what differs).
"""
import argparse
import logging
from typing import Optional, Tuple, Union

import numpy
import torch

from elmo_plugin.commands.elmo import ElmoCommand
from elmo_plugin.common.paths import PathLike
from elmo_plugin.elmo_embedder import DEFAULT_BATCH_SIZE
from elmo_plugin.elmo_embedder import ElmoEmbedder as _StatelessElmoEmbedder
from elmo_plugin.model_files.catalogue import DEFAULT_MODELS_URL, PUBLISHED_MODELS

logger = logging.getLogger("allennlp.commands.elmo")

# 0.9's constants, the published "Original" model's files at AllenNLP's address.
DEFAULT_OPTIONS_FILE = PUBLISHED_MODELS["original"].options_url(DEFAULT_MODELS_URL)
DEFAULT_WEIGHT_FILE = PUBLISHED_MODELS["original"].weights_url(DEFAULT_MODELS_URL)

# AllenNLP's bucket under its two addresses (0.9's constants use the first, flair and AllenNLP's
# old how-to the second). Such a pair is loaded as the published model of that name, so that
# $ELMO_MODELS_URL and the cache apply to it as to `model="original"`.
ALLENNLP_BUCKET_ADDRESSES = (
    DEFAULT_MODELS_URL,
    "https://s3-us-west-2.amazonaws.com/allennlp/models/elmo",
)

# Said once per process, the first time an embedder is built without saying which it wants.
_STATELESS_NOTICE = (
    "allennlp.commands.elmo.ElmoEmbedder (elmo_plugin): every batch starts from a zero LSTM "
    "state, so a sentence gets the same vectors whatever was embedded before it. AllenNLP 0.9 "
    "carried the state from batch to batch; pass stateful=True for its exact results "
    "(docs/legacy.md)."
)
_notice_given = False


def published_model_name(options_file: Optional[PathLike], weight_file: Optional[PathLike]) -> Optional[str]:
    """The name of the published model whose two files at AllenNLP's bucket these are, or None."""
    if options_file is None or weight_file is None:
        return None
    pair = (str(options_file), str(weight_file))
    for model in PUBLISHED_MODELS.values():
        for base_url in ALLENNLP_BUCKET_ADDRESSES:
            if pair == (model.options_url(base_url), model.weights_url(base_url)):
                return model.name
    return None


def empty_embedding() -> numpy.ndarray:
    """0.9's placeholder for an empty sentence: zeros of shape ``(3, 0, 1024)`` (float64)."""
    return numpy.zeros((3, 0, 1024))


class ElmoEmbedder(_StatelessElmoEmbedder):
    """
    AllenNLP 0.9's ``allennlp.commands.elmo.ElmoEmbedder``: `elmo_plugin.ElmoEmbedder` with 0.9's
    positional arguments and defaults.

    # Parameters

    options_file : `PathLike`, optional (default = `DEFAULT_OPTIONS_FILE`)
        A bilm-tf ``options.json``, path or URL.
    weight_file : `PathLike`, optional (default = `DEFAULT_WEIGHT_FILE`)
        Its ``weights.hdf5``, path or URL. The two files of a published model at AllenNLP's
        bucket load that published model (``$ELMO_MODELS_URL`` and its cache apply).
    cuda_device : `int`, optional (default = `-1`)
        The GPU; -1 is the CPU. A GPU that is not there is a `ConfigurationError` (0.9 failed
        later, inside torch).
    stateful : `bool`, optional (default = `None`: stateless, with a warning once per process)
        ``True`` carries the LSTM state from batch to batch, row by row, as 0.9 did (its exact
        results); ``False`` starts every batch from zero, without the warning.
    **kwargs
        The plugin's other arguments (``model``, ``precision``), see `elmo_plugin.ElmoEmbedder`.
        ``model=`` alone names the model (the default files do not count as named).
    """

    def __init__(
        self,
        options_file: Optional[PathLike] = DEFAULT_OPTIONS_FILE,
        weight_file: Optional[PathLike] = DEFAULT_WEIGHT_FILE,
        cuda_device: Union[int, torch.device] = -1,
        stateful: Optional[bool] = None,
        **kwargs,
    ) -> None:
        global _notice_given
        if stateful is None:
            stateful = False
            if not _notice_given:
                logger.warning(_STATELESS_NOTICE)
                _notice_given = True
        if kwargs.get("model") is not None:
            if (options_file, weight_file) == (DEFAULT_OPTIONS_FILE, DEFAULT_WEIGHT_FILE):
                options_file = weight_file = None  # the defaults only stand for "no model named"
        else:
            published = published_model_name(options_file, weight_file)
            if published is not None:
                options_file = weight_file = None
                kwargs["model"] = published
        super().__init__(options_file, weight_file, cuda_device, stateful=stateful, **kwargs)
        # 0.9's private ``elmo_bilm._elmo_lstm._states``, which flair's ELMoEmbeddings moves to
        # its device when a model holding one is unpickled or copied (its __setstate__).
        object.__setattr__(self.elmo_bilm, "_elmo_lstm", _LstmStatesOf09(self.elmo_bilm.lstm))


class _LstmStatesOf09:
    """``_states`` as 0.9's stateful LSTM exposed it: a tuple of tensors, which may be replaced by
    the same tensors moved to another device."""

    def __init__(self, lstm: torch.nn.Module) -> None:
        self._lstm = lstm

    @property
    def _states(self) -> Tuple[torch.Tensor, ...]:
        carried = self._lstm._states
        if carried is None:
            return ()
        return tuple(
            tensor for direction in carried for layer in direction for tensor in layer
            if tensor is not None
        )

    @_states.setter
    def _states(self, tensors) -> None:
        replacements = iter(tuple(tensors))
        carried = self._lstm._states
        if carried is None:
            return
        for direction in carried:
            for index, layer in enumerate(direction):
                direction[index] = tuple(
                    next(replacements) if tensor is not None else None for tensor in layer
                )


# 0.9's subcommand class (with AllenNLP 2.x's Subcommand API).
Elmo = ElmoCommand


def elmo_command(args: argparse.Namespace) -> None:
    """
    0.9's ``elmo_command(args)``, for code that builds 0.9's parser namespace itself (``input_file``
    a path or an open file). Problems raise a `ConfigurationError`, as in 0.9.
    """
    output_format = "all" if args.all else "top" if args.top else "average"
    embedder = ElmoEmbedder(
        getattr(args, "options_file", None) or DEFAULT_OPTIONS_FILE,
        getattr(args, "weight_file", None) or DEFAULT_WEIGHT_FILE,
        getattr(args, "cuda_device", -1),
        stateful=getattr(args, "stateful", None),
    )
    embedder.embed_file(
        args.input_file,
        args.output_file,
        output_format,
        getattr(args, "batch_size", DEFAULT_BATCH_SIZE),
        getattr(args, "forget_sentences", False),
        getattr(args, "use_sentence_keys", False),
    )
