"""
Training tokens/s of the biLM with its LSTM recurrence compiled (``torch.compile``)
against the eager path and against AllenNLP core's biLM (``allennlp.modules.elmo._ElmoBiLm``),
side by side in one process on the same weights and batches: a full training step each
(forward, the sampled softmax loss of both directions, backward, gradient clipping, Adagrad),
as ``training_throughput.py`` times it.

    .venv/bin/python benchmarks/training_compiled.py [--sizes small original] [--batch-size 64]
        [--tokens-per-sentence 20] [--steps 3] [--num-samples 8192]
        [--vocabulary-size 100000] [--device cpu|cuda] [--threads N] [--mode default]
        [--precisions float32 tf32 bfloat16] [--no-allennlp]

Every batch is ``--batch-size`` real English sentences cut to ``--tokens-per-sentence`` tokens
(``<S>`` and ``</S>`` added: every row the same length, as stream training's windows are), so the
compiled path runs (it compiles batches without padding only). The first step of each side is a
warm-up and, for the compiled side, the compile: its time is reported in its own column. The
losses of the eager and compiled sides are compared at every step (they train the same weights
from the same batches, so they stay within float32 rounding of each other as long as the two
paths agree); the eager side's loss is compared with AllenNLP's at the first step.

``--precisions``: one row per size and precision, in one process (each compiled shape is
compiled once per precision): ``float32``; ``tf32``, float32 products in TF32 on a GPU (all sides;
the same as float32 on a CPU); ``bfloat16``, all sides in bfloat16 autocast (our side as
``"mixed_precision": true`` trains). ``--mode``: the torch.compile mode (``reduce-overhead`` adds
CUDA graphs on a GPU).
"""
import argparse
import copy
import logging
import sys
import tempfile
import time
from typing import Callable, Dict, List

import torch
from allennlp.modules.elmo import _ElmoBiLm
from bilm_sizes import SIZES, load_sentences, write_random_bilm
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


def make_step(bilm: torch.nn.Module, softmax: SampledSoftmaxLoss, reset: Callable[[], None],
              plan: ExecutionPlan) -> Callable:
    parameters = list(bilm.parameters()) + list(softmax.parameters())
    optimizer = torch.optim.Adagrad(parameters, lr=0.2, initial_accumulator_value=1.0)

    def step(ids: torch.Tensor, targets: torch.Tensor, sampled) -> float:
        reset()
        optimizer.zero_grad(set_to_none=True)
        with running(plan):  # AllenNLP's biLM (no plan) and the softmax: under autocast
            output = bilm(ids, execution=plan) if isinstance(bilm, ElmoBiLm) else bilm(ids)
            loss = lm_loss(output["activations"], output["mask"], targets, softmax, sampled)
        tf32_through_backward(plan, loss, parameters)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(parameters, 10.0)
        optimizer.step()
        return float(loss.detach())

    return step


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
    parser.add_argument("--no-allennlp", action="store_true", help="leave AllenNLP core out")
    args = parser.parse_args()
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
          f"{args.batch_size} x {args.tokens_per_sentence} tokens, {args.num_samples} sampled "
          f"negatives of {args.vocabulary_size:,} words, Adagrad; compile mode {args.mode}")
    print("| size | precision | eager tokens/s | compiled tokens/s | compiled / eager | "
          "compile s | AllenNLP tokens/s | eager / AllenNLP | compiled / AllenNLP | max loss "
          "diff compiled-eager | loss diff eager-AllenNLP at step 1 |")
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    num_batches = args.steps + 1
    batches = [
        batch_to_ids(load_sentences(args.batch_size, args.tokens_per_sentence,
                                    skip=k * args.batch_size))
        for k in range(num_batches)
    ]
    for size in args.sizes:
        with tempfile.TemporaryDirectory() as directory:
            options_file, weight_file = write_random_bilm(size, directory)
            initial = ElmoBiLm.from_files(options_file, weight_file, requires_grad=True)
            core = None if args.no_allennlp else _ElmoBiLm(
                options_file, weight_file, requires_grad=True)
        softmax = SampledSoftmaxLoss(args.vocabulary_size, SIZES[size]["projection_dim"],
                                     args.num_samples).to(device)
        softmax.train()
        for precision in args.precisions:
            row = time_sides(args, device, batches, initial, core, softmax, precision)
            print(f"| {size} | {precision} | {row}", flush=True)


def time_sides(args, device: torch.device, batches: List[torch.Tensor], initial: ElmoBiLm,
               core, softmax: SampledSoftmaxLoss, precision: str) -> str:
    """One table row (after the size and precision): each side trained from the same weights."""
    eager = copy.deepcopy(initial).to(device).train()
    compiled = copy.deepcopy(initial).to(device).train()

    def plan(compile) -> ExecutionPlan:
        return ExecutionPlan.build(device, torch.bfloat16 if precision == "bfloat16" else None,
                                   compile, precision == "tf32")

    sides: Dict[str, Callable] = {
        "eager": make_step(eager, copy.deepcopy(softmax), lambda: None, plan(False)),
        "compiled": make_step(compiled, copy.deepcopy(softmax), lambda: None, plan(args.mode)),
    }
    if core is not None:
        theirs = copy.deepcopy(core).to(device).train()
        sides["allennlp"] = make_step(theirs, copy.deepcopy(softmax),
                                      theirs._elmo_lstm.reset_states, plan(False))
    generator = torch.Generator(device=device).manual_seed(1)
    times: Dict[str, List[float]] = {name: [] for name in sides}
    losses: Dict[str, List[float]] = {name: [] for name in sides}
    first: Dict[str, float] = {}
    tokens = 0
    for k, ids in enumerate(batches):
        ids = ids.to(device)
        targets = torch.randint(3, args.vocabulary_size, ids.shape[:2], device=device)
        targets = torch.nn.functional.pad(targets, (1, 1), value=1)
        sampled = softmax.sample(device, generator=generator)
        for name, step in sides.items():
            synchronize(device)
            start = time.perf_counter()
            losses[name].append(step(ids, targets, sampled))
            synchronize(device)
            elapsed = time.perf_counter() - start
            if k == 0:
                first[name] = elapsed
            else:
                times[name].append(elapsed)
        if k > 0:
            tokens += int((ids > 0).any(-1).sum())
    rate = {name: tokens / sum(values) for name, values in times.items()}
    # The compiled side's first step compiles; the eager side's first step is its warm-up.
    compile_seconds = first["compiled"] - first["eager"]
    loss_diff = max(abs(a - b) for a, b in zip(losses["compiled"], losses["eager"]))
    if core is not None:
        versus = (f"{rate['allennlp']:,.0f} | {rate['eager'] / rate['allennlp']:.2f}x | "
                  f"{rate['compiled'] / rate['allennlp']:.2f}x")
        core_diff = f"{abs(losses['eager'][0] - losses['allennlp'][0]):.1e}"
    else:
        versus, core_diff = "- | - | -", "-"
    return (f"{rate['eager']:,.0f} | {rate['compiled']:,.0f} | "
            f"{rate['compiled'] / rate['eager']:.2f}x | {compile_seconds:.1f} | {versus} | "
            f"{loss_diff:.1e} | {core_diff} (loss {losses['eager'][0]:.4f}) |")


if __name__ == "__main__":
    sys.exit(main())
