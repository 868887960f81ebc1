"""
Embedding throughput of elmo_plugin's biLM against AllenNLP core's ``_ElmoBiLm`` (the module
behind ``allennlp.modules.elmo.Elmo``), side by side in one process on the same bilm-tf weights
and the same batches, with a check that both give the same vectors.

    .venv/bin/python benchmarks/embedding_throughput.py [--sizes tiny small original]
        [--batch-sizes 1 64] [--repeats 3] [--tokens-per-sentence 20] [--device cpu|cuda]
        [--threads N] [--clock wall|cpu] [--precision float32|bfloat16] [--compile MODE]
        [--tf32]

``--precision bfloat16`` times a third side in the same run: ours with ``precision="bfloat16"``
(`elmo_plugin.modules.precision`), against our float32 and AllenNLP's (float32), and reports
how far its vectors are from our float32 ones (largest absolute difference over all layers, and
the top layer's mean cosine over tokens). It runs in bfloat16 whether or not the device has it
natively; the header says which, because emulated bfloat16 (a CPU without AVX512-BF16 or AMX)
is many times slower and its times are no measure of the option.

``--compile MODE``: our side's LSTM recurrence compiled in that torch.compile mode,
for batches whose rows all have one length (``--tokens-per-sentence`` N > 0; with 0 the batches
have padding and run eagerly); the first call of each shape compiles, in the warm-up. ``--tf32``:
float32 products in TF32 on a GPU, on every side.

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

from elmo_plugin.common.hardware import bfloat16_support, describe_run
from elmo_plugin.data.character_ids import batch_to_ids
from elmo_plugin.modules.bilm import ElmoBiLm
from elmo_plugin.modules.execution.plan import COMPILE_MODES, ExecutionPlan, float32_products
from elmo_plugin.modules.precision import run_bilm

# How calls are timed (``--clock``): wall-clock time, or the CPU time of this process (user and
# system, all its threads), which leaves out the time the process waits while other processes
# run on a shared machine's cores.
CLOCKS = {"wall": time.perf_counter, "cpu": time.process_time}
clock = CLOCKS["wall"]


def time_call(function, device: torch.device) -> float:
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    start = clock()
    with torch.no_grad():
        function()
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    return clock() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", nargs="+", default=["tiny", "small", "original"])
    parser.add_argument("--batch-sizes", nargs="+", type=int, default=[1, 64])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--tokens-per-sentence", type=int, default=20)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--threads", type=int, default=0,
                        help="intra-op threads (torch.set_num_threads); 0: torch's default")
    parser.add_argument("--precision", choices=["float32", "bfloat16"], default="float32",
                        help="bfloat16: also time ours in bfloat16 (see the module's doc)")
    parser.add_argument("--clock", choices=sorted(CLOCKS), default="wall",
                        help="cpu: the process's CPU time instead of wall-clock time, for a "
                        "machine whose cores other jobs share (use it with --threads 1: spinning "
                        "OpenMP threads count as CPU time)")
    parser.add_argument("--compile", default=None, choices=COMPILE_MODES,
                        help="our LSTM recurrence compiled in this mode (one-length batches)")
    parser.add_argument("--tf32", action="store_true", help="TF32 float32 products (GPU)")
    args = parser.parse_args()
    plan = ExecutionPlan.build(args.device, compile=args.compile or False, tf32=args.tf32)
    with float32_products(plan):  # on every side
        run(args, plan)


def run(args, plan: ExecutionPlan) -> None:
    global clock
    clock = CLOCKS[args.clock]
    if args.threads > 0:
        torch.set_num_threads(args.threads)
    device = torch.device(args.device)
    torch.manual_seed(0)
    bfloat16 = args.precision == "bfloat16"
    print(f"# {describe_run(device)}; {args.clock} clock; ours "
          f"{'compiled (' + args.compile + ')' if args.compile else 'eager'}"
          f"{'; TF32 products' if args.tf32 else ''}")
    if bfloat16:
        support = bfloat16_support(device)
        print(f"# bfloat16 {'native' if support.native else 'EMULATED (times are no measure)'}: "
              f"{support.reason}")
        print("| size | batch | ours bfloat16 tokens/s | ours float32 tokens/s | AllenNLP tokens/s "
              "| bfloat16 / our float32 | bfloat16 / AllenNLP | float32 / AllenNLP "
              "| bfloat16 max abs diff | top layer mean cosine |")
        print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    else:
        print("| size | batch | ours tokens/s | AllenNLP tokens/s | ratio | max abs diff |")
        print("|---|---:|---:|---:|---:|---:|")
    in_bfloat16 = ExecutionPlan(device, torch.bfloat16, plan.compile_mode, plan.tf32)
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
                a = ours(ids, execution=plan)["activations"]
                b = run_theirs()["activations"]
                diff = max(float((x - y).abs().max()) for x, y in zip(a, b))
            def run_bfloat16():
                return run_bilm(ours, ids, in_bfloat16)

            if bfloat16:
                with torch.no_grad():
                    c = run_bfloat16()
                    bfloat16_diff = max(float((x - y).abs().max()) for x, y in zip(a, c["activations"]))
                    mask = c["mask"]
                    cosine = torch.nn.functional.cosine_similarity(
                        a[-1][mask], c["activations"][-1][mask], dim=-1
                    ).mean()
            ours_times, theirs_times, bfloat16_times = [], [], []
            for _ in range(args.repeats):
                ours_times.append(time_call(lambda: ours(ids, execution=plan), device))
                theirs_times.append(time_call(run_theirs, device))
                if bfloat16:
                    bfloat16_times.append(time_call(run_bfloat16, device))
            ours_rate = tokens / statistics.median(ours_times)
            theirs_rate = tokens / statistics.median(theirs_times)
            if bfloat16:
                rate = tokens / statistics.median(bfloat16_times)
                print(f"| {size} | {batch_size} | {rate:,.0f} | {ours_rate:,.0f} | "
                      f"{theirs_rate:,.0f} | {rate / ours_rate:.2f}x | {rate / theirs_rate:.2f}x | "
                      f"{ours_rate / theirs_rate:.2f}x | {bfloat16_diff:.1e} | {float(cosine):.6f} |",
                      flush=True)
                continue
            print(f"| {size} | {batch_size} | {ours_rate:,.0f} | {theirs_rate:,.0f} | "
                  f"{ours_rate / theirs_rate:.2f}x | {diff:.1e} |", flush=True)


if __name__ == "__main__":
    sys.exit(main())
