"""
Embedding throughput of elmo_plugin's biLM against AllenNLP core's ``_ElmoBiLm`` (the module
behind ``allennlp.modules.elmo.Elmo``), side by side in one process on the same bilm-tf weights
and the same batches, with a check that both give the same vectors.

    .venv/bin/python benchmarks/embedding_throughput.py [--sizes tiny small original]
        [--batch-sizes 1 64] [--repeats 3] [--tokens-per-sentence 20] [--device cpu|cuda]

Random weights are fine for speed. Sentences are real English text from
``../shared/data/en/lm/heldout.txt``, cut to a fixed length so both sides do the same work
(``--tokens-per-sentence 0``: consecutive sentences at their own lengths, padding included).
Each (size, batch size) row times the two implementations alternately, ``--repeats`` times, and
reports the median.
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
from elmo_plugin.modules.bilm import ElmoBiLm
from elmo_plugin.data.character_ids import batch_to_ids

def time_call(function, device: torch.device) -> float:
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    start = time.perf_counter()
    with torch.no_grad():
        function()
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", nargs="+", default=["tiny", "small", "original"])
    parser.add_argument("--batch-sizes", nargs="+", type=int, default=[1, 64])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--tokens-per-sentence", type=int, default=20)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--threads", type=int, default=0,
                        help="intra-op threads (torch.set_num_threads); 0: torch's default")
    args = parser.parse_args()
    if args.threads > 0:
        torch.set_num_threads(args.threads)
    device = torch.device(args.device)
    torch.manual_seed(0)
    print(f"# {describe_run(device)}")
    print("| size | batch | ours tokens/s | AllenNLP tokens/s | ratio | max abs diff |")
    print("|---|---:|---:|---:|---:|---:|")
    for size in args.sizes:
        with tempfile.TemporaryDirectory() as directory:
            options_file, weight_file = write_random_bilm(size, directory)
            ours = ElmoBiLm.from_files(options_file, weight_file).eval().to(device)
            theirs = _ElmoBiLm(options_file, weight_file).eval().to(device)
        for batch_size in args.batch_sizes:
            ids = batch_to_ids(load_sentences(batch_size, args.tokens_per_sentence)).to(device)
            tokens = int((ids > 0).any(-1).sum())

            def run_theirs():
                theirs._elmo_lstm.reset_states()  # stateless, like ours
                return theirs(ids)

            with torch.no_grad():  # warm-up, and the agreement check
                a = ours(ids)["activations"]
                b = run_theirs()["activations"]
                diff = max(float((x - y).abs().max()) for x, y in zip(a, b))
            ours_times, theirs_times = [], []
            for _ in range(args.repeats):
                ours_times.append(time_call(lambda: ours(ids), device))
                theirs_times.append(time_call(run_theirs, device))
            ours_rate = tokens / statistics.median(ours_times)
            theirs_rate = tokens / statistics.median(theirs_times)
            print(f"| {size} | {batch_size} | {ours_rate:,.0f} | {theirs_rate:,.0f} | "
                  f"{ours_rate / theirs_rate:.2f}x | {diff:.1e} |", flush=True)


if __name__ == "__main__":
    sys.exit(main())
