"""
Sentence vectors: one vector per sentence, the mean over its tokens of the chosen output (TF-Hub's
``default``), computed on the float32 token vectors that the other outputs store.
"""
import numpy as np


def token_mean(array: np.ndarray) -> np.ndarray:
    """The mean over the token axis (the second to last) of one sentence's float32 array; zeros
    for a sentence without tokens (only the Python API can ask for one)."""
    if array.shape[-2] == 0:
        return np.zeros(array.shape[:-2] + array.shape[-1:], dtype=array.dtype)
    return array.mean(axis=-2, dtype=np.float32).astype(array.dtype, copy=False)
