"""
Sentence vectors: one vector per sentence, the mean over its tokens of the chosen output
(``--all``: one per layer). This is what TF-Hub's ELMo module returns as ``default`` and
simple_elmo as ``get_elmo_vector_average``; ELMo's authors report that the plain average works
well as a sentence representation. Computed on the float32 token vectors the other outputs
store, so that a sentence vector equals the mean of the same run's token vectors up to float32
rounding (and bit for bit across runs whose batches are the same, a sharded run's included).
"""
import numpy as np


def token_mean(array: np.ndarray) -> np.ndarray:
    """
    The mean over the token axis (the second to last) of one sentence's float32 array:
    ``(num_layers, num_tokens, dim)`` gives ``(num_layers, dim)``, ``(num_tokens, dim)`` gives
    ``(dim,)``. A sentence without tokens gives zeros (there is nothing to average; an input
    file has no empty lines, so only the Python API can ask for it).
    """
    if array.shape[-2] == 0:
        return np.zeros(array.shape[:-2] + array.shape[-1:], dtype=array.dtype)
    return array.mean(axis=-2, dtype=np.float32).astype(array.dtype, copy=False)
