"""
Batch 1 (one sentence per call), where per-call and per-step overhead decides the speed: ours
against AllenNLP core's ``_ElmoBiLm`` and against ours with the paths that issue 28 replaced,
in one process, the three calls one after another in every round, so that each round's ratios
compare calls made under the same load (on a machine whose cores other jobs share, the load
moves the absolute times by 2-3x within minutes).

    .venv/bin/python benchmarks/embedding_batch1.py [--sizes small original] [--rounds 30]
        [--tokens-per-sentence 20] [--threads 1] [--clock cpu|wall] [--batch-size 1]

(``--batch-size 64`` checks that the changes cost nothing at large batches.)

"before" is ours with the three changes of issue 28 switched off in the same process: the
LSTM's inference steps run by the training loop (`_run_stepwise`, as before the inference loop
of its own), the character convolutions in one chunk for all token lengths
(``CHUNK_LENGTH_RATIO`` unbounded), and the highway layers through ``nn.Linear`` (not oneDNN:
``small_batch_linear.MAX_ROWS = 0``): the code of the session before. Reports
the median of each side's per-call time, and the median and quartiles of the per-round ratios.
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
from elmo_plugin.modules import character_encoder, projected_lstm_recurrence, small_batch_linear
from elmo_plugin.modules.bilm import ElmoBiLm

CLOCKS = {"wall": time.perf_counter, "cpu": time.process_time}


def _stepwise_inference(*arguments, few_rows_weights=None):
    """`_run_inference`'s arguments, run by the training loop (float32: no few-row weights)."""
    assert few_rows_weights is None
    return projected_lstm_recurrence._run_stepwise(*arguments, keep_for_backward=False)


class Before:
    """Switches ours to the paths issue 28 replaced, for the ``with`` block."""

    def __enter__(self) -> "Before":
        self.ratio = character_encoder.CHUNK_LENGTH_RATIO
        self.inference = projected_lstm_recurrence._run_inference
        self.max_rows = small_batch_linear.MAX_ROWS
        small_batch_linear.MAX_ROWS = 0
        character_encoder.CHUNK_LENGTH_RATIO = 10**6
        projected_lstm_recurrence._run_inference = _stepwise_inference
        return self

    def __exit__(self, *exc) -> None:
        character_encoder.CHUNK_LENGTH_RATIO = self.ratio
        projected_lstm_recurrence._run_inference = self.inference
        small_batch_linear.MAX_ROWS = self.max_rows


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
    print("| size | ours ms | before ms | AllenNLP ms | AllenNLP / ours (quartiles) | "
          "AllenNLP / before (quartiles) | before / ours |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    ids = batch_to_ids(load_sentences(args.batch_size, args.tokens_per_sentence))
    for size in args.sizes:
        with tempfile.TemporaryDirectory() as directory:
            options_file, weight_file = write_random_bilm(size, directory)
            ours = ElmoBiLm.from_files(options_file, weight_file).eval()
            theirs = _ElmoBiLm(options_file, weight_file).eval()

        def run_theirs():
            theirs._elmo_lstm.reset_states()
            return theirs(ids)

        def run_before():
            with Before():
                return ours(ids)

        def timed(function) -> float:
            start = clock()
            function()
            return clock() - start

        with torch.no_grad():
            expected = [layer.clone() for layer in ours(ids)["activations"]]
            for got in (run_before()["activations"], run_theirs()["activations"]):
                difference = max(float((a - b).abs().max()) for a, b in zip(expected, got))
                assert difference < 1e-5, difference
            times = {"ours": [], "before": [], "AllenNLP": []}
            for _ in range(args.rounds):
                times["ours"].append(timed(lambda: ours(ids)))
                times["before"].append(timed(run_before))
                times["AllenNLP"].append(timed(run_theirs))

        def quartiles(numerator: str, denominator: str) -> str:
            ratios = [a / b for a, b in zip(times[numerator], times[denominator])]
            low, middle, high = statistics.quantiles(ratios, n=4)
            return f"{middle:.2f}x ({low:.2f}-{high:.2f})"

        medians = {name: 1000 * statistics.median(values) for name, values in times.items()}
        print(f"| {size} | {medians['ours']:.1f} | {medians['before']:.1f} | "
              f"{medians['AllenNLP']:.1f} | {quartiles('AllenNLP', 'ours')} | "
              f"{quartiles('AllenNLP', 'before')} | {quartiles('before', 'ours')} |", flush=True)


if __name__ == "__main__":
    sys.exit(main())
