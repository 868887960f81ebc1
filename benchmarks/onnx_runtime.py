"""
ONNX Runtime against our PyTorch biLM and AllenNLP core's ``_ElmoBiLm``: the graph that
``allennlp elmo-export --format onnx`` writes (random weights of each size), timed in one process
with the other two, the three calls one after another in every round, so that each round's
ratios compare calls made under the same load. Also each export's time and file size, and how
much sorting a mixed-length stream by length saves the graph (which computes every row of a
batch for its longest sentence's steps, finished rows masked, where ours shrinks the batch).

    .venv/bin/python benchmarks/onnx_runtime.py [--sizes small original] [--batch-sizes 1 64]
        [--rounds 10] [--tokens-per-sentence 20] [--threads 1] [--clock cpu|wall]
        [--mixed-sentences 256]

Batches are real English held-out sentences cut to ``--tokens-per-sentence`` tokens (0: their
own lengths). Reports per-call medians and the median and quartiles of the per-round ratios;
then, for ``--mixed-sentences`` sentences at their own lengths in batches of the largest
``--batch-sizes``, the padding share of the computed positions and the time per sentence in file
order and sorted by length (examples/serve_onnx.py's ``embed_sorted``), for ONNX Runtime and ours.
"""
import argparse
import importlib.util
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import onnxruntime
import torch
from allennlp.modules.elmo import _ElmoBiLm
from bilm_sizes import load_sentences, write_random_bilm

from elmo_plugin.common.hardware import describe_run
from elmo_plugin.data.character_ids import batch_to_ids
from elmo_plugin.export.onnx_export import MODEL_NAME, export_onnx
from elmo_plugin.modules.bilm import ElmoBiLm
from elmo_plugin.modules.util import remove_sentence_boundaries

CLOCKS = {"wall": time.perf_counter, "cpu": time.process_time}
SERVE = Path(__file__).resolve().parents[1] / "examples" / "serve_onnx.py"


def serve_module():
    spec = importlib.util.spec_from_file_location("serve_onnx", SERVE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def quartiles(ratios) -> str:
    if len(ratios) < 2:
        return f"{ratios[0]:.2f}x"
    low, middle, high = statistics.quantiles(ratios, n=4)
    return f"{middle:.2f}x ({low:.2f}-{high:.2f})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", nargs="+", default=["small", "original"])
    parser.add_argument("--batch-sizes", nargs="+", type=int, default=[1, 64])
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--tokens-per-sentence", type=int, default=20)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--clock", choices=sorted(CLOCKS), default="cpu")
    parser.add_argument("--mixed-sentences", type=int, default=256)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    clock = CLOCKS[args.clock]
    serve = serve_module()
    torch.manual_seed(0)
    print(f"# {describe_run()}; onnxruntime {onnxruntime.__version__} "
          f"({args.threads} intra-op threads); {args.clock} clock; {args.rounds} rounds; "
          f"{args.tokens_per_sentence or 'natural'} tokens per sentence")
    exports = []
    timings = []
    mixed = []
    for size in args.sizes:
        with tempfile.TemporaryDirectory() as directory:
            options_file, weight_file = write_random_bilm(size, directory)
            ours = ElmoBiLm.from_files(options_file, weight_file).eval()
            theirs = _ElmoBiLm(options_file, weight_file).eval()
            out = os.path.join(directory, "onnx")
            start = time.perf_counter()
            export_onnx(os.path.dirname(options_file), out)
            export_seconds = time.perf_counter() - start
            megabytes = os.path.getsize(os.path.join(out, MODEL_NAME)) / 1e6
            exports.append(f"| {size} | {export_seconds:.1f} | {megabytes:.1f} |")
            options = onnxruntime.SessionOptions()
            options.intra_op_num_threads = args.threads
            options.inter_op_num_threads = 1
            session = onnxruntime.InferenceSession(
                os.path.join(out, MODEL_NAME), options, providers=["CPUExecutionProvider"]
            )
            model = serve.ElmoOnnx.__new__(serve.ElmoOnnx)  # the example's class on this session
            model.session, model.input_name = session, "character_ids"
            model.output_names = [output.name for output in session.get_outputs()]
            model.character_ids = serve.CharacterIds.from_directory(out)

        def timed(function) -> float:
            start = clock()
            function()
            return clock() - start

        def run_theirs(ids):
            theirs._elmo_lstm.reset_states()
            return theirs(ids)

        for batch_size in args.batch_sizes:
            ids = batch_to_ids(load_sentences(batch_size, args.tokens_per_sentence))
            feed = {"character_ids": ids.numpy()}
            with torch.no_grad():
                output = ours(ids)
                expected, _ = remove_sentence_boundaries(
                    torch.stack(output["activations"]).transpose(0, 1).transpose(1, 2),
                    output["mask"])
                layers, _ = session.run(None, feed)
                difference = float(np.abs(layers - expected.permute(2, 0, 1, 3).numpy()).max())
                times = {"ORT": [], "ours": [], "AllenNLP": []}
                for _ in range(args.rounds):
                    times["ORT"].append(timed(lambda: session.run(None, feed)))
                    times["ours"].append(timed(lambda: ours(ids)))
                    times["AllenNLP"].append(timed(lambda: run_theirs(ids)))
            medians = {name: 1000 * statistics.median(values) for name, values in times.items()}
            ours_ratio = [b / a for a, b in zip(times["ORT"], times["ours"])]
            core_ratio = [b / a for a, b in zip(times["ORT"], times["AllenNLP"])]
            timings.append(
                f"| {size} | {batch_size} | {medians['ORT']:.1f} | {medians['ours']:.1f} | "
                f"{medians['AllenNLP']:.1f} | {quartiles(ours_ratio)} | {quartiles(core_ratio)} "
                f"| {difference:.1e} |"
            )
            print(timings[-1], flush=True)

        if args.mixed_sentences:
            batch_size = max(args.batch_sizes)
            sentences = load_sentences(args.mixed_sentences, 0)
            lengths = [len(sentence) for sentence in sentences]
            in_order = [list(range(start, min(start + batch_size, len(lengths))))
                        for start in range(0, len(lengths), batch_size)]
            by_length = serve.length_sorted_batches(lengths, batch_size)
            budgeted = serve.length_sorted_batches(lengths, batch_size, serve.DEFAULT_MAX_POSITIONS)
            for name, batches in (("file order", in_order), ("sorted", by_length),
                                  (f"sorted, {serve.DEFAULT_MAX_POSITIONS} positions", budgeted)):
                groups = [[sentences[i] for i in batch] for batch in batches]
                start = clock()
                for group in groups:
                    model.embed_batch(group)
                onnx_seconds = clock() - start
                start = clock()
                with torch.no_grad():
                    for group in groups:
                        ours(batch_to_ids(group))
                ours_seconds = clock() - start
                mixed.append(
                    f"| {size} | {batch_size} | {name} | "
                    f"{serve.padding_share(lengths, batches):.1%} | "
                    f"{1000 * onnx_seconds / len(sentences):.2f} | "
                    f"{1000 * ours_seconds / len(sentences):.2f} |"
                )
                print(mixed[-1], flush=True)

    print("\nExport (allennlp elmo-export --format onnx), random weights:\n")
    print("| size | export s | elmo.onnx MB |")
    print("|---|---:|---:|")
    print("\n".join(exports))
    print("\nPer call, median ms; ratios per round (>1: ONNX Runtime faster), quartiles:\n")
    print("| size | batch | ORT ms | ours ms | AllenNLP ms | ours / ORT | AllenNLP / ORT "
          "| max abs diff ORT-ours |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    print("\n".join(timings))
    if mixed:
        print(f"\n{args.mixed_sentences} held-out sentences at their own lengths: padding share "
              "of the positions the graph computes, and ms per sentence:\n")
        print("| size | batch | order | padding | ORT ms/sentence | ours ms/sentence |")
        print("|---|---:|---|---:|---:|---:|")
        print("\n".join(mixed))


if __name__ == "__main__":
    sys.exit(main())
