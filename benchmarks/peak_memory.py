"""
Peak memory of elmo_plugin's biLM against AllenNLP core's ``_ElmoBiLm``, for embedding (a
forward pass without gradients) and for a training step (forward, sampled softmax loss,
backward, Adagrad update; ``training_throughput.py``'s step), on the same bilm-tf weights and
batches.

    .venv/bin/python benchmarks/peak_memory.py [--sizes tiny small original] [--batch-size 64]
        [--tokens-per-sentence 20] [--modes embed train] [--num-samples 8192]
        [--vocabulary-size 100000]

Each side runs in its own child process (peak memory is a property of a process): the child
loads the model, runs one warm-up batch, resets the kernel's record of its peak resident
memory (``/proc/self/clear_refs``), runs two more batches and reads the peak back (``VmHWM``).
The table gives that peak and, beside it, its increase over the memory held after loading (the
weights, the optimizer state and the libraries): the increase is what the batch itself costs.
Linux only.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
from typing import Dict

import torch
from bilm_sizes import SIZES, load_sentences, write_random_bilm

from elmo_plugin.common.hardware import describe_run


def _status_kb(field: str) -> int:
    with open("/proc/self/status") as handle:
        for line in handle:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise RuntimeError(f"no {field} in /proc/self/status")


def _reset_peak() -> None:
    with open("/proc/self/clear_refs", "w") as handle:
        handle.write("5")  # resets VmHWM to the current resident size (Linux >= 4.0)


def child(args: argparse.Namespace) -> Dict[str, float]:
    """Runs one side in this process; returns its memory figures in MB."""
    from allennlp.modules.elmo import _ElmoBiLm
    from training_throughput import make_step

    from elmo_plugin.data.character_ids import batch_to_ids
    from elmo_plugin.modules.bilm import ElmoBiLm
    from elmo_plugin.modules.sampled_softmax_loss import SampledSoftmaxLoss

    torch.manual_seed(0)
    train = args.mode == "train"
    if args.side == "ours":
        bilm = ElmoBiLm.from_files(args.options_file, args.weight_file, requires_grad=train)
        reset = lambda: None  # noqa: E731
    else:
        bilm = _ElmoBiLm(args.options_file, args.weight_file, requires_grad=train)
        reset = bilm._elmo_lstm.reset_states
    batches = [
        batch_to_ids(load_sentences(args.batch_size, args.tokens_per_sentence, skip=k * args.batch_size))
        for k in range(3)
    ]
    if train:
        bilm.train()
        projection_dim = SIZES[args.size]["projection_dim"]
        softmax = SampledSoftmaxLoss(args.vocabulary_size, projection_dim, args.num_samples)
        step = make_step(bilm, softmax, reset)
        generator = torch.Generator().manual_seed(1)

        def run(ids: torch.Tensor) -> None:
            targets = torch.randint(3, args.vocabulary_size, ids.shape[:2])
            targets = torch.nn.functional.pad(targets, (1, 1), value=1)
            step(ids, targets, softmax.sample(torch.device("cpu"), generator=generator))

    else:
        bilm.eval()

        def run(ids: torch.Tensor) -> None:
            reset()
            with torch.no_grad():
                bilm(ids)

    run(batches[0])  # warm-up: the optimizer state and the allocator's first pools exist now
    loaded_kb = _status_kb("VmRSS")
    _reset_peak()
    for ids in batches[1:]:
        run(ids)
    peak_kb = _status_kb("VmHWM")
    return {"peak_mb": peak_kb / 1024, "increase_mb": (peak_kb - loaded_kb) / 1024}


def run_child(args: argparse.Namespace, side: str, size: str, mode: str, files) -> Dict[str, float]:
    command = [
        sys.executable, os.path.abspath(__file__), "--child", "--side", side, "--size", size,
        "--mode", mode, "--options-file", files[0], "--weight-file", files[1],
        "--batch-size", str(args.batch_size), "--tokens-per-sentence", str(args.tokens_per_sentence),
        "--num-samples", str(args.num_samples), "--vocabulary-size", str(args.vocabulary_size),
    ]
    result = subprocess.run(command, capture_output=True, text=True)
    if result.returncode != 0:
        raise RuntimeError(f"{side} {size} {mode} failed:\n{result.stderr[-3000:]}")
    return json.loads(result.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", nargs="+", default=["tiny", "small", "original"])
    parser.add_argument("--modes", nargs="+", default=["embed", "train"], choices=["embed", "train"])
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--tokens-per-sentence", type=int, default=20)
    parser.add_argument("--num-samples", type=int, default=8192)
    parser.add_argument("--vocabulary-size", type=int, default=100_000)
    # The child's arguments.
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--side", choices=["ours", "allennlp"], help=argparse.SUPPRESS)
    parser.add_argument("--size", help=argparse.SUPPRESS)
    parser.add_argument("--mode", help=argparse.SUPPRESS)
    parser.add_argument("--options-file", help=argparse.SUPPRESS)
    parser.add_argument("--weight-file", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(child(args)))
        return
    print(f"# {describe_run()}; batch {args.batch_size} x "
          f"{args.tokens_per_sentence} tokens; training: {args.num_samples} sampled negatives of "
          f"{args.vocabulary_size:,} words, Adagrad")
    print("| size | mode | ours peak MB (batch's increase) | AllenNLP peak MB (batch's increase) "
          "| increase, AllenNLP / ours |")
    print("|---|---|---:|---:|---:|")
    for size in args.sizes:
        with tempfile.TemporaryDirectory() as directory:
            files = write_random_bilm(size, directory)
            for mode in args.modes:
                ours = run_child(args, "ours", size, mode, files)
                theirs = run_child(args, "allennlp", size, mode, files)
                ratio = theirs["increase_mb"] / max(ours["increase_mb"], 1e-9)
                print(f"| {size} | {mode} | {ours['peak_mb']:,.0f} ({ours['increase_mb']:,.0f}) | "
                      f"{theirs['peak_mb']:,.0f} ({theirs['increase_mb']:,.0f}) | "
                      f"{ratio:.2f} |", flush=True)


if __name__ == "__main__":
    sys.exit(main())
