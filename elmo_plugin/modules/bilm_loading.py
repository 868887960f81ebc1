"""
Loading a pretrained `ElmoBiLm`: the one place that turns a model, however it is named, into a
biLM with its weights. `ElmoEmbedder`, ``allennlp elmo``, `Elmo` (and through it
``elmo_token_embedder``) and ``allennlp elmo-export`` load their biLM here; `ElmoBiLm.from_files`
and `ElmoBiLm.from_model` are the documented entry points that call it.

Each step has its own module: `elmo_plugin.model_files.resolve` turns a name into files on this
machine (downloading them once), `elmo_plugin.model_files.stored_bilm` reads the files into
options and a state dict (bilm-tf's and ELMoForManyLangs' weights converted to our layout), and
`build_bilm` here builds the network from the options and loads the state dict into it (which
converts what an earlier version saved, `elmo_plugin.model_files.bilm_state`).
"""
import logging
from typing import Optional, Union

from elmo_plugin.common.paths import PathLike
from elmo_plugin.data.elmoformanylangs_character_ids import ElmoForManyLangsCharacterIds
from elmo_plugin.model_files.bilm_tf.options import BilmOptions, SwappedModelFilesError
from elmo_plugin.model_files.elmoformanylangs import ElmoForManyLangsModel
from elmo_plugin.model_files.resolve import (
    PYTHON_ARGUMENTS,
    ArgumentNames,
    ModelFiles,
    resolve_model,
)
from elmo_plugin.model_files.stored_bilm import StoredBilm, read_stored_bilm
from elmo_plugin.modules.bilm import ElmoBiLm, build_character_encoder

logger = logging.getLogger(__name__)


def load_bilm(
    model: Optional[Union[PathLike, ModelFiles]] = None,
    options_file: Optional[PathLike] = None,
    weight_file: Optional[PathLike] = None,
    archive_file: Optional[PathLike] = None,
    stateful: bool = False,
    requires_grad: bool = False,
    argument_names: ArgumentNames = PYTHON_ARGUMENTS,
) -> ElmoBiLm:
    """
    The pretrained biLM of a model.

    # Parameters

    model : `str`, `PathLike` or `ModelFiles`, optional
        The model as `resolve_model` takes it (a published model's name, a directory, an
        ``elmo_bilm`` archive, an ELMoForManyLangs directory; nothing: the published
        ``original``), or already resolved files, which are loaded as they are.
    options_file, weight_file, archive_file : `PathLike`, optional
        As `resolve_model` takes them; not together with resolved files.
    stateful : `bool`, optional (default = `False`)
        See `ElmoBiLm`.
    requires_grad : `bool`, optional (default = `False`)
        Leave the weights trainable; by default the biLM is frozen.
    argument_names : `ArgumentNames`, optional (default = `PYTHON_ARGUMENTS`)
        How errors spell the model's arguments (a command passes its own options' names).

    # Raises

    `ConfigurationError`
        For a model that cannot be found, downloaded or read, on one line naming the file.
    """
    if isinstance(model, ModelFiles):
        if not all(given is None for given in (options_file, weight_file, archive_file)):
            raise ValueError("resolved ModelFiles name the model: give no other files with them")
        files = model
    else:
        files = resolve_model(
            model,
            options_file=options_file,
            weight_file=weight_file,
            archive_file=archive_file,
            argument_names=argument_names,
        )
    logger.info("Loading the ELMo biLM: %s", files.description)
    try:
        stored = read_stored_bilm(files)
    except SwappedModelFilesError as error:
        # Named as the caller names the two arguments (the command's --options-file).
        raise SwappedModelFilesError(
            error.path, argument_names.options_file, argument_names.weight_file
        ) from None
    return build_bilm(stored, stateful=stateful, requires_grad=requires_grad)


def build_bilm(stored: StoredBilm, stateful: bool = False, requires_grad: bool = False) -> ElmoBiLm:
    """
    The `ElmoBiLm` that ``stored`` describes, with its weights (a random initialisation where it
    has none): frozen unless ``requires_grad``, stateless unless ``stateful``.
    """
    if stored.elmoformanylangs is not None:
        bilm = _elmoformanylangs_bilm(stored.options, stored.elmoformanylangs, stateful)
    else:
        bilm = ElmoBiLm(stored.options, stateful=stateful)
    if stored.state is not None:
        bilm.load_state_dict(stored.state)
    bilm.requires_grad_(requires_grad)
    return bilm


def _elmoformanylangs_bilm(
    options: BilmOptions, model: ElmoForManyLangsModel, stateful: bool
) -> ElmoBiLm:
    """An ELMoForManyLangs model's biLM: its own character and word ids, and a token encoder
    whose embeddings are as large as its dictionaries, with its word embedding if it has one."""
    character_ids = ElmoForManyLangsCharacterIds.from_model(model)
    encoder = build_character_encoder(
        options,
        num_character_ids=len(model.char_to_id) + 1,
        padding_id=character_ids.padding_id,
        num_word_ids=len(model.word_to_id) + 1 if model.word_to_id else 0,
        word_embedding_dim=model.options.word_dim,
        # Its token embedder always projects, even where the sizes would allow none.
        project=True,
    )
    return ElmoBiLm(
        options,
        stateful=stateful,
        character_ids=character_ids,  # type: ignore[arg-type]
        character_encoder=encoder,
    )
