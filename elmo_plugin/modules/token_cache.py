"""
A cache of character-encoder outputs for a fixed list of tokens (``vocab_to_cache``).
"""
import logging
from typing import Dict, Iterable, List, Optional, Tuple

import torch

from elmo_plugin.data.character_ids import BOS_TOKEN, EOS_TOKEN, ElmoCharacterIds

logger = logging.getLogger(__name__)


_MULTIPLIERS: Dict[Tuple[int, torch.device], torch.Tensor] = {}


def row_keys(character_ids: torch.Tensor) -> torch.Tensor:
    """One int64 key per row of ``(..., max_characters)`` character ids: equal rows get equal keys,
    different rows almost surely different ones (callers compare the rows of equal keys)."""
    num_chars = character_ids.size(-1)
    key = (num_chars, character_ids.device)
    if key not in _MULTIPLIERS:
        # Fixed odd multipliers below 2**31: ids are < 263 (bilm-tf) or below a few hundred
        # thousand (ELMoForManyLangs' character and word ids) and rows are short, so the sum
        # stays inside int64 (and an overflow would only wrap, costing a recomputation).
        generator = torch.Generator().manual_seed(20180215)
        multipliers = torch.randint(1, 2**31 - 1, (num_chars,), generator=generator) | 1
        _MULTIPLIERS[key] = multipliers.to(character_ids.device)
    return (character_ids * _MULTIPLIERS[key]).sum(dim=-1)


def unique_rows(character_ids: torch.Tensor) -> Optional[Tuple[torch.Tensor, torch.Tensor]]:
    """
    ``(unique, inverse)`` with ``unique[inverse] == character_ids`` for ``(n, max_characters)``
    ids (faster than ``torch.unique(dim=0)``), or None with no repeats or a key collision.
    """
    keys = row_keys(character_ids)
    unique_keys, inverse = torch.unique(keys, return_inverse=True)
    if unique_keys.numel() == keys.numel():
        return None
    representative = torch.empty_like(unique_keys).scatter_(
        0, inverse, torch.arange(keys.numel(), device=keys.device)
    )
    unique = character_ids[representative]
    if not torch.equal(unique[inverse], character_ids):
        return None
    return unique, inverse


def _encode_all(encoder: torch.nn.Module, ids: torch.Tensor, batch_size: int) -> Optional[torch.Tensor]:
    """``encoder`` over ``ids`` in evaluation mode and batches, without gradients; None for no ids."""
    device = next(encoder.parameters()).device
    was_training = encoder.training
    encoder.eval()
    with torch.no_grad():
        vectors = [encoder(ids[start : start + batch_size].to(device)) for start in range(0, len(ids), batch_size)]
    encoder.train(was_training)
    return torch.cat(vectors) if vectors else None


class TokenEncodingCache(torch.nn.Module):
    """
    The character encoder's vector of every token of a list, so a frozen encoder runs only on
    other tokens; looked up by character ids alone (a row's key by binary search, the hit confirmed
    on the whole row: a collision costs a recomputation, never a wrong vector).

    # Parameters

    character_ids : `torch.LongTensor`
        ``(num_tokens, max_characters_per_token)`` ids of the cached tokens (+1-shifted).
    vectors : `torch.Tensor`
        ``(num_tokens, dim)``: the encoder's output for them.
    """

    def __init__(self, character_ids: torch.Tensor, vectors: torch.Tensor) -> None:
        super().__init__()
        keys = row_keys(character_ids)
        order = torch.argsort(keys)
        self.register_buffer("_keys", keys[order], persistent=False)
        self.register_buffer("_character_ids", character_ids[order], persistent=False)
        self.register_buffer("_vectors", vectors[order].detach(), persistent=False)

    @classmethod
    def build(
        cls,
        tokens: Iterable[str],
        character_ids: ElmoCharacterIds,
        encoder: torch.nn.Module,
        batch_size: int = 1024,
    ) -> "TokenEncodingCache":
        """
        Encodes ``tokens`` (duplicates and empty strings dropped) with ``encoder``; the sentence
        boundaries ``<S>`` and ``</S>``, which every sentence has, are always cached.
        """
        unique: List[str] = list(
            dict.fromkeys([BOS_TOKEN, EOS_TOKEN] + [token for token in tokens if token])
        )
        ids = torch.tensor(
            [character_ids.token_to_ids(token) for token in unique], dtype=torch.long
        ).reshape(len(unique), -1)
        vectors = _encode_all(encoder, ids, batch_size)
        logger.info("Cached the character encoder's output for %d tokens", len(unique))
        return cls(ids, vectors.cpu()).to(vectors.device)

    def recompute_(self, encoder: torch.nn.Module, batch_size: int = 1024) -> None:
        """Encodes the cached tokens again, after new weights were loaded into ``encoder``."""
        vectors = _encode_all(encoder, self._character_ids, batch_size)
        if vectors is not None:
            self._vectors = vectors.to(self._vectors)

    def __len__(self) -> int:
        return self._keys.numel()

    def lookup(self, character_ids: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor]:
        """``(found, vectors)`` of ``(n, max_characters_per_token)`` ids: a bool ``(n,)`` and the
        cached vectors of the found rows, in order."""
        if len(self) == 0:
            return character_ids.new_zeros(character_ids.size(0), dtype=torch.bool), self._vectors
        keys = row_keys(character_ids)
        position = torch.searchsorted(self._keys, keys).clamp_(max=len(self) - 1)
        found = (self._keys[position] == keys) & (
            self._character_ids[position] == character_ids
        ).all(dim=-1)
        return found, self._vectors[position[found]]
