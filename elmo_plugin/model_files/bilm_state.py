"""
The layouts a biLM's state dict may have been saved in, converted to the current one as it is loaded
(`ElmoBiLm._load_from_state_dict` calls `upgrade_bilm_state`). The current layout records its version
in the buffer ``format_version``; elmo_plugin 0.1's archives have the same layout without it.
"""
from typing import Dict, Mapping

import torch
from allennlp.common.checks import ConfigurationError

from elmo_plugin.model_files import parameter_names as names
from elmo_plugin.model_files.allennlp_layout import bilm_state_layout, convert_allennlp_bilm_state
from elmo_plugin.model_files.bilm_tf.options import BilmOptions

# The version of the current layout, saved in every biLM's state dict.
FORMAT_VERSION = 1


def format_version() -> torch.Tensor:
    """The value of the ``format_version`` entry of a state dict in the current layout."""
    return torch.tensor(FORMAT_VERSION)


def with_format_version(parameters: Mapping[str, torch.Tensor]) -> Dict[str, torch.Tensor]:
    """The state dict of a biLM whose ``parameters`` (keys of `parameter_names`) were just read."""
    return {**parameters, names.FORMAT_VERSION: format_version()}


def upgrade_bilm_state(
    state_dict: Dict[str, torch.Tensor],
    prefix: str,
    options: BilmOptions,
    own_state: Mapping[str, torch.Tensor],
) -> None:
    """Converts, in place, the biLM weights under ``prefix`` in ``state_dict`` to the current layout, for
    the biLM of ``options`` whose own state dict is ``own_state``; `ConfigurationError` for a newer
    version or AllenNLP weights that do not fit."""
    key = prefix + names.FORMAT_VERSION
    if bilm_state_layout(state_dict, prefix) == "allennlp":
        convert_allennlp_bilm_state(state_dict, prefix, options, own_state)
    elif key in state_dict and int(state_dict[key]) > FORMAT_VERSION:
        raise ConfigurationError(
            f"these weights have format version {int(state_dict[key])}, newer than this "
            f"elmo_plugin reads ({FORMAT_VERSION}); upgrade elmo_plugin"
        )
    # AllenNLP's weights are converted now, elmo_plugin 0.1's never needed it.
    state_dict[key] = format_version()
