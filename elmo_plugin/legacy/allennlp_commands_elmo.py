"""
``allennlp.commands.elmo`` (see `elmo_plugin.legacy`): the names of `allennlp_09`, so that they
are the same objects under either name.
"""
# The names 0.9's module defined, and the helpers it imported that scripts took from it.
from allennlp.commands.subcommand import Subcommand  # noqa: F401
from allennlp.common.checks import ConfigurationError  # noqa: F401
from allennlp.common.tqdm import Tqdm  # noqa: F401
from allennlp.common.util import lazy_groups_of  # noqa: F401
from allennlp.nn.util import remove_sentence_boundaries  # noqa: F401

from elmo_plugin.data.character_ids import batch_to_ids  # noqa: F401
from elmo_plugin.legacy.allennlp_09 import (  # noqa: F401
    DEFAULT_BATCH_SIZE,
    DEFAULT_OPTIONS_FILE,
    DEFAULT_WEIGHT_FILE,
    Elmo,
    ElmoEmbedder,
    elmo_command,
    empty_embedding,
    logger,
)

__all__ = [
    "DEFAULT_BATCH_SIZE",
    "DEFAULT_OPTIONS_FILE",
    "DEFAULT_WEIGHT_FILE",
    "Elmo",
    "ElmoEmbedder",
    "elmo_command",
    "empty_embedding",
]
