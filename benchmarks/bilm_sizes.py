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
# The training corpus (5.0M tokens in 3 files): what the training benchmarks draw batches from.
TRAINING_CORPUS = DATA.parent / "train"


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
    ``count`` sentences of at least ``length`` tokens from the held-out file (or ``path``: a
    file of one tokenized sentence per line, or a directory of such files, read in name order),
    cut to ``length``; with ``length`` 0, ``count`` consecutive non-empty sentences at their own
    lengths (real padding). A corpus that holds fewer is refused (`SystemExit` with the counts):
    a short batch would be timed as if it were full.
    """
    path = Path(path)
    files = sorted(path.glob("*.txt")) if path.is_dir() else [path]
    sentences: List[List[str]] = []
    wanted = max(length, 1)
    available = 0
    for file in files:
        with open(file, encoding="utf-8") as handle:
            for line in handle:
                tokens = line.split()
                if len(tokens) < wanted:
                    continue
                available += 1
                if available <= skip:
                    continue
                sentences.append(tokens[:length] if length > 0 else tokens)
                if len(sentences) == count:
                    return sentences
    needed = f"{skip + count:,} are needed" + (f" ({count:,} after skipping {skip:,})" if skip else "")
    raise SystemExit(
        f"{path} holds {available:,} sentence(s) of at least {wanted} token(s); {needed}: a short "
        "batch would be timed as a full one. Ask for fewer steps or a smaller batch, or give a "
        "larger corpus."
    )


def load_batches(num_batches: int, batch_size: int, length: int,
                 path: Path = TRAINING_CORPUS) -> List[List[List[str]]]:
    """``num_batches`` full batches of ``batch_size`` distinct sentences (`load_sentences`)."""
    sentences = load_sentences(num_batches * batch_size, length, path=path)
    return [sentences[k * batch_size : (k + 1) * batch_size] for k in range(num_batches)]


def add_allocator_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--allocator", choices=["default", "keep"], default="default",
        help="keep: the malloc settings of the training configs' keep_freed_memory callback "
             "(process-wide, so for both sides)",
    )


def apply_allocator_option(args: argparse.Namespace) -> None:
    if args.allocator == "keep" and not keep_freed_memory_for_reuse():
        raise SystemExit("--allocator keep needs glibc")
