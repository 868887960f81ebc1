"""
Embedding throughput of elmo_plugin's biLM against AllenNLP core's ``_ElmoBiLm`` (the module
behind ``allennlp.modules.elmo.Elmo``), side by side in one process on the same bilm-tf weights
and the same batches, with a check that both give the same vectors.

    .venv/bin/python benchmarks/embedding_throughput.py [--sizes tiny small original]
        [--batch-sizes 1 64] [--repeats 3] [--tokens-per-sentence 20]

Random weights are fine for speed. Sentences are real English text from
``../shared/data/en/lm/heldout.txt``, cut to a fixed length so both sides do the same work.
Each (size, batch size) row times the two implementations alternately, ``--repeats`` times, and
reports the median.
"""
import argparse
import os
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Dict, List

import torch

from allennlp.modules.elmo import _ElmoBiLm

from elmo_plugin.bilm import ElmoBiLm
from elmo_plugin.bilm_tf_weights import write_bilm_tf_model
from elmo_plugin.character_ids import batch_to_ids
from elmo_plugin.options import BilmOptions

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


def load_sentences(count: int, length: int) -> List[List[str]]:
    sentences = []
    with open(DATA, encoding="utf-8") as handle:
        for line in handle:
            tokens = line.split()
            if len(tokens) >= length:
                sentences.append(tokens[:length])
            if len(sentences) == count:
                break
    return sentences


def time_call(function) -> float:
    start = time.perf_counter()
    with torch.no_grad():
        function()
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", nargs="+", default=["tiny", "small", "original"])
    parser.add_argument("--batch-sizes", nargs="+", type=int, default=[1, 64])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--tokens-per-sentence", type=int, default=20)
    args = parser.parse_args()
    torch.manual_seed(0)
    print(f"# {platform.node()} {platform.processor() or platform.machine()}, "
          f"torch {torch.__version__}, {torch.get_num_threads()} threads, "
          f"{time.strftime('%Y-%m-%d')}")
    print("| size | batch | ours tokens/s | AllenNLP tokens/s | ratio | max abs diff |")
    print("|---|---:|---:|---:|---:|---:|")
    for size in args.sizes:
        with tempfile.TemporaryDirectory() as directory:
            options_file = os.path.join(directory, "options.json")
            weight_file = os.path.join(directory, "weights.hdf5")
            write_bilm_tf_model(
                ElmoBiLm(BilmOptions.from_dict(options_for(size))), options_file, weight_file
            )
            ours = ElmoBiLm.from_files(options_file, weight_file).eval()
            theirs = _ElmoBiLm(options_file, weight_file).eval()
        for batch_size in args.batch_sizes:
            ids = batch_to_ids(load_sentences(batch_size, args.tokens_per_sentence))
            tokens = batch_size * args.tokens_per_sentence

            def run_theirs():
                theirs._elmo_lstm.reset_states()  # stateless, like ours
                return theirs(ids)

            with torch.no_grad():  # warm-up, and the agreement check
                a = ours(ids)["activations"]
                b = run_theirs()["activations"]
                diff = max(float((x - y).abs().max()) for x, y in zip(a, b))
            ours_times, theirs_times = [], []
            for _ in range(args.repeats):
                ours_times.append(time_call(lambda: ours(ids)))
                theirs_times.append(time_call(run_theirs))
            ours_rate = tokens / statistics.median(ours_times)
            theirs_rate = tokens / statistics.median(theirs_times)
            print(f"| {size} | {batch_size} | {ours_rate:,.0f} | {theirs_rate:,.0f} | "
                  f"{ours_rate / theirs_rate:.2f}x | {diff:.1e} |", flush=True)


if __name__ == "__main__":
    sys.exit(main())
