"""
Batch 1 (one sentence per call), where per-call and per-step overhead decides the speed: ours
against AllenNLP core's ``_ElmoBiLm`` in one process, the two calls one after another in every
round, so that each round's ratio compares calls made under the same load (on a machine whose
cores other jobs share, the load moves the absolute times by 2-3x within minutes).

    .venv/bin/python benchmarks/embedding_batch1.py [--sizes small original] [--rounds 30]
        [--tokens-per-sentence 20] [--threads 1] [--clock cpu|wall] [--batch-size 1]

Reports the median of each side's per-call time, and the median and quartiles of the per-round
ratios.
Random weights (speed does not depend on them); the same real English sentence on every side.
"""
import argparse
import statistics
import sys
import tempfile
import time

import torch
from allennlp.modules.elmo import _ElmoBiLm
from bilm_sizes import load_sentences, write_random_bilm

from elmo_plugin.common.hardware import describe_run
from elmo_plugin.data.character_ids import batch_to_ids
from elmo_plugin.modules.bilm import ElmoBiLm

CLOCKS = {"wall": time.perf_counter, "cpu": time.process_time}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", nargs="+", default=["small", "original"])
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--tokens-per-sentence", type=int, default=20)
    parser.add_argument("--batch-size", type=int, default=1)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--clock", choices=sorted(CLOCKS), default="cpu")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    clock = CLOCKS[args.clock]
    torch.manual_seed(0)
    print(f"# {describe_run()}; {args.clock} clock; batch {args.batch_size} x "
          f"{args.tokens_per_sentence or 'natural'} tokens, "
          f"{args.rounds} rounds")
    print("| size | ours ms | AllenNLP ms | AllenNLP / ours (quartiles) |")
    print("|---|---:|---:|---:|")
    ids = batch_to_ids(load_sentences(args.batch_size, args.tokens_per_sentence))
    for size in args.sizes:
        with tempfile.TemporaryDirectory() as directory:
            options_file, weight_file = write_random_bilm(size, directory)
            ours = ElmoBiLm.from_files(options_file, weight_file).eval()
            theirs = _ElmoBiLm(options_file, weight_file).eval()

        def run_theirs():
            theirs._elmo_lstm.reset_states()
            return theirs(ids)

        def timed(function) -> float:
            start = clock()
            function()
            return clock() - start

        with torch.no_grad():
            expected = [layer.clone() for layer in ours(ids)["activations"]]
            got = run_theirs()["activations"]
            difference = max(float((a - b).abs().max()) for a, b in zip(expected, got))
            assert difference < 1e-5, difference
            times = {"ours": [], "AllenNLP": []}
            for _ in range(args.rounds):
                times["ours"].append(timed(lambda: ours(ids)))
                times["AllenNLP"].append(timed(run_theirs))

        def quartiles(numerator: str, denominator: str) -> str:
            ratios = [a / b for a, b in zip(times[numerator], times[denominator])]
            low, middle, high = statistics.quantiles(ratios, n=4)
            return f"{middle:.2f}x ({low:.2f}-{high:.2f})"

        medians = {name: 1000 * statistics.median(values) for name, values in times.items()}
        print(f"| {size} | {medians['ours']:.1f} | {medians['AllenNLP']:.1f} | "
              f"{quartiles('AllenNLP', 'ours')} |", flush=True)


if __name__ == "__main__":
    sys.exit(main())
