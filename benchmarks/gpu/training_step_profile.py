"""
Where the time of a biLM training step goes on a GPU, and what cuDNN's LSTM would give for one
LSTM layer at inference.

    python3 benchmarks/gpu/training_step_profile.py [--size original] [--batch-size 128]
        [--tokens-per-sentence 20] [--num-samples 8192] [--vocabulary-size 100000] [--amp]
        [--tf32] [--compile MODE] [--softmax sparse|dense] [--no-cudnn] [--corpus DIR_OR_FILE]
        [--json FILE]

1. One training step of ours (as ``training_compiled.py`` times it: forward, the sampled
   softmax of both directions, backward, gradient clipping, Adagrad), on full batches of the
   training corpus, after two warm-up steps, under ``torch.profiler`` with CUDA activity: the
   step's wall time, the GPU's busy time (the sum of its kernels' durations) and its share of
   the wall time, the number of kernels launched, the host's waits for the device
   (``cudaStreamSynchronize``, ``cudaDeviceSynchronize``, copies between host and device, and the
   scalar reads ``aten::_local_scalar_dense``), and the kernels and CPU-side operators that take
   the most time. A step whose kernels keep the GPU busy a small part of its wall time is bound
   by launching them (Python and the CUDA launch path), not by arithmetic. ``--compile MODE``
   profiles the step with the LSTM recurrence compiled in that torch.compile mode (compiled in
   the warm-up steps), ``--tf32`` with float32 products in TF32.
2. One LSTM layer and direction at the size's shape, inference on the same batch: ours
   (`ProjectedLstmLayer`, with its cell and projection clipping) against cuDNN's
   ``torch.nn.LSTM(proj_size=...)`` (no clipping), timed alternately after warm-up, with CUDA
   synchronisation around each call. cuDNN computes a different function where a clip binds
   (``clip_binding.py`` says how often it does), so this says what such a path could gain, not
   that it is correct.
"""
import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

import torch
from torch.profiler import ProfilerActivity, profile

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/

from bilm_sizes import SIZES, TRAINING_CORPUS, load_batches, write_random_bilm  # noqa: E402
from training_compiled import make_step  # noqa: E402

from elmo_plugin.common.hardware import describe_run  # noqa: E402
from elmo_plugin.data.character_ids import batch_to_ids  # noqa: E402
from elmo_plugin.modules.bilm import ElmoBiLm  # noqa: E402
from elmo_plugin.modules.execution.plan import (  # noqa: E402
    COMPILE_MODES,
    ExecutionPlan,
    float32_products,
)
from elmo_plugin.modules.projected_lstm import ProjectedLstmLayer  # noqa: E402
from elmo_plugin.modules.sampled_softmax_loss import SampledSoftmaxLoss  # noqa: E402


def profile_training_step(args, device: torch.device) -> None:
    with tempfile.TemporaryDirectory() as directory:
        options_file, weight_file = write_random_bilm(args.size, directory)
        bilm = ElmoBiLm.from_files(options_file, weight_file, requires_grad=True).to(device)
    bilm.train()
    softmax = SampledSoftmaxLoss(args.vocabulary_size, SIZES[args.size]["projection_dim"],
                                 args.num_samples,
                                 sparse_gradients=args.softmax == "sparse").to(device)
    plan = ExecutionPlan.build(device, torch.bfloat16 if args.amp else None,
                               args.compile or False, args.tf32)
    step = make_step(bilm, softmax, lambda: None, plan)
    generator = torch.Generator(device=device).manual_seed(1)
    batches = []
    for sentences in load_batches(3, args.batch_size, args.tokens_per_sentence, args.corpus):
        ids = batch_to_ids(sentences).to(device)
        targets = torch.randint(3, args.vocabulary_size, ids.shape[:2], device=device)
        targets = torch.nn.functional.pad(targets, (1, 1), value=1)
        batches.append((ids, targets, softmax.sample(device, generator=generator)))
    for batch in batches[:2]:
        step(*batch)
    torch.cuda.synchronize(device)
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        start = time.perf_counter()
        step(*batches[2])
        torch.cuda.synchronize(device)
        wall = time.perf_counter() - start
    tokens = int((batches[2][0] > 0).any(-1).sum())
    events = prof.events()
    kernels = [e for e in events if e.device_type == torch.autograd.DeviceType.CUDA]
    busy = sum(e.device_time_total for e in kernels) / 1000.0  # ms
    waits = {name: sum(1 for e in events if e.name == name) for name in HOST_WAITS}
    print(f"\n## One training step, {args.size}, batch {args.batch_size} x "
          f"{args.tokens_per_sentence} tokens{', bfloat16 autocast' if args.amp else ''}"
          f"{', TF32' if args.tf32 else ''}"
          f"{', LSTM compiled (' + args.compile + ')' if args.compile else ', eager'}")
    print(f"- wall {1000 * wall:.1f} ms under the profiler ({tokens / wall:,.0f} tokens/s); GPU "
          f"busy {busy:.1f} ms ({100 * busy / (1000 * wall):.0f}% of the wall time); "
          f"{len(kernels):,} kernels ({1e6 * wall / max(len(kernels), 1):.1f} us of wall time "
          "per kernel)")
    print("- the host waited for the device: " + ", ".join(f"{count} {name}"
                                                          for name, count in waits.items()))
    if args.json:
        args.json.write_text(json.dumps(dict(
            size=args.size, batch_size=args.batch_size, tokens_per_sentence=args.tokens_per_sentence,
            precision="bfloat16" if args.amp else ("tf32" if args.tf32 else "float32"),
            side=f"compiled ({args.compile})" if args.compile else "eager", softmax=args.softmax,
            wall_ms=1000 * wall, gpu_busy_ms=busy, busy_share=busy / (1000 * wall),
            kernels=len(kernels), host_waits=waits, tokens_per_second=tokens / wall,
        ), indent=1) + "\n", encoding="utf-8")
    averages = prof.key_averages()
    print("\n| kernel or operator (by GPU time) | calls | GPU ms |")
    print("|---|---:|---:|")
    for event in sorted(averages, key=lambda e: -e.self_device_time_total)[:12]:
        print(f"| {event.key[:90]} | {event.count} | {event.self_device_time_total / 1000:.2f} |")
    print("\n| operator (by CPU time, self) | calls | CPU ms |")
    print("|---|---:|---:|")
    for event in sorted(averages, key=lambda e: -e.self_cpu_time_total)[:12]:
        print(f"| {event.key[:90]} | {event.count} | {event.self_cpu_time_total / 1000:.2f} |")


# The calls by which the host waits for the device: synchronisations, copies to the host, and
# the scalar reads (.item(), float(), bool()) that make them.
HOST_WAITS = ("cudaStreamSynchronize", "cudaDeviceSynchronize", "cudaMemcpy", "cudaMemcpyAsync",
              "aten::_local_scalar_dense")


def time_alternately(functions, repeats: int = 20):
    times = {name: [] for name in functions}
    for _ in range(repeats):
        for name, function in functions.items():
            torch.cuda.synchronize()
            start = time.perf_counter()
            function()
            torch.cuda.synchronize()
            times[name].append(time.perf_counter() - start)
    return {name: statistics.median(values) for name, values in times.items()}


def compare_with_cudnn(args, device: torch.device) -> None:
    size = SIZES[args.size]
    input_size, cell, projection = size["projection_dim"], size["dim"], size["projection_dim"]
    ours = ProjectedLstmLayer(input_size, cell, projection, cell_clip=3.0, proj_clip=3.0).to(device)
    cudnn = torch.nn.LSTM(input_size, cell, proj_size=projection, batch_first=True).to(device)
    print(f"\n## One LSTM layer and direction at inference ({input_size} -> {cell} cells -> "
          f"{projection}), ours against cuDNN's nn.LSTM(proj_size=...), median of 20")
    print("| batch | tokens per sentence | ours ms | cuDNN ms | ours / cuDNN |")
    print("|---:|---:|---:|---:|---:|")
    for batch_size in (64, 256):
        inputs = torch.randn(batch_size, args.tokens_per_sentence, input_size, device=device)
        mask = torch.ones(batch_size, args.tokens_per_sentence, dtype=torch.bool, device=device)
        with torch.no_grad():
            for _ in range(3):
                ours(inputs, mask)
                cudnn(inputs)
            medians = time_alternately({"ours": lambda: ours(inputs, mask),
                                        "cudnn": lambda: cudnn(inputs)})
        print(f"| {batch_size} | {args.tokens_per_sentence} | {1000 * medians['ours']:.2f} | "
              f"{1000 * medians['cudnn']:.2f} | {medians['ours'] / medians['cudnn']:.1f}x |",
              flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size", default="original", choices=sorted(SIZES))
    parser.add_argument("--batch-size", type=int, default=128)
    parser.add_argument("--tokens-per-sentence", type=int, default=20)
    parser.add_argument("--num-samples", type=int, default=8192)
    parser.add_argument("--vocabulary-size", type=int, default=100_000)
    parser.add_argument("--amp", action="store_true", help="the step in bfloat16 autocast")
    parser.add_argument("--tf32", action="store_true", help="float32 products in TF32")
    parser.add_argument("--compile", default=None, choices=COMPILE_MODES,
                        help="the LSTM recurrence compiled in this torch.compile mode")
    parser.add_argument("--no-cudnn", action="store_true", help="skip the comparison with cuDNN")
    parser.add_argument("--softmax", choices=["sparse", "dense"], default="sparse",
                        help="the softmax's gradients (the configs: sparse)")
    parser.add_argument("--corpus", type=Path, default=TRAINING_CORPUS,
                        help="where the batches come from: a file or a directory of .txt files")
    parser.add_argument("--json", type=Path, help="also write the step's figures here")
    args = parser.parse_args()
    if not torch.cuda.is_available():
        sys.exit("needs a CUDA GPU")
    device = torch.device("cuda")
    torch.manual_seed(0)
    print(f"# {describe_run(device)}; torch CUDA {torch.version.cuda}")
    with float32_products(ExecutionPlan.build(device, tf32=args.tf32)):  # cuDNN's side too
        profile_training_step(args, device)
        if not args.no_cudnn:
            compare_with_cudnn(args, device)


if __name__ == "__main__":
    sys.exit(main())
