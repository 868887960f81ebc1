"""
Frozen weights' copies in another dtype or layout, kept between calls (autocast's cache lasts one
``with`` block), made again when the weight's storage or version changes; kept by the weight's
identity, not on the modules: never in a state dict or a pickle, and gone with the weight.
"""
import weakref
from typing import Dict, Tuple

import torch

# id(weight) -> {(dtype, transposed): ((data_ptr, version), copy)}. An entry is removed when its
# weight is garbage collected (weakref.finalize), before the id can be reused.
_KEPT: Dict[int, Dict[Tuple[torch.dtype, bool], Tuple[Tuple[int, int], torch.Tensor]]] = {}


def kept_copy(weight: torch.Tensor, dtype: torch.dtype, transposed: bool = False) -> torch.Tensor:
    """``weight.to(dtype)`` (``transposed``: of its transpose, contiguous), kept while the weight is
    unchanged; made without autograd, so only for weights no gradient is asked of."""
    kept = _KEPT.get(id(weight))
    if kept is None:
        kept = _KEPT[id(weight)] = {}
        weakref.finalize(weight, _KEPT.pop, id(weight), None)
    key = (dtype, transposed)
    stamp = (weight.data_ptr(), weight._version)
    entry = kept.get(key)
    if entry is None or entry[0] != stamp:
        kept.pop(key, None)  # free the old copy before making the new one
        with torch.no_grad():
            source = weight.t() if transposed else weight
            entry = (stamp, source.to(dtype, memory_format=torch.contiguous_format))
        kept[key] = entry
    return entry[1]


def number_of_kept_copies(weight: torch.Tensor) -> int:
    """How many copies of ``weight`` are kept (for tests)."""
    return len(_KEPT.get(id(weight), {}))
