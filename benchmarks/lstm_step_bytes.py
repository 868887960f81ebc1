"""
The LSTM step at batch 1, product by product: ours against AllenNLP core's, and what that
bounds the whole batch-1 ratio at.

    .venv/bin/python benchmarks/lstm_step_bytes.py [--sizes small original] [--rows 1]
        [--tokens 22] [--rounds 30] [--threads 1] [--bfloat16]

Why: at batch 1 a step multiplies one row by each weight matrix, so it reads every weight once
and does two flops per weight read: memory-bound on any CPU. A step of ours reads the recurrent
weight (projection x 4 cells) and the projection (cells x projection); the input half of the
gates is one product for all ``--tokens`` steps at once, so it adds a share of one read per step.
AllenNLP core's `LstmCellWithProjection` reads its input and state weights (each projection x 4
cells) and the projection at every step. At Original size that is 40 + 32/22 MiB against 72 MiB
a step: where both sides' products run at the same bytes per second, no float32 implementation of
the same arithmetic can be more than about 1.73x AllenNLP on the LSTM, and the character encoder
(cheaper on our side, but a small share) cannot lift the whole call much above that.

Whether both sides do run at the same bytes per second depends on the CPU's matrix-vector
kernels: our weights are stored ``(in, out)`` (TensorFlow's layout), AllenNLP's ``(out, in)``
(``nn.Linear``'s), and the two layouts go through different kernels. This script times each
product, alternating the two sides in every round, and prints their GB/s and the step ratio.
``--bfloat16`` adds both layouts in bfloat16 (meaningful for speed only where the header says
bfloat16 is native). Random weights: the speed does not depend on them.

The table above alternates all products in every round, so each one finds the others' weights in
the cache rather than its own. A real call runs one layer and direction for all its steps
before the next: its weights stay in the cache from step to step where they fit. So the script
also times each side's products as its loop runs them (``--tokens`` steps of one layer and
direction; the two sides alternating by round), and how fast one core reads a working set of
each size (``tensor.sum`` over it, again and again): our step reads 40 MiB at Original,
AllenNLP's 72, and where a cache holds the one and not the other the bytes are not the whole
story.
"""
import argparse
import statistics
import sys
import time
from typing import Callable, Dict, List, Tuple

import torch
import torch.nn.functional as F
from bilm_sizes import SIZES

from elmo_plugin.common.hardware import bfloat16_support, describe_run

MIB = 2**20


def products(size: str, rows: int, tokens: int, bfloat16: bool) -> Dict[str, Tuple[Callable, float]]:
    """Each per-step product of one layer and direction: ``name -> (call, bytes of weights read)``."""
    cells, projection = SIZES[size]["dim"], SIZES[size]["projection_dim"]
    gates = 4 * cells
    h = torch.randn(rows, projection)
    m = torch.randn(rows, cells)
    sequence = torch.randn(rows * tokens, projection)
    ours_recurrent = torch.randn(projection, gates)  # (in, out): TensorFlow's layout, ours
    ours_projection = torch.randn(cells, projection)
    ours_input = torch.randn(projection, gates)
    core_input = torch.randn(gates, projection)  # (out, in): nn.Linear's, AllenNLP core's
    core_state = torch.randn(gates, projection)
    core_state_bias = torch.randn(gates)
    core_projection = torch.randn(projection, cells)
    weight = 4 * projection * gates  # bytes of one float32 (projection x 4 cells) matrix
    table = {
        "ours: recurrent h @ R (in, out)": (lambda: h @ ours_recurrent, weight),
        "ours: projection m @ P (in, out)": (lambda: m @ ours_projection, 4 * cells * projection),
        f"ours: input product / {tokens} steps": (lambda: sequence @ ours_input, weight),
        "core: input linear (out, in)": (lambda: F.linear(h, core_input), weight),
        "core: state linear + bias (out, in)": (
            lambda: F.linear(h, core_state, core_state_bias), weight),
        "core: projection linear (out, in)": (
            lambda: F.linear(m, core_projection), 4 * cells * projection),
    }
    if bfloat16:
        hb, rb, wb = h.bfloat16(), ours_recurrent.bfloat16(), core_state.bfloat16()
        table["bfloat16: h @ R (in, out)"] = (lambda: hb @ rb, weight / 2)
        table["bfloat16: linear (out, in)"] = (lambda: F.linear(hb, wb), weight / 2)
        if rows == 1:  # what our inference steps of one row use in bfloat16 (few_rows_weights)
            table["bfloat16: mv (out, in)"] = (lambda: torch.mv(wb, hb[0]), weight / 2)
    return table


def step_loops(size: str, rows: int, tokens: int) -> Dict[str, Callable]:
    """Each side's per-step products over ``tokens`` steps of one layer and direction."""
    cells, projection = SIZES[size]["dim"], SIZES[size]["projection_dim"]
    gates = 4 * cells
    h, m = torch.randn(rows, projection), torch.randn(rows, cells)
    sequence = torch.randn(rows * tokens, projection)
    ours = (torch.randn(projection, gates), torch.randn(cells, projection),
            torch.randn(projection, gates))
    core = (torch.randn(gates, projection), torch.randn(gates, projection), torch.randn(gates),
            torch.randn(projection, cells))

    def ours_loop():
        sequence @ ours[2]
        for _ in range(tokens):
            h @ ours[0]
            m @ ours[1]

    def core_loop():
        for _ in range(tokens):
            F.linear(h, core[0])
            F.linear(h, core[1], core[2])
            F.linear(m, core[3])

    return {"ours": ours_loop, "AllenNLP core": core_loop}


def read_speed(mib: int, rounds: int) -> float:
    """GB/s of summing a working set of ``mib`` MiB (8 MiB tensors) again and again."""
    parts = [torch.randn(min(mib, 8) * MIB // 4) for _ in range(max(1, mib // 8))]
    times = []
    for _ in range(rounds):
        start = time.perf_counter()
        for part in parts:
            part.sum()
        times.append(time.perf_counter() - start)
    return mib * MIB / statistics.median(times) / 1e9


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", nargs="+", default=["small", "original"])
    parser.add_argument("--rows", type=int, default=1, help="sentences per batch")
    parser.add_argument("--tokens", type=int, default=22,
                        help="steps per sentence (20 tokens with <S> and </S>: 22)")
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--bfloat16", action="store_true")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    native = bfloat16_support(torch.device("cpu"))
    print(f"# {describe_run()}; batch {args.rows}, {args.tokens} steps, {args.rounds} rounds; "
          f"bfloat16: {native.reason}")
    for size in args.sizes:
        table = products(size, args.rows, args.tokens, args.bfloat16)
        times: Dict[str, List[float]] = {name: [] for name in table}
        for name, (call, _) in table.items():  # warm up: first-touch pages, kernel selection
            for _ in range(3):
                call()
        for _ in range(args.rounds):
            for name, (call, _) in table.items():
                start = time.perf_counter()
                call()
                times[name].append(time.perf_counter() - start)
        print(f"\n## {size}\n")
        print("| product | weights MiB | ms | GB/s |")
        print("|---|---:|---:|---:|")
        median = {name: statistics.median(values) for name, values in times.items()}
        for name, (_, nbytes) in table.items():
            print(f"| {name} | {nbytes / MIB:.1f} | {median[name] * 1e3:.3f} | "
                  f"{nbytes / median[name] / 1e9:.1f} |")
        input_name = next(name for name in table if name.startswith("ours: input"))
        ours = (median["ours: recurrent h @ R (in, out)"] + median["ours: projection m @ P (in, out)"]
                + median[input_name] / args.tokens)
        core = sum(value for name, value in median.items() if name.startswith("core:"))
        ours_bytes = sum(table[name][1] for name in table if name.startswith("ours:"))
        ours_bytes -= table[input_name][1] * (1 - 1 / args.tokens)
        core_bytes = sum(table[name][1] for name in table if name.startswith("core:"))
        print(f"\nstep: ours {ours * 1e3:.3f} ms ({ours_bytes / MIB:.1f} MiB), AllenNLP core "
              f"{core * 1e3:.3f} ms ({core_bytes / MIB:.1f} MiB): **{core / ours:.2f}x** "
              f"(bytes alone: {core_bytes / ours_bytes:.2f}x)")
        loops = step_loops(size, args.rows, args.tokens)
        loop_times: Dict[str, List[float]] = {name: [] for name in loops}
        for call in loops.values():
            call()
        for _ in range(max(5, args.rounds // 4)):
            for name, call in loops.items():
                start = time.perf_counter()
                call()
                loop_times[name].append(time.perf_counter() - start)
        ours_loop, core_loop = (statistics.median(loop_times[name]) for name in loops)
        print(f"as the loops run them ({args.tokens} steps of one layer and direction): ours "
              f"{ours_loop * 1e3:.1f} ms, AllenNLP core {core_loop * 1e3:.1f} ms: "
              f"**{core_loop / ours_loop:.2f}x**")
    print("\n## read speed of one core by working set\n")
    print("| MiB | GB/s |")
    print("|---:|---:|")
    for mib in (2, 8, 16, 32, 40, 64, 72, 128, 256):
        print(f"| {mib} | {read_speed(mib, 9):.1f} |")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
