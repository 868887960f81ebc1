"""
What a shard's reuse is keyed by: the input's bytes, the model's parameters and the options that
change the stored vectors.
"""
import hashlib
import json
from typing import Any, Dict

import torch

# Bumped when what a shard holds changes meaning, so that older shards are never reused.
SHARD_FORMAT_VERSION = 1


def model_digest(module: torch.nn.Module) -> str:
    """SHA-256 of a module's parameters and buffers (names, types, shapes and values): the
    model as it computes, however it was named or stored (a path, a published name, an
    archive)."""
    digest = hashlib.sha256()
    for name, tensor in sorted(module.state_dict().items()):
        data = tensor.detach().cpu().contiguous().reshape(-1)
        digest.update(f"{name}:{data.dtype}:{tuple(data.shape)};".encode())
        digest.update(data.view(torch.uint8).numpy().tobytes() if data.numel() else b"")
    return digest.hexdigest()


def job_fingerprint(input_hash: str, model_hash: str, options: Dict[str, Any]) -> str:
    """The key of a run's shards: the input's hash, the model's digest and ``options`` (the
    settings that change the vectors: output format, layout, storage type, batch size,
    precision ...)."""
    key = {
        "version": SHARD_FORMAT_VERSION,
        "input": input_hash,
        "model": model_hash,
        "options": options,
    }
    return hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()
