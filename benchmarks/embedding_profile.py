"""
Where the time goes, ours against AllenNLP core's ``_ElmoBiLm``, under ``torch.profiler``.

    .venv/bin/python benchmarks/embedding_profile.py [--size original] [--batch-size 64]
        [--tokens-per-sentence 20] [--training [--amp]] [--precision bfloat16]
        [--allocator default|keep]

Embedding (the default): one batch of each, each operator's own CPU time attributed to the part
of the biLM it ran in (character encoder or LSTM) and split into matrix multiplies and everything
else. ``--training``: one training step of each as in ``training_throughput.py`` (after one
warm-up step), each operator's own CPU time by operator and input shapes, the largest first
(backward runs outside the modules, so it is not attributed to parts); ``--amp`` runs both
training steps in bfloat16 autocast. ``--allocator keep`` first applies the malloc settings of the
training configs' ``keep_freed_memory`` callback (to both sides, as in ``training_throughput.py``).
``--precision bfloat16``: embedding, ours in float32 against ours with ``precision="bfloat16"``
(issue 28), by part and kind and then the operators that take the most time in bfloat16.
Same weights and sentences as the throughput benchmarks. Profiler times include its own
overhead; they explain a ratio, they do not replace the throughput runs.
"""
import argparse
import sys
import tempfile
from collections import defaultdict
from typing import Dict, List, Tuple

import torch
from allennlp.modules.elmo import _ElmoBiLm
from bilm_sizes import add_allocator_option, apply_allocator_option, load_sentences, write_random_bilm
from torch.profiler import ProfilerActivity, profile, record_function

from elmo_plugin.common.hardware import describe_run
from elmo_plugin.data.character_ids import batch_to_ids
from elmo_plugin.modules.bilm import ElmoBiLm
from elmo_plugin.modules.precision import InferenceSettings, run_bilm

# Convolutions count as matrix multiplies: AllenNLP's character CNN runs as nn.Conv1d.
MATRIX_MULTIPLIES = {"aten::mm", "aten::addmm", "aten::bmm", "aten::baddbmm", "aten::matmul",
                     "aten::linear", "aten::mkldnn_convolution", "aten::convolution"}


def label(module: torch.nn.Module, name: str) -> None:
    """Runs ``module``'s forward inside ``record_function(name)``."""
    contexts = []

    def enter(*_):
        contexts.append(record_function(name))
        contexts[-1].__enter__()

    def leave(*_):
        contexts.pop().__exit__(None, None, None)

    module.register_forward_pre_hook(enter)
    module.register_forward_hook(leave)


def profile_one(bilm: torch.nn.Module, ids: torch.Tensor, precision: str = "float32"
                ) -> Tuple[Dict[Tuple[str, str], float], List[Tuple[float, str, int, list]]]:
    """
    Self CPU milliseconds by (part, kind), and by operator and input shapes (ms, operator,
    calls, shapes; the largest first), of ``bilm`` run in ``precision`` as inference runs it.
    """
    plan = InferenceSettings(precision, native_only=False).plan(ids.device)
    with torch.no_grad():
        run_bilm(bilm, ids, plan)  # warm-up
        with profile(activities=[ProfilerActivity.CPU], record_shapes=True) as prof:
            run_bilm(bilm, ids, plan)
    operators = sorted(
        ((e.self_cpu_time_total / 1000.0, e.key, e.count, e.input_shapes)
         for e in prof.key_averages(group_by_input_shape=True)), key=lambda row: -row[0])
    totals: Dict[Tuple[str, str], float] = defaultdict(float)
    for event in prof.events():
        if event.name in ("encoder", "lstm"):
            continue
        part, parent = "other", event.cpu_parent
        while parent is not None:
            if parent.name in ("encoder", "lstm"):
                part = parent.name
                break
            parent = parent.cpu_parent
        kind = "matrix multiplies" if event.name in MATRIX_MULTIPLIES else "other operators"
        totals[(part, kind)] += event.self_cpu_time_total / 1000.0
    return totals, operators


def profile_training_step(size: str, batch_size: int, tokens_per_sentence: int,
                          amp: bool = False) -> None:
    from bilm_sizes import SIZES
    from training_throughput import make_step

    from elmo_plugin.modules.sampled_softmax_loss import SampledSoftmaxLoss

    ids = [batch_to_ids(load_sentences(batch_size, tokens_per_sentence, skip=k * batch_size))
           for k in range(2)]
    with tempfile.TemporaryDirectory() as directory:
        options_file, weight_file = write_random_bilm(size, directory)
        sides = {
            "ours": ElmoBiLm.from_files(options_file, weight_file, requires_grad=True),
            "AllenNLP": _ElmoBiLm(options_file, weight_file, requires_grad=True),
        }
    tables = {}
    for name, bilm in sides.items():
        bilm.train()
        softmax = SampledSoftmaxLoss(100_000, SIZES[size]["projection_dim"], 8192)
        reset = bilm._elmo_lstm.reset_states if name == "AllenNLP" else (lambda: None)
        step = make_step(bilm, softmax, reset, amp=amp)
        generator = torch.Generator().manual_seed(1)
        for k, batch in enumerate(ids):
            targets = torch.randint(3, 100_000, batch.shape[:2], generator=generator)
            targets = torch.nn.functional.pad(targets, (1, 1), value=1)
            sampled = softmax.sample(torch.device("cpu"), generator=generator)
            if k == 0:
                step(batch, targets, sampled)
                continue
            with profile(activities=[ProfilerActivity.CPU], record_shapes=True) as prof:
                step(batch, targets, sampled)
            rows = [(e.self_cpu_time_total / 1000.0, e.key, e.count, e.input_shapes)
                    for e in prof.key_averages(group_by_input_shape=True)]
            tables[name] = (sorted(rows, key=lambda row: -row[0]), sum(r[0] for r in rows))
    for name, (rows, total) in tables.items():
        print(f"\n{name}: {total:,.0f} ms of operator time in one step")
        print("| operator | input shapes | calls | ms |")
        print("|---|---|---:|---:|")
        for ms, key, count, shapes in rows[:12]:
            shown = ", ".join(str(list(shape)) for shape in shapes if shape)
            print(f"| {key} | {shown} | {count} | {ms:,.0f} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size", default="original")
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--tokens-per-sentence", type=int, default=20)
    parser.add_argument("--training", action="store_true")
    parser.add_argument("--amp", action="store_true", help="training in bfloat16 autocast")
    parser.add_argument("--precision", choices=["float32", "bfloat16"], default="float32",
                        help="bfloat16: embedding in float32 against bfloat16 (ours only)")
    parser.add_argument("--threads", type=int, default=0,
                        help="intra-op threads (torch.set_num_threads); 0: torch's default")
    add_allocator_option(parser)
    args = parser.parse_args()
    if args.threads > 0:
        torch.set_num_threads(args.threads)
    if args.amp and not args.training:
        parser.error("--amp profiles a training step: use it with --training")
    apply_allocator_option(args)
    torch.manual_seed(0)
    if args.training:
        print(f"# {describe_run()}; training step, "
              f"{args.size}, batch {args.batch_size} x "
              f"{args.tokens_per_sentence or 'natural'} tokens"
              + (", bfloat16 autocast" if args.amp else ""))
        return profile_training_step(args.size, args.batch_size, args.tokens_per_sentence,
                                     args.amp)
    with tempfile.TemporaryDirectory() as directory:
        options_file, weight_file = write_random_bilm(args.size, directory)
        ours = ElmoBiLm.from_files(options_file, weight_file).eval()
        theirs = _ElmoBiLm(options_file, weight_file).eval()
    label(ours.character_encoder, "encoder")
    label(ours.lstm, "lstm")
    label(theirs._token_embedder, "encoder")
    label(theirs._elmo_lstm, "lstm")
    ids = batch_to_ids(load_sentences(args.batch_size, args.tokens_per_sentence))
    ours_ms, _ = profile_one(ours, ids)
    if args.precision == "bfloat16":
        # The second column is ours in bfloat16 instead of AllenNLP's.
        theirs_ms, operators = profile_one(ours, ids, "bfloat16")
    else:
        theirs._elmo_lstm.reset_states()
        theirs_ms, _ = profile_one(theirs, ids)
    print(f"# {describe_run()}; {args.size}, batch {args.batch_size} x "
          f"{args.tokens_per_sentence or 'natural'} tokens")
    if args.precision == "bfloat16":
        print("| part | kind | float32 ms | bfloat16 ms | bfloat16 / float32 |")
    else:
        print("| part | kind | ours ms | AllenNLP ms | AllenNLP / ours |")
    print("|---|---|---:|---:|---:|")
    keys = sorted(set(ours_ms) | set(theirs_ms))
    for key in keys + [("total", "")]:
        a = sum(ours_ms.values()) if key[0] == "total" else ours_ms.get(key, 0.0)
        b = sum(theirs_ms.values()) if key[0] == "total" else theirs_ms.get(key, 0.0)
        ratio = f"{b / a:.2f}" if a > 0 else "-"
        print(f"| {key[0]} | {key[1]} | {a:,.0f} | {b:,.0f} | {ratio} |", flush=True)
    if args.precision == "bfloat16":
        print("\nThe operators that take the most time in bfloat16:")
        print("| operator | input shapes | calls | ms |")
        print("|---|---|---:|---:|")
        for ms, key, count, shapes in operators[:15]:
            shown = ", ".join(str(list(shape)) for shape in shapes if shape)
            print(f"| {key} | {shown} | {count} | {ms:,.1f} |")


if __name__ == "__main__":
    sys.exit(main())
