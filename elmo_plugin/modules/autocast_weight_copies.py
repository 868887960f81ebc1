"""
Frozen weights' copies in autocast's dtype, kept between calls.

Under autocast (bfloat16 inference, `precision.InferencePrecision`) every product converts its
float32 weight to bfloat16 on every call: autocast's own cache keeps a converted weight only
for the rest of one ``with torch.autocast`` block, and only for weights that require a
gradient. For a frozen biLM that is the same conversion on every call: on a 2-core AMX Xeon, 4%
of an Original batch of 64 for the LSTM's weights and about 1% more for the highway's (BENCHMARKS.md,
issue 28), and a larger share of a one-sentence call. `AutocastWeightCopies` makes the copies
once and keeps them while the weights stay as they are.

A copy is the same bits as autocast's own conversion (``tensor.to(dtype)``), so keeping it
changes nothing in the results. It is made again when a weight changes: its storage (``.to``,
``.cuda``, a new ``Parameter``) or its version (every in-place write, ``load_state_dict``
included). The copies live in a plain attribute, not a buffer, so they are never in a state
dict; they take half the float32 weights' memory for bfloat16, for as long as their module lives.
"""
from typing import List, Optional, Sequence, Tuple

import torch


class AutocastWeightCopies:
    """
    The copies of one module's weights in autocast's dtype (see the module's docstring).

    A module keeps one of these per group of weights it multiplies together, and asks it on each
    call with `get`.
    """

    def __init__(self) -> None:
        # (key, copies): the weights' dtype, storages and versions when the copies were made.
        self._kept: Optional[Tuple[tuple, Tuple[torch.Tensor, ...]]] = None

    def get(
        self,
        weights: Sequence[torch.Tensor],
        dtype: torch.dtype,
        frozen: bool,
        transposed: bool = False,
    ) -> Tuple[torch.Tensor, ...]:
        """
        ``weights`` in ``dtype``: the kept copies if ``frozen`` (no gradient will flow to them)
        and the weights are unchanged since they were made, else new ones. Not ``frozen``: new
        conversions every call, which carry the gradient back to the weights, and nothing kept.
        ``transposed``: copies of the 2-d weights' transposes, each laid out contiguously (the
        same values: the product kernels that read them differ, see `_run_inference` in
        `projected_lstm_recurrence`).
        """
        if not frozen:
            return tuple(_converted(weight, dtype, transposed) for weight in weights)
        key = (dtype, transposed) + tuple(
            (weight.data_ptr(), weight._version) for weight in weights
        )
        if self._kept is None or self._kept[0] != key:
            self._kept = None  # free the old copies before making the new ones
            with torch.no_grad():
                copies = tuple(_converted(weight, dtype, transposed) for weight in weights)
            self._kept = (key, copies)
        return self._kept[1]

    def __getstate__(self) -> dict:
        # Pickling or deep-copying a module (``torch.save(model)``, ``copy.deepcopy``) leaves
        # the copies behind: the new module makes its own from its own weights.
        return {"_kept": None}


def _converted(weight: torch.Tensor, dtype: torch.dtype, transposed: bool) -> torch.Tensor:
    if not transposed:
        return weight.to(dtype)
    return weight.t().to(dtype, memory_format=torch.contiguous_format)


def frozen_autocast_weights(
    weights: List[torch.Tensor], copies: AutocastWeightCopies, inputs: torch.Tensor
) -> Optional[Tuple[torch.Tensor, ...]]:
    """
    ``weights`` in autocast's dtype, kept in ``copies`` between calls, when ``inputs``' device
    runs under autocast and the weights are frozen (no gradient will be asked of them); None
    otherwise, where the caller multiplies by the weights themselves (and autocast, if on,
    converts them as usual).
    """
    device_type = inputs.device.type
    if not torch.is_autocast_enabled(device_type) or (
        torch.is_grad_enabled() and any(weight.requires_grad for weight in weights)
    ):
        return None
    return copies.get(weights, torch.get_autocast_dtype(device_type), frozen=True)


def keep_copies_after_unpickling(module: torch.nn.Module, name: str) -> None:
    """
    For a module's ``__setstate__``: a module pickled whole (``torch.save(model)``) by a version
    of this plugin before its `AutocastWeightCopies` existed gets an empty one under ``name``, so
    that it still runs.
    """
    if name not in module.__dict__:
        module.__dict__[name] = AutocastWeightCopies()
