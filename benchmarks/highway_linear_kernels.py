"""
The highway layer's product (rows x 2,048 by 2,048 x 4,096, Small's and Original's size) through
the kernels a CPU offers, time and distance to float64: PyTorch's ``F.linear`` (what the plugin
and AllenNLP core use), ``addmm`` over an ``(in, out)`` copy of the weight, and oneDNN's private
``torch.ops.mkldnn._linear_pointwise`` (which the plugin used before issue 34).

    .venv/bin/python benchmarks/highway_linear_kernels.py [--rows 1 18 64 256] [--threads 1]
"""
import argparse
import statistics
import sys
import time

import torch

from elmo_plugin.common.hardware import describe_run


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, nargs="+", default=[1, 18, 64, 256])
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--repeats", type=int, default=21)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    print(f"# {describe_run()}")
    print("| rows | kernel | median ms | max abs distance to float64 |")
    print("|---:|---|---:|---:|")
    layer = torch.nn.Linear(2048, 4096).requires_grad_(False)
    weight_in_out = layer.weight.t().contiguous()
    for rows in args.rows:
        inputs = torch.randn(rows, 2048)
        kernels = {
            "F.linear": lambda: torch.nn.functional.linear(inputs, layer.weight, layer.bias),
            "addmm (in, out)": lambda: torch.addmm(layer.bias, inputs, weight_in_out),
        }
        if hasattr(torch.ops.mkldnn, "_linear_pointwise"):
            kernels["oneDNN _linear_pointwise"] = lambda: torch.ops.mkldnn._linear_pointwise(
                inputs, layer.weight, layer.bias, "none", [], "")
        exact = torch.nn.functional.linear(
            inputs.double(), layer.weight.double(), layer.bias.double())
        for name, kernel in kernels.items():
            for _ in range(3):
                kernel()
            times = []
            for _ in range(args.repeats):
                start = time.perf_counter()
                kernel()
                times.append(time.perf_counter() - start)
            distance = float((kernel().double() - exact).abs().max())
            print(f"| {rows} | {name} | {1000 * statistics.median(times):.2f} | {distance:.2e} |",
                  flush=True)


if __name__ == "__main__":
    sys.exit(main())
