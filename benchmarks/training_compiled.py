"""
Training tokens/s of the biLM's step by execution path: eager, with the LSTM recurrence compiled
(``torch.compile``), and AllenNLP core's biLM (``allennlp.modules.elmo._ElmoBiLm``), side by side
in one process on the same weights and batches: a full training step each (forward, the sampled
softmax loss of both directions, backward, gradient norm clipping, Adagrad), as
``training_throughput.py`` times it.

    .venv/bin/python benchmarks/training_compiled.py [--sizes small original] [--batch-size 64]
        [--tokens-per-sentence 20] [--steps 3] [--num-samples 8192]
        [--vocabulary-size 100000] [--device cpu|cuda] [--threads N] [--mode default]
        [--precisions float32 tf32 bfloat16] [--sides eager compiled allennlp]
        [--softmax sparse|dense] [--corpus DIR_OR_FILE] [--json FILE]

Every batch is ``--batch-size`` sentences of the training corpus (``../shared/data/en/lm/train``
by default) cut to ``--tokens-per-sentence`` tokens (``<S>`` and ``</S>`` added: every row the
same length, as stream training's windows are), so that the compiled path runs (it compiles
batches without padding only); a corpus without enough such sentences for full batches is
refused. The first step of each side is a warm-up and, for the compiled side, the compile: its
time is reported in its own column. The losses of the eager and compiled sides are compared at
every step (they train the same weights from the same batches, so they stay within float32
rounding of each other as long as the two paths agree); the eager side's loss is compared with
AllenNLP's at the first step.

``--precisions``: one row per size and precision, in one process (each compiled shape is
compiled once per precision): ``float32``; ``tf32``, float32 products in TF32 on a GPU (all
sides; the same as float32 on a CPU); ``bfloat16``, all sides in bfloat16 autocast (our side as
``"mixed_precision": true`` trains). ``--mode``: the torch.compile mode (``reduce-overhead`` adds
CUDA graphs on a GPU). ``--sides``: which paths (`SIDES`; ``captured``: the step captured whole as
one CUDA graph, after 3 eager warm-up steps). ``--softmax``: the softmax's gradients, sparse rows as the
configs train (``dense_sparse_adagrad``) or dense. ``--json``: the rows, for
``benchmarks/gpu/day_report.py``.
"""
import argparse
import copy
import dataclasses
import json
import logging
import sys
import tempfile
import time
from pathlib import Path
from typing import Callable, Dict, List

import torch
from allennlp.modules.elmo import _ElmoBiLm
from bilm_sizes import SIZES, TRAINING_CORPUS, load_batches, write_random_bilm
from training_throughput import lm_loss, synchronize

from elmo_plugin.common.hardware import describe_run
from elmo_plugin.data.character_ids import batch_to_ids
from elmo_plugin.modules.bilm import ElmoBiLm
from elmo_plugin.modules.execution import compiled_step
from elmo_plugin.modules.execution.plan import (
    COMPILE_MODES,
    ExecutionPlan,
    running,
    tf32_through_backward,
)
from elmo_plugin.modules.sampled_softmax_loss import SampledSoftmaxLoss
from elmo_plugin.training.captured_step import WARMUP_STEPS, CapturedStep
from elmo_plugin.training.optimizers import DenseSparseAdagrad
from elmo_plugin.training.trainer import clip_grad_norm


def make_step(bilm: torch.nn.Module, softmax: SampledSoftmaxLoss, reset: Callable[[], None],
              plan: ExecutionPlan) -> Callable:
    parameters = list(bilm.parameters()) + list(softmax.parameters())
    # Adagrad as the configs train: row by row where the softmax's gradients are sparse.
    optimizer = DenseSparseAdagrad([(str(k), p) for k, p in enumerate(parameters)], lr=0.2,
                                   initial_accumulator_value=1.0)

    def step(ids: torch.Tensor, targets: torch.Tensor, sampled) -> torch.Tensor:
        reset()
        optimizer.zero_grad(set_to_none=True)
        with running(plan):  # AllenNLP's biLM (no plan) and the softmax: under autocast
            output = bilm(ids, execution=plan) if isinstance(bilm, ElmoBiLm) else bilm(ids)
            loss = lm_loss(output["activations"], output["mask"], targets, softmax, sampled)
        tf32_through_backward(plan, loss, parameters)
        loss.backward()
        clip_grad_norm(parameters, 10.0)
        optimizer.step()
        return loss.detach()

    return step


def fixed_shape_lm_loss(activations: List[torch.Tensor], mask: torch.Tensor,
                        targets: torch.Tensor, softmax: SampledSoftmaxLoss,
                        sampled) -> torch.Tensor:
    """`lm_loss` with every position through the softmax and padding masked out of the means:
    no shape from the data (the captured step's); the same value for full rows."""
    top = activations[-1]
    half = top.size(-1) // 2
    pairs = (mask[:, :-1] & mask[:, 1:]).reshape(-1).to(top.dtype)
    count = pairs.sum().clamp(min=1)
    forward = softmax(top[:, :-1, :half].reshape(-1, half), targets[:, 1:].reshape(-1), sampled)
    backward = softmax(top[:, 1:, half:].reshape(-1, half), targets[:, :-1].reshape(-1), sampled)
    return ((forward * pairs).sum() / count + (backward * pairs).sum() / count) / 2


def make_captured_step(bilm: ElmoBiLm, softmax: SampledSoftmaxLoss, plan: ExecutionPlan
                       ) -> Callable:
    """
    The same step as `make_step`, as one `CapturedStep`: captured whole as a CUDA graph on a GPU
    (after its warm-up steps), the same step function eagerly on a CPU; the plan's fixed shapes,
    dense softmax gradients (a sparse gradient is no fixed shape), torch's Adagrad arithmetic.
    """
    softmax.sparse_gradients = False
    plan = dataclasses.replace(plan, fixed_shape=True)
    parameters = list(bilm.parameters()) + list(softmax.parameters())
    optimizer = DenseSparseAdagrad([(str(k), p) for k, p in enumerate(parameters)], lr=0.2,
                                   initial_accumulator_value=1.0)

    def loss_of(ids: torch.Tensor, targets: torch.Tensor, sampled) -> torch.Tensor:
        with running(plan):
            output = bilm(ids, execution=plan)
            loss = fixed_shape_lm_loss(output["activations"], output["mask"], targets, softmax,
                                       sampled)
        tf32_through_backward(plan, loss, parameters)
        return loss

    capture = "cuda_graph" if plan.device.type == "cuda" else False
    return CapturedStep(loss_of, optimizer, max_norm=10.0, capture=capture)


# The execution paths a row can time: name -> what it is. "captured": the step captured whole
# as one CUDA graph (forward, loss, backward, clipping, Adagrad; `make_captured_step`), on a
# CPU the same step function run eagerly.
SIDES: Dict[str, str] = {
    "eager": "ours, eager",
    "compiled": "ours, LSTM recurrence compiled",
    "captured": "ours, the step captured whole",
    "allennlp": "AllenNLP core's _ElmoBiLm, eager",
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", nargs="+", default=["small", "original"])
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--tokens-per-sentence", type=int, default=20)
    parser.add_argument("--steps", type=int, default=3,
                        help="timed steps per side (after 1 warm-up)")
    parser.add_argument("--num-samples", type=int, default=8192)
    parser.add_argument("--vocabulary-size", type=int, default=100_000)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--threads", type=int, default=None, help="torch intra-op threads")
    parser.add_argument("--mode", default="default", choices=COMPILE_MODES)
    parser.add_argument("--precisions", nargs="+", default=["float32"],
                        choices=["float32", "tf32", "bfloat16"])
    parser.add_argument("--sides", nargs="+", default=list(SIDES), choices=list(SIDES))
    parser.add_argument("--no-allennlp", action="store_true", help="leave AllenNLP core out")
    parser.add_argument("--softmax", choices=["sparse", "dense"], default="sparse",
                        help="the softmax's gradients (the configs: sparse)")
    parser.add_argument("--corpus", type=Path, default=TRAINING_CORPUS,
                        help="where the batches come from: a file or a directory of .txt files")
    parser.add_argument("--json", type=Path, help="also write the rows here")
    args = parser.parse_args()
    if args.no_allennlp and "allennlp" in args.sides:
        args.sides.remove("allennlp")
    if "eager" not in args.sides:
        parser.error("--sides needs eager: the other sides are compared with it")
    # The compiled path's one line per compiled shape (its compile time), on stderr.
    logging.basicConfig(level=logging.WARNING, format="# %(name)s: %(message)s")
    logging.getLogger(compiled_step.__name__).setLevel(logging.INFO)
    if args.tokens_per_sentence < 1:
        parser.error("--tokens-per-sentence must be >= 1: the compiled path needs one length")
    if args.threads:
        torch.set_num_threads(args.threads)
    device = torch.device(args.device)
    torch.manual_seed(0)
    print(f"# {describe_run(device)}")
    print(f"# torch {torch.__version__}, {torch.get_num_threads()} threads; batch "
          f"{args.batch_size} x {args.tokens_per_sentence} tokens of {args.corpus}, "
          f"{args.num_samples} sampled negatives of {args.vocabulary_size:,} words "
          f"({args.softmax} softmax gradients), Adagrad; compile mode {args.mode}")
    print("| size | precision | side | tokens/s | / eager | compile s | max loss diff to eager |")
    print("|---|---|---|---:|---:|---:|---:|")
    batches = [batch_to_ids(sentences) for sentences in
               load_batches(args.steps + 1, args.batch_size, args.tokens_per_sentence, args.corpus)]
    rows = []
    for size in args.sizes:
        with tempfile.TemporaryDirectory() as directory:
            options_file, weight_file = write_random_bilm(size, directory)
            initial = ElmoBiLm.from_files(options_file, weight_file, requires_grad=True)
            core = None if "allennlp" not in args.sides else _ElmoBiLm(
                options_file, weight_file, requires_grad=True)
        softmax = SampledSoftmaxLoss(args.vocabulary_size, SIZES[size]["projection_dim"],
                                     args.num_samples,
                                     sparse_gradients=args.softmax == "sparse").to(device)
        softmax.train()
        for precision in args.precisions:
            for row in time_sides(args, device, batches, initial, core, softmax, precision):
                row.update(size=size, precision=precision, batch_size=args.batch_size,
                           tokens_per_sentence=args.tokens_per_sentence, device=str(device),
                           softmax=args.softmax, mode=args.mode)
                rows.append(row)
                print(f"| {size} | {precision} | {row['side']} | {row['tokens_per_second']:,.0f} "
                      f"| {row['versus_eager']:.2f}x | {row['compile_seconds']:.1f} | "
                      f"{row['loss_difference']:.1e} |", flush=True)
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1) + "\n", encoding="utf-8")


def time_sides(args, device: torch.device, batches: List[torch.Tensor], initial: ElmoBiLm,
               core, softmax: SampledSoftmaxLoss, precision: str) -> List[Dict]:
    """One row per side, each trained from the same weights on the same batches."""

    def plan(compile) -> ExecutionPlan:
        return ExecutionPlan.build(device, torch.bfloat16 if precision == "bfloat16" else None,
                                   compile, precision == "tf32")

    steps: Dict[str, Callable] = {}
    for side in args.sides:
        if side == "allennlp":
            theirs = copy.deepcopy(core).to(device).train()
            steps[side] = make_step(theirs, copy.deepcopy(softmax), theirs._elmo_lstm.reset_states,
                                    plan(False))
        elif side == "captured":
            ours = copy.deepcopy(initial).to(device).train()
            steps[side] = make_captured_step(ours, copy.deepcopy(softmax), plan(False))
        else:
            ours = copy.deepcopy(initial).to(device).train()
            steps[side] = make_step(ours, copy.deepcopy(softmax), lambda: None,
                                    plan(args.mode if side == "compiled" else False))
    generator = torch.Generator(device=device).manual_seed(1)
    times: Dict[str, List[float]] = {name: [] for name in steps}
    tokens: Dict[str, int] = {name: 0 for name in steps}
    losses: Dict[str, List[float]] = {name: [] for name in steps}
    first: Dict[str, float] = {}
    # Untimed first steps: one warm-up (and the compile) each; the captured side's eager warm-up
    # steps and its capture too.
    untimed = {name: WARMUP_STEPS + 1 if name == "captured" else 1 for name in steps}
    if "captured" in steps and len(batches) <= untimed["captured"]:
        raise SystemExit(f"--steps must be at least {WARMUP_STEPS + 1} with the captured side "
                         f"(its first {WARMUP_STEPS} steps are eager, the next one captures)")
    for k, ids in enumerate(batches):
        ids = ids.to(device)
        targets = torch.randint(3, args.vocabulary_size, ids.shape[:2], device=device)
        targets = torch.nn.functional.pad(targets, (1, 1), value=1)
        sampled = softmax.sample(device, generator=generator)
        # A tensor, so that a captured step takes it as an input (a number would be captured).
        sampled = sampled._replace(num_tries=torch.as_tensor(sampled.num_tries, device=device,
                                                             dtype=torch.float64))
        for name, step in steps.items():
            synchronize(device)
            start = time.perf_counter()
            loss = step(ids, targets, sampled)
            synchronize(device)
            elapsed = time.perf_counter() - start
            losses[name].append(float(loss))
            if k == 0:
                first[name] = elapsed
            if k >= untimed[name]:
                times[name].append(elapsed)
                tokens[name] += int((ids > 0).any(-1).sum())
    rate = {name: tokens[name] / sum(values) for name, values in times.items()}
    rows = []
    for name in steps:
        difference = max(abs(a - b) for a, b in zip(losses[name], losses["eager"]))
        if name == "allennlp":  # compared at the first step only: another implementation
            difference = abs(losses[name][0] - losses["eager"][0])
        rows.append(dict(
            side=name, tokens_per_second=rate[name], versus_eager=rate[name] / rate["eager"],
            # The compiled side's first step compiles; the eager side's first step is a warm-up.
            # (The captured side's capture comes at its fourth step, inside the timed ones:
            # `--steps` well above 3 for its rate.)
            compile_seconds=first[name] - first["eager"] if name == "compiled" else 0.0,
            loss_difference=difference, first_loss=losses[name][0],
        ))
    return rows


if __name__ == "__main__":
    sys.exit(main())
