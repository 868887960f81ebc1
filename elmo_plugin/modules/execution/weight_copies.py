"""
Frozen weights' copies in another dtype (autocast's) or layout, kept between calls.

Where a plan's products are bfloat16 (`plan.ExecutionPlan`: bfloat16 inference), every product
would convert its float32 weight to bfloat16 on every call (autocast's own cache keeps a
converted weight only for the rest of one ``with torch.autocast`` block, and only for weights
that require a gradient). For a frozen biLM that is the same conversion on every call (a few
percent of a call, docs/implementation.md), so `kept_copy` makes it once.

A copy is the same bits as the conversion (``weight.to(dtype)``, what autocast does too), so
keeping it changes nothing in the results. It is made again when the weight changes: its storage (``.to``,
``.cuda``, a new ``Parameter``) or its version (every in-place write, ``load_state_dict``
included). The copies are kept here, by the identity of the weight, not on the modules: they are
never in a state dict or a pickle, and they go when the weight goes.
"""
import weakref
from typing import Dict, Tuple

import torch

# id(weight) -> {(dtype, transposed): ((data_ptr, version), copy)}. An entry is removed when its
# weight is garbage collected (weakref.finalize), before the id can be reused.
_KEPT: Dict[int, Dict[Tuple[torch.dtype, bool], Tuple[Tuple[int, int], torch.Tensor]]] = {}


def kept_copy(weight: torch.Tensor, dtype: torch.dtype, transposed: bool = False) -> torch.Tensor:
    """
    ``weight.to(dtype)`` (``transposed``: of the 2-d weight's transpose, laid out contiguously),
    made once and kept while the weight is unchanged. Only for weights no gradient will be asked
    of: the copy is made without autograd.
    """
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
