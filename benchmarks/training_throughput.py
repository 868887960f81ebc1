"""
Training throughput of elmo_plugin's biLM against the same architecture built from AllenNLP
core's pieces (``allennlp.modules.elmo._ElmoBiLm``: ``_ElmoCharacterEncoder`` + ``ElmoLstm``),
side by side in one process: tokens/s of a full training step (forward, sampled softmax loss of
both directions, backward, Adagrad update) on the same bilm-tf weights and the same batches.

    .venv/bin/python benchmarks/training_throughput.py [--sizes tiny small original]
        [--batch-size 64] [--tokens-per-sentence 20] [--steps 3] [--num-samples 8192]
        [--vocabulary-size 100000] [--device cpu|cuda] [--amp] [--allocator default|keep]
        [--corpus DIR_OR_FILE]

Both sides use the same softmax module (this plugin's sampled softmax, the same negatives each
step), so the ratio measures the biLM. The first step of each side is a warm-up; the same steps
check that the two losses agree. Each step takes a new batch of real English sentences from the
training corpus ``../shared/data/en/lm/train`` (``--corpus``; cut to
``--tokens-per-sentence``; 0: consecutive sentences at their own lengths, padding included); a
corpus without enough sentences for full batches is refused. Targets are random word ids (speed
does not depend on them).
``--amp`` also times both sides with their forward in bfloat16 autocast (CPU or CUDA; our side
is what ``"mixed_precision": true`` trains), as three more columns.
``--allocator keep`` applies the malloc settings that the training configs' ``keep_freed_memory``
callback applies (process-wide, so to both sides); the default leaves glibc's defaults.
"""
import argparse
import copy
import sys
import tempfile
import time
from pathlib import Path
from typing import Callable, Dict, List

import torch
from allennlp.modules.elmo import _ElmoBiLm
from bilm_sizes import (
    SIZES,
    TRAINING_CORPUS,
    add_allocator_option,
    apply_allocator_option,
    load_batches,
    write_random_bilm,
)

from elmo_plugin.common.hardware import describe_run
from elmo_plugin.data.character_ids import batch_to_ids
from elmo_plugin.modules.bilm import ElmoBiLm
from elmo_plugin.modules.sampled_softmax_loss import SampledSoftmaxLoss
from elmo_plugin.training.optimizers import DenseSparseAdagrad
from elmo_plugin.training.trainer import clip_grad_norm


def lm_loss(activations: List[torch.Tensor], mask: torch.Tensor, targets: torch.Tensor,
            softmax: SampledSoftmaxLoss, sampled) -> torch.Tensor:
    """Mean loss of both directions from the top layer (positions include <S> and </S>)."""
    top = activations[-1]
    half = top.size(-1) // 2
    # Forward: position t predicts t + 1; backward: position t predicts t - 1.
    forward_mask = mask[:, :-1] & mask[:, 1:]
    forward = softmax(top[:, :-1, :half][forward_mask], targets[:, 1:][forward_mask], sampled)
    backward = softmax(top[:, 1:, half:][forward_mask], targets[:, :-1][forward_mask], sampled)
    return (forward.mean() + backward.mean()) / 2


def make_step(bilm: torch.nn.Module, softmax: SampledSoftmaxLoss, reset: Callable[[], None],
              amp: bool = False) -> Callable:
    parameters = list(bilm.parameters()) + list(softmax.parameters())
    # Adagrad as the configs train: row by row where the softmax's gradients are sparse.
    optimizer = DenseSparseAdagrad([(str(k), p) for k, p in enumerate(parameters)], lr=0.2,
                                   initial_accumulator_value=1.0)

    def step(ids: torch.Tensor, targets: torch.Tensor, sampled) -> float:
        reset()
        optimizer.zero_grad(set_to_none=True)
        with torch.autocast(next(bilm.parameters()).device.type, dtype=torch.bfloat16, enabled=amp):
            output = bilm(ids)
            loss = lm_loss(output["activations"], output["mask"], targets, softmax, sampled)
        loss.backward()
        clip_grad_norm(parameters, 10.0)
        optimizer.step()
        return float(loss.detach())

    return step


def synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", nargs="+", default=["tiny", "small", "original"])
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--tokens-per-sentence", type=int, default=20)
    parser.add_argument("--steps", type=int, default=3, help="timed steps per side (after 1 warm-up)")
    parser.add_argument("--num-samples", type=int, default=8192)
    parser.add_argument("--vocabulary-size", type=int, default=100_000)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--amp", action="store_true", help="also time both sides in bf16 autocast")
    parser.add_argument("--softmax", choices=["sparse", "dense"], default="sparse",
                        help="the softmax's gradients (the configs: sparse)")
    parser.add_argument("--corpus", type=Path, default=TRAINING_CORPUS,
                        help="where the batches come from: a file or a directory of .txt files")
    add_allocator_option(parser)
    args = parser.parse_args()
    apply_allocator_option(args)
    device = torch.device(args.device)
    torch.manual_seed(0)
    print(f"# {describe_run(device)}")
    print(f"# batch {args.batch_size} x {args.tokens_per_sentence or 'natural'} tokens, "
          f"{args.num_samples} sampled negatives of {args.vocabulary_size:,} words "
          f"({args.softmax} softmax gradients), Adagrad, "
          f"{args.allocator} allocator")
    header = "| size | ours tokens/s | AllenNLP tokens/s | ratio | loss diff at step 1 |"
    if args.amp:
        header += " ours bf16 tokens/s | AllenNLP bf16 tokens/s | bf16 ratio |"
    print(header)
    print("|---|---:|---:|---:|---:|" + ("---:|---:|---:|" if args.amp else ""))
    batches = [batch_to_ids(sentences) for sentences in
               load_batches(args.steps + 1, args.batch_size, args.tokens_per_sentence, args.corpus)]
    for size in args.sizes:
        with tempfile.TemporaryDirectory() as directory:
            options_file, weight_file = write_random_bilm(size, directory)
            ours = ElmoBiLm.from_files(options_file, weight_file, requires_grad=True).to(device)
            theirs = _ElmoBiLm(options_file, weight_file, requires_grad=True).to(device)
        ours.train()
        theirs.train()
        projection_dim = SIZES[size]["projection_dim"]
        softmax = SampledSoftmaxLoss(args.vocabulary_size, projection_dim, args.num_samples,
                                     sparse_gradients=args.softmax == "sparse").to(device)
        softmax.train()
        sides: Dict[str, Callable] = {
            "ours": make_step(ours, copy.deepcopy(softmax), lambda: None),
            "allennlp": make_step(theirs, copy.deepcopy(softmax), theirs._elmo_lstm.reset_states),
        }
        if args.amp:
            sides["ours_bf16"] = make_step(copy.deepcopy(ours), copy.deepcopy(softmax),
                                           lambda: None, amp=True)
            theirs_amp = copy.deepcopy(theirs)
            sides["allennlp_bf16"] = make_step(theirs_amp, copy.deepcopy(softmax),
                                               theirs_amp._elmo_lstm.reset_states, amp=True)
        generator = torch.Generator(device=device).manual_seed(1)
        times: Dict[str, List[float]] = {name: [] for name in sides}
        losses: Dict[str, float] = {}
        tokens = 0
        for k, ids in enumerate(batches):
            ids = ids.to(device)
            targets = torch.randint(3, args.vocabulary_size, ids.shape[:2], device=device)
            # <S> and </S> positions: the bilm adds them; targets cover time + 2.
            targets = torch.nn.functional.pad(targets, (1, 1), value=1)
            sampled = softmax.sample(device, generator=generator)
            for name, step in sides.items():
                synchronize(device)
                start = time.perf_counter()
                loss = step(ids, targets, sampled)
                synchronize(device)
                if k == 0:
                    losses[name] = loss
                else:
                    times[name].append(time.perf_counter() - start)
            if k > 0:
                tokens += int((ids > 0).any(-1).sum())
        # All timed steps together: with natural lengths every batch has its own token count.
        rate = {name: tokens / sum(values) for name, values in times.items()}
        row = (f"| {size} | {rate['ours']:,.0f} | {rate['allennlp']:,.0f} | "
               f"{rate['ours'] / rate['allennlp']:.2f}x | "
               f"{abs(losses['ours'] - losses['allennlp']):.1e} (loss {losses['ours']:.4f}) |")
        if args.amp:
            row += (f" {rate['ours_bf16']:,.0f} | {rate['allennlp_bf16']:,.0f} | "
                    f"{rate['ours_bf16'] / rate['allennlp_bf16']:.2f}x |")
        print(row, flush=True)


if __name__ == "__main__":
    sys.exit(main())
