"""
The token mask of character ids, and the sentence boundaries ``<S>``/``</S>`` that the biLM runs
over but callers never see: AllenNLP's, vectorised, with the mask from the caller (a bilm-tf
target id 0 is a real token, ``<S>``).
"""
from typing import Tuple

import torch


def character_mask(character_ids: torch.Tensor) -> torch.BoolTensor:
    """``(..., tokens)`` True where a token is, for ``(..., tokens, max_characters)`` character ids
    (padding tokens are all-zero rows)."""
    return (character_ids > 0).any(dim=-1)


def add_sentence_boundaries(
    tensor: torch.Tensor,
    mask: torch.BoolTensor,
    beginning_of_sentence: torch.Tensor,
    end_of_sentence: torch.Tensor,
) -> Tuple[torch.Tensor, torch.BoolTensor]:
    """
    ``beginning_of_sentence`` before and ``end_of_sentence`` after the tokens of every row of
    ``tensor`` (``(batch, time)`` ids with scalars, or ``(batch, time, ...)`` rows with one row
    each; left-aligned, ``mask`` True at the tokens): ``(batch, time + 2, ...)``, zeros after
    ``</S>``, and its ``(batch, time + 2)`` mask.
    """
    batch_size, num_tokens = mask.shape
    lengths = mask.sum(dim=1)
    with_boundaries = tensor.new_zeros(batch_size, num_tokens + 2, *tensor.shape[2:])
    with_boundaries[:, 1 : num_tokens + 1] = tensor * mask.view(
        batch_size, num_tokens, *([1] * (tensor.dim() - 2))
    ).to(tensor.dtype)
    with_boundaries[:, 0] = beginning_of_sentence
    rows = torch.arange(batch_size, device=tensor.device)
    with_boundaries[rows, lengths + 1] = end_of_sentence
    positions = torch.arange(num_tokens + 2, device=mask.device).unsqueeze(0)
    return with_boundaries, positions < (lengths + 2).unsqueeze(1)


def remove_sentence_boundaries(
    tensor: torch.Tensor, mask_with_boundaries: torch.BoolTensor
) -> Tuple[torch.Tensor, torch.BoolTensor]:
    """
    The inverse of `add_sentence_boundaries` for ``(batch, time + 2, ...)`` outputs: the token
    positions ``(batch, time, ...)``, zero at padding (a shorter row's ``</S>`` included: the new
    mask at ``i`` is the old one at ``i + 2``), and their ``(batch, time)`` mask.
    """
    mask = mask_with_boundaries[:, 2:]
    trailing = [1] * (tensor.dim() - 2)
    return tensor[:, 1:-1] * mask.view(*mask.shape, *trailing).to(tensor.dtype), mask
