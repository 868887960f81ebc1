"""
Where batch 1's time goes: ours against ONNX Runtime on our own export of the same random
weights, operator by operator, and the matrix products that make the gap timed alone with the
kernels PyTorch has for them.

    PYTHONPATH=$PWD/benchmarks .venv/bin/python benchmarks/batch1_kernels.py [--size small]
        [--tokens-per-sentence 20] [--calls 10] [--parts ours ort gemm]

``ours``: each operator's own CPU time per call under ``torch.profiler`` (grouped by input shapes,
the largest first). ``ort``: ONNX Runtime's node profile of the same sentence (``Scan`` holds the
LSTM's nodes, which are listed again on their own). ``gemm``: the shapes of Small's products at
batch 1 (the highway's 2048 x 4096 over the distinct tokens, an LSTM's input product over the
sentence, its recurrent product and projection for one step) through MKL (``torch.addmm``, what
runs now), oneDNN with a prepacked weight, and oneDNN prepacked with the inner dimension cut into
blocks whose products are summed; each with its largest error against float64, as a multiple of
MKL's. One thread throughout.
"""
import argparse
import collections
import json
import os
import sys
import tempfile
import time
from typing import Callable

import torch
from bilm_sizes import load_sentences, write_random_bilm
from torch.profiler import ProfilerActivity, profile

from elmo_plugin.common.hardware import describe_run
from elmo_plugin.data.character_ids import batch_to_ids
from elmo_plugin.modules.bilm import ElmoBiLm

# (rows, inner, outer) of Small at batch 1 of 20 tokens: the highway over 18 distinct tokens, an
# LSTM's input product over 22 positions, its recurrent product and its projection for one step.
SMALL_PRODUCTS = [(18, 2048, 4096), (22, 128, 4096), (1, 128, 4096), (1, 1024, 128)]


def per_call_microseconds(function: Callable[[], object], calls: int = 30) -> float:
    for _ in range(5):
        function()
    start = time.perf_counter()
    for _ in range(calls):
        function()
    return (time.perf_counter() - start) / calls * 1e6


def profile_ours(bilm: torch.nn.Module, ids: torch.Tensor, calls: int) -> None:
    with torch.no_grad():
        print(f"ours: {per_call_microseconds(lambda: bilm(ids), calls) / 1000:.1f} ms a call")
        with profile(activities=[ProfilerActivity.CPU], record_shapes=True) as run:
            for _ in range(calls):
                bilm(ids)
    events = run.key_averages(group_by_input_shape=True)
    print("| us a call | calls a call | operator | input shapes |\n|---:|---:|---|---|")
    for event in sorted(events, key=lambda e: -e.self_cpu_time_total)[:15]:
        print(f"| {event.self_cpu_time_total / calls:.0f} | {event.count / calls:.0f} | {event.key} "
              f"| {str(event.input_shapes)[:90]} |")


def profile_ort(options_file: str, ids: torch.Tensor, calls: int) -> None:
    import onnxruntime

    from elmo_plugin.export.onnx_export import MODEL_NAME, export_onnx

    with tempfile.TemporaryDirectory() as directory:
        export_onnx(os.path.dirname(options_file), directory)
        options = onnxruntime.SessionOptions()
        options.intra_op_num_threads, options.inter_op_num_threads = 1, 1
        feed = {"character_ids": ids.numpy()}
        session = onnxruntime.InferenceSession(os.path.join(directory, MODEL_NAME), options,
                                               providers=["CPUExecutionProvider"])
        print(f"ONNX Runtime {onnxruntime.__version__}: "
              f"{per_call_microseconds(lambda: session.run(None, feed), calls) / 1000:.1f} ms a call")
        options.enable_profiling = True
        options.profile_file_prefix = os.path.join(directory, "profile")
        session = onnxruntime.InferenceSession(os.path.join(directory, MODEL_NAME), options,
                                               providers=["CPUExecutionProvider"])
        for _ in range(calls):
            session.run(None, feed)
        with open(session.end_profiling(), encoding="utf-8") as trace:
            events = json.load(trace)
    time_by, count_by = collections.Counter(), collections.Counter()
    for event in events:
        if event.get("cat") == "Node" and event["name"].endswith("_kernel_time"):
            key = (event["args"].get("op_name"), str(event["args"].get("input_type_shape"))[:90])
            time_by[key] += event["dur"]
            count_by[key] += 1
    print("| us a call | calls a call | node | input shapes |\n|---:|---:|---|---|")
    for key, microseconds in time_by.most_common(15):
        print(f"| {microseconds / calls:.0f} | {count_by[key] / calls:.0f} | {key[0]} | {key[1]} |")


def compare_products() -> None:
    print("| rows x inner x outer | MKL us | oneDNN packed us (error / MKL's) | oneDNN packed, inner in "
          "blocks of 256, us (error / MKL's) |\n|---|---:|---:|---:|")
    torch.manual_seed(0)
    for rows, inner, outer in SMALL_PRODUCTS:
        x, weight, bias = torch.randn(rows, inner), torch.randn(outer, inner) / inner ** 0.5, torch.randn(outer)
        exact = torch.addmm(bias.double(), x.double(), weight.t().double())
        mkl_error = float((torch.addmm(bias, x, weight.t()).double() - exact).abs().max())
        cells = [f"{per_call_microseconds(lambda: torch.addmm(bias, x, weight.t())):.0f}"]
        for block in (inner, 256):
            starts = range(0, inner, block)
            packed = [torch.ops.mkldnn._reorder_linear_weight(weight[:, s:s + block].contiguous(), rows)
                      for s in starts]

            def blocked() -> torch.Tensor:
                out = torch.ops.mkldnn._linear_pointwise(x[:, :block].contiguous(), packed[0], bias, "none", [], "")
                for index, s in enumerate(starts):
                    if index:
                        out.add_(torch.ops.mkldnn._linear_pointwise(
                            x[:, s:s + block].contiguous(), packed[index], None, "none", [], ""))
                return out

            error = float((blocked().double() - exact).abs().max()) / mkl_error
            cells.append(f"{per_call_microseconds(blocked):.0f} ({error:.2f})")
        print(f"| {rows} x {inner} x {outer} | " + " | ".join(cells) + " |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size", default="small")
    parser.add_argument("--tokens-per-sentence", type=int, default=20)
    parser.add_argument("--calls", type=int, default=10)
    parser.add_argument("--parts", nargs="+", choices=["ours", "ort", "gemm"], default=["ours", "ort", "gemm"])
    args = parser.parse_args()
    torch.set_num_threads(1)
    print(f"# {describe_run()}; {args.size}, batch 1 x {args.tokens_per_sentence} tokens")
    ids = batch_to_ids(load_sentences(1, args.tokens_per_sentence))
    with tempfile.TemporaryDirectory() as directory:
        options_file, weight_file = write_random_bilm(args.size, directory)
        bilm = ElmoBiLm.from_files(options_file, weight_file).eval()
        if "ours" in args.parts:
            profile_ours(bilm, ids, args.calls)
        if "ort" in args.parts:
            profile_ort(options_file, ids, args.calls)
    if "gemm" in args.parts:
        compare_products()


if __name__ == "__main__":
    sys.exit(main())
