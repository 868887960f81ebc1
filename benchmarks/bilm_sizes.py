"""
What the speed benchmarks share: the three biLM sizes, random weights in the bilm-tf layout,
real English sentences cut to a fixed length, and the ``--allocator`` option.
"""
import argparse
import os
from pathlib import Path
from typing import Dict, List, Tuple

from elmo_plugin.common.memory import keep_freed_memory_for_reuse
from elmo_plugin.model_files.bilm_tf.directory import write_bilm_tf_directory
from elmo_plugin.model_files.bilm_tf.options import BilmOptions
from elmo_plugin.modules.bilm import ElmoBiLm

FILTERS_2048 = [[1, 32], [2, 32], [3, 64], [4, 128], [5, 256], [6, 512], [7, 1024]]
SIZES: Dict[str, dict] = {
    # The golden fixture's architecture.
    "tiny": dict(filters=[[1, 4], [2, 8], [3, 16], [4, 32], [5, 64]], char_dim=4, n_highway=2,
                 dim=64, projection_dim=16),
    # ELMo Small (2x1024_128_2048cnn_1xhighway) and Original (2x4096_512_2048cnn_2xhighway).
    "small": dict(filters=FILTERS_2048, char_dim=16, n_highway=1, dim=1024, projection_dim=128),
    "original": dict(filters=FILTERS_2048, char_dim=16, n_highway=2, dim=4096, projection_dim=512),
}
DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "en" / "lm" / "heldout.txt"


def options_for(size: str) -> dict:
    arch = SIZES[size]
    return {
        "bidirectional": True,
        "char_cnn": {"activation": "relu", "embedding": {"dim": arch["char_dim"]},
                     "filters": arch["filters"], "max_characters_per_token": 50,
                     "n_characters": 262, "n_highway": arch["n_highway"]},
        "lstm": {"cell_clip": 3, "dim": arch["dim"], "n_layers": 2, "proj_clip": 3,
                 "projection_dim": arch["projection_dim"], "use_skip_connections": True},
    }


def write_random_bilm(size: str, directory: str) -> Tuple[str, str]:
    """Random weights of ``size`` as bilm-tf ``options.json`` + ``weights.hdf5`` in ``directory``."""
    bilm = ElmoBiLm(BilmOptions.from_dict(options_for(size)))
    written = write_bilm_tf_directory(os.path.join(directory, size), bilm.options, bilm.state_dict())
    return written["options"], written["weights"]


def load_sentences(count: int, length: int, skip: int = 0, path: Path = DATA) -> List[List[str]]:
    """
    ``count`` sentences of at least ``length`` tokens from the held-out file (or ``path``: one
    tokenized sentence per line), cut to ``length``; with ``length`` 0, ``count`` consecutive
    non-empty sentences at their own lengths (real padding).
    """
    sentences = []
    with open(path, encoding="utf-8") as handle:
        for line in handle:
            tokens = line.split()
            if len(tokens) >= max(length, 1):
                if skip > 0:
                    skip -= 1
                    continue
                sentences.append(tokens[:length] if length > 0 else tokens)
            if len(sentences) == count:
                break
    return sentences


def add_allocator_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--allocator", choices=["default", "keep"], default="default",
        help="keep: the malloc settings of the training configs' keep_freed_memory callback "
             "(process-wide, so for both sides)",
    )


def apply_allocator_option(args: argparse.Namespace) -> None:
    if args.allocator == "keep" and not keep_freed_memory_for_reuse():
        raise SystemExit("--allocator keep needs glibc")
