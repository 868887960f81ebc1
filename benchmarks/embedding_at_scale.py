"""
``allennlp elmo`` at corpus scale (issue 35): the layouts, sharding under torchrun, resuming.

    .venv/bin/python benchmarks/embedding_at_scale.py [--parts creation scale throughput resume
        projection] [--work-dir DIR] [--creation-sentences 20000] [--dim 1024]
        [--scale-sizes 10000 100000 1000000] [--stand-in fixture|constant]
        [--throughput-sentences 4000] [--ray-sentences 20000] [--options-file O --weight-file W]

Parts (each prints a Markdown table):

- ``creation``: the cost of the two layouts alone (h5py and this plugin's writers, no biLM):
  ``--creation-sentences`` sentences of 20 tokens x ``--dim`` float32/float16 written with
  `PerSentenceWriter` (one dataset per sentence) and `FlatWriter` (large appends).
- ``scale``: ``allennlp elmo --top --layout flat --float16`` on 10k ... 1M sentences (real
  English-like lines of 1-40 tokens), one process and two under torchrun: wall time and the
  peak resident memory of every process (``ru_maxrss``). The biLM is a stand-in so that 1M
  sentences are feasible on a CPU: ``fixture`` = the tests' tiny ELMo (real ELMo arithmetic,
  32 dims), ``constant`` (the default) = no biLM at all, a constant ``--scale-dim``-wide row per
  token (measures the reading, batching, writing, sentence index and assembly alone; 128 dims
  by default so that 1M sentences take about 5 GB of disk). The cost must grow linearly and the
  memory stay flat.
- ``throughput``: the same input embedded by one process (plain ``allennlp elmo``) and by two
  (torchrun, gloo): wall time, including both commands' start (the AllenNLP import, about 10 s
  on a busy machine), so use enough sentences.
- ``ray``: the same input (``--ray-sentences``, ``--top``, the fixture model) embedded by one
  process (HDF5, flat layout), by two under torchrun, and by ``--ray local`` with 1 and 2 workers
  (Parquet; Ray started by the command, as a user runs it): wall time with start, sentences/s and
  output bytes/s. Not in the default parts (it needs ``elmo_plugin[ray]``).
- ``resume``: under torchrun (2 processes), a full run; the same command again (everything
  reused: the fixed cost of a rerun, i.e. start, input hash, shard checks, assembly); then again
  after half of the shards were deleted (a run killed half-way).
- ``projection``: hours and terabytes for 1B tokens on 8 H100s with ``--top --float16``, from
  ``--gpu-tokens-per-second`` (default: BENCHMARKS.md "On a GPU", Original, batch 256, real
  sentence lengths, float32: 66,567 tokens/s on one H100) and the flat layout's write rate
  measured by ``creation`` at ``--dim`` (1024 = the Original's width); the assumptions are
  printed with it.

Every child is a fresh process: ``python benchmarks/embedding_at_scale.py child ...`` runs the
``allennlp`` command (optionally with the stand-in) and writes its ``ru_maxrss`` to a file.
"""
import argparse
import json
import os
import random
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Dict, List, Optional

import numpy as np

REPO_ROOT = Path(__file__).resolve().parents[1]
FIXTURES = REPO_ROOT / "tests" / "fixtures" / "elmo_allennlp"
ALLENNLP = str(Path(sys.executable).parent / "allennlp")

WORDS = (
    "the of and to a in is that for it as was with be by on not he this are or his from at "
    "which but have an they you were their one all we can her has there been if more when will "
    "would who so no , . ; : ! ? ( ) 1 2 3 ELMo vectors language model embedding corpus"
).split()


# ---------------------------------------------------------------------------------------------
# The child: one allennlp command (maybe with the stand-in biLM), its peak memory written out.


def _constant_stand_in(dim: int) -> None:
    """Replaces the biLM by a constant row per token: the pipeline around it is unchanged."""
    import torch

    from elmo_plugin.elmo_embedder import ElmoEmbedder

    def embed(self, batch, output_format):
        layers = 1 if output_format != "all" else 3
        return [
            np.full((len(tokens), dim) if layers == 1 else (3, len(tokens), dim), 0.5, np.float32)
            for tokens in batch
        ]

    ElmoEmbedder.embed_arrays = embed
    ElmoEmbedder.get_output_dim = lambda self: dim
    torch.set_num_threads(1)


def child(argv: List[str]) -> None:
    stand_in, dim, memory_dir = argv[0], int(argv[1]), argv[2]
    elmo_argv = argv[3:]
    if stand_in == "constant":
        _constant_stand_in(dim)
    from allennlp.commands import main

    sys.argv = ["allennlp"] + elmo_argv
    code = 0
    started = time.perf_counter()
    try:
        main(prog="allennlp")
    except SystemExit as exit:
        code = exit.code if isinstance(exit.code, int) else 1
    rank = os.environ.get("RANK", "0")
    with open(os.path.join(memory_dir, f"rank{rank}.json"), "w") as handle:
        json.dump(
            {
                "max_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
                "seconds_in_command": time.perf_counter() - started,
                "code": code,
            },
            handle,
        )
    sys.exit(code)


# ---------------------------------------------------------------------------------------------
# Helpers of the parent.


def write_corpus(path: Path, count: int, seed: int = 0) -> int:
    """``count`` lines of 1-40 tokens (mean about 20); returns the number of tokens."""
    generator = random.Random(seed)
    tokens = 0
    with open(path, "w", encoding="utf-8") as handle:
        for _ in range(count):
            length = min(40, max(1, int(generator.gauss(20, 8))))
            tokens += length
            handle.write(" ".join(generator.choice(WORDS) for _ in range(length)) + "\n")
    return tokens


def model_args(args: argparse.Namespace) -> List[str]:
    return ["--options-file", args.options_file, "--weight-file", args.weight_file]


def run_child(
    args: argparse.Namespace,
    elmo_argv: List[str],
    nproc: int,
    stand_in: str,
    memory_dir: Path,
    dim: int = 1024,
) -> Dict[str, object]:
    """Runs ``allennlp ELMO_ARGV`` in ``nproc`` processes (1: plain; more: torchrun); returns
    the wall time and every process's peak memory."""
    shutil.rmtree(memory_dir, ignore_errors=True)
    memory_dir.mkdir(parents=True)
    script = [os.path.abspath(__file__), "child", stand_in, str(dim), str(memory_dir)]
    if nproc == 1:
        command = [sys.executable, *script, *elmo_argv]
    else:
        command = [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", str(nproc),
                   "--master-addr", "127.0.0.1", "--master-port", str(args.port), *script,
                   *elmo_argv]
    env = dict(os.environ, PYTHONPATH=f"{REPO_ROOT}:{REPO_ROOT / 'benchmarks'}",
               OMP_NUM_THREADS=str(args.threads))
    for name in ("WORLD_SIZE", "RANK", "LOCAL_RANK"):
        env.pop(name, None)
    started = time.perf_counter()
    result = subprocess.run(command, capture_output=True, text=True, env=env, cwd=str(REPO_ROOT))
    wall = time.perf_counter() - started
    if result.returncode != 0:
        sys.stderr.write(result.stderr[-4000:])
        raise SystemExit(f"failed: {' '.join(command)}")
    ranks = [json.loads(path.read_text()) for path in sorted(memory_dir.glob("rank*.json"))]
    return {"wall_s": wall, "ranks": ranks, "stdout": result.stdout}


# ---------------------------------------------------------------------------------------------
# The parts.


def part_creation(args: argparse.Namespace, work: Path) -> Dict[str, float]:
    import h5py

    from elmo_plugin.embedding_output.flat_writer import FlatWriter
    from elmo_plugin.embedding_output.per_sentence_writer import PerSentenceWriter

    count, length, dim = args.creation_sentences, 20, args.dim
    rates: Dict[str, float] = {}
    print(f"\n### Dataset creation: {count:,} sentences of {length} tokens x {dim}, no biLM\n")
    print("| layout | stored as | seconds | sentences/s | rows/s | MB/s written |")
    print("|---|---|---:|---:|---:|---:|")
    array = np.random.default_rng(0).standard_normal((length, dim)).astype(np.float32)
    for layout in ("per-sentence", "flat"):
        for dtype in (np.float32, np.float16):
            path = work / f"creation-{layout}-{np.dtype(dtype).name}.hdf5"
            started = time.perf_counter()
            with h5py.File(path, "w") as handle:
                if layout == "flat":
                    writer = FlatWriter(
                        handle, ["top"], dim, np.dtype(dtype), write_sentences=False
                    )
                else:
                    writer = PerSentenceWriter(handle, np.dtype(dtype))
                for line in range(count):
                    writer.add(line, "", array)
                writer.finish()
            seconds = time.perf_counter() - started
            megabytes = count * length * dim * np.dtype(dtype).itemsize / 1e6
            rates[f"{layout}/{np.dtype(dtype).name}"] = count * length / seconds
            print(f"| {layout} | {np.dtype(dtype).name} | {seconds:.2f} | {count / seconds:,.0f} | "
                  f"{count * length / seconds:,.0f} | {megabytes / seconds:,.0f} |")
            path.unlink()
    return rates


def part_scale(args: argparse.Namespace, work: Path) -> None:
    print(f"\n### Flat layout from {args.scale_sizes[0]:,} to {args.scale_sizes[-1]:,} sentences "
          f"(--top --layout flat --float16; stand-in biLM: {args.stand_in}"
          f"{f', {args.scale_dim} dims' if args.stand_in == 'constant' else ''})\n")
    print("| sentences | tokens | processes | wall s | s in the command (rank 0) "
          "| s per 1k sentences (in the command) | peak RSS per process (MB) |")
    print("|---:|---:|---:|---:|---:|---:|---|")
    for size in args.scale_sizes:
        corpus = work / f"scale-{size}.txt"
        tokens = write_corpus(corpus, size)
        for nproc in args.scale_processes:
            output = work / f"scale-{size}-{nproc}.hdf5"
            elmo = ["elmo", str(corpus), str(output), "--top", "--layout", "flat", "--float16",
                    "--batch-size", "64", *model_args(args)]
            result = run_child(args, elmo, nproc, args.stand_in, work / "memory", args.scale_dim)
            memory = ", ".join(f"{rank['max_rss_mb']:.0f}" for rank in result["ranks"])
            inside = result["ranks"][0]["seconds_in_command"]
            print(f"| {size:,} | {tokens:,} | {nproc} | {result['wall_s']:.1f} | {inside:.1f} | "
                  f"{1000 * inside / size:.3f} | {memory} |", flush=True)
            output.unlink()
            shutil.rmtree(f"{output}.shards", ignore_errors=True)
        corpus.unlink()


def part_throughput(args: argparse.Namespace, work: Path) -> None:
    corpus = work / "throughput.txt"
    tokens = write_corpus(corpus, args.throughput_sentences, seed=1)
    print(f"\n### Embedding throughput, 1 and 2 processes "
          f"({args.throughput_sentences:,} sentences, "
          f"{tokens:,} tokens, --top, model {args.options_file}, {args.threads} thread(s) each)\n")
    print("| processes | wall s (with start) | tokens/s |")
    print("|---:|---:|---:|")
    for nproc in (1, 2):
        output = work / f"throughput-{nproc}.hdf5"
        elmo = ["elmo", str(corpus), str(output), "--top", "--layout", "flat",
                "--batch-size", "64", *model_args(args)]
        result = run_child(args, elmo, nproc, "fixture", work / "memory")
        rate = tokens / result["wall_s"]
        print(f"| {nproc} | {result['wall_s']:.1f} | {rate:,.0f} |", flush=True)
        output.unlink()
        shutil.rmtree(f"{output}.shards", ignore_errors=True)


def _size(path: Path) -> int:
    """Bytes of an output: a file, or a folder (Parquet) or a file with its shards, in all."""
    paths = [path, Path(f"{path}.shards")]
    total = 0
    for item in paths:
        if item.is_file():
            total += item.stat().st_size
        elif item.is_dir():
            total += sum(child.stat().st_size for child in item.rglob("*") if child.is_file())
    return total


def part_ray(args: argparse.Namespace, work: Path) -> None:
    corpus = work / "ray.txt"
    tokens = write_corpus(corpus, args.ray_sentences, seed=2)
    print(f"\n### --ray local against one process and torchrun ({args.ray_sentences:,} sentences, "
          f"{tokens:,} tokens, --top, model {args.options_file}, {args.threads} thread(s) each)\n")
    print("| run | wall s (with start) | sentences/s | output MB | output bytes/s |")
    print("|---|---:|---:|---:|---:|")
    runs = [("one process (HDF5, flat)", 1, "out.hdf5", ["--layout", "flat"]),
            ("torchrun, 2 processes (HDF5, flat)", 2, "out.hdf5", ["--layout", "flat"])]
    runs += [(f"--ray local, {workers} worker(s) (Parquet)", 1, "out.parquet",
              ["--ray", "local", "--ray-workers", str(workers)]) for workers in (1, 2)]
    for name, nproc, output_name, extra in runs:
        output = work / output_name
        elmo = ["elmo", str(corpus), str(output), "--top", "--batch-size", "64", *extra,
                *model_args(args)]
        result = run_child(args, elmo, nproc, "fixture", work / "memory")
        size = _size(output)
        wall = float(result["wall_s"])  # type: ignore[arg-type]
        print(f"| {name} | {wall:.1f} | {args.ray_sentences / wall:,.0f} | {size / 1e6:.1f} | "
              f"{size / wall:,.0f} |", flush=True)
        shutil.rmtree(output, ignore_errors=True)
        if output.is_file():
            output.unlink()
        shutil.rmtree(f"{output}.shards", ignore_errors=True)


def part_resume(args: argparse.Namespace, work: Path) -> None:
    corpus = work / "resume.txt"
    write_corpus(corpus, args.throughput_sentences, seed=2)
    output = work / "resume.hdf5"
    # Batches of 8: pieces are whole groups of 8 x 32 lines; one group per shard. --overwrite:
    # the same command runs again over the output it wrote.
    elmo = ["elmo", str(corpus), str(output), "--top", "--layout", "flat", "--batch-size", "8",
            "--shard-tokens", "1", "--overwrite", *model_args(args)]
    print(f"\n### Resume overhead (2 processes, {args.throughput_sentences:,} sentences, one "
          "shard per 256 lines)\n")
    print("| run | wall s |")
    print("|---|---:|")
    full = run_child(args, elmo, 2, "fixture", work / "memory")
    print(f"| full run | {full['wall_s']:.1f} |", flush=True)
    again = run_child(args, elmo, 2, "fixture", work / "memory")
    print(f"| the same command again (everything reused) | {again['wall_s']:.1f} |", flush=True)
    shards = sorted(Path(f"{output}.shards").glob("lines-*.hdf5"))
    for shard in shards[::2]:
        shard.unlink()
    half = run_child(args, elmo, 2, "fixture", work / "memory")
    reused = [line for line in half["stdout"].splitlines() if "reused" in line]
    print(f"| after deleting {len(shards[::2])} of {len(shards)} shards | {half['wall_s']:.1f} |")
    print(f"\n{reused[-1] if reused else ''}")
    output.unlink()
    shutil.rmtree(f"{output}.shards", ignore_errors=True)


def part_projection(args: argparse.Namespace, write_rows_per_s: Optional[float]) -> None:
    tokens = 1e9
    gpus = 8
    bytes_per_token = args.dim * 2  # --top, float16
    terabytes = tokens * bytes_per_token / 1e12
    compute_h = tokens / (gpus * args.gpu_tokens_per_second) / 3600
    print(f"\n### Projection: 1B tokens, {gpus} H100s, --top --float16 --layout flat\n")
    print(f"- storage: {tokens:.0e} tokens x {args.dim} dims x 2 bytes = **{terabytes:.2f} TB** "
          f"of vectors, plus offsets (8 bytes a sentence: 0.36 GB for 45M sentences) and the "
          "sentence index (about the size of the input text)")
    print(f"- compute: {tokens:.0e} / ({gpus} x {args.gpu_tokens_per_second:,.0f} tokens/s) = "
          f"**{compute_h:.2f} h**")
    needed = gpus * args.gpu_tokens_per_second * bytes_per_token / 1e6
    print(f"- the ranks then write {needed:,.0f} MB/s together")
    if write_rows_per_s:
        write_h = tokens / (gpus * write_rows_per_s) / 3600
        print(f"- the flat writer alone, as measured here (one process, {write_rows_per_s:,.0f} "
              f"rows/s of {args.dim} float16), would take {write_h:.2f} h with 8 processes "
              "writing to disks as fast as this one each")
        print(f"- projected: **{max(compute_h, write_h):.2f} h** (the slower of the two; writing "
              "overlaps nothing in this implementation, so the sum "
              f"{compute_h + write_h:.2f} h is the pessimistic bound)")
    print("- assumptions: the GPU rate is BENCHMARKS.md's (Original, batch 256, real lengths, "
          "float32, one H100) and scales linearly to 8 GPUs (the ranks share nothing but the "
          "file system); the start (model load, input hash and plan: one pass over the text) and "
          "the assembly (virtual datasets: seconds) are not counted")


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "child":
        child(sys.argv[2:])
        return
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--parts", nargs="+",
                        default=["creation", "scale", "throughput", "resume", "projection"])
    parser.add_argument("--work-dir", default=None, help="where files are written (default: a "
                        "new temporary directory under the current one, removed afterwards)")
    parser.add_argument("--creation-sentences", type=int, default=20000)
    parser.add_argument("--dim", type=int, default=1024)
    parser.add_argument("--scale-sizes", type=int, nargs="+", default=[10000, 100000, 1000000])
    parser.add_argument("--scale-processes", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--stand-in", choices=["fixture", "constant"], default="constant")
    parser.add_argument("--scale-dim", type=int, default=128, help="the constant stand-in's "
                        "width (1M sentences at 128 dims in float16: about 5 GB on disk)")
    parser.add_argument("--throughput-sentences", type=int, default=4000)
    parser.add_argument("--ray-sentences", type=int, default=20000, help="the ray part's input "
                        "(chunks of 2,048 lines are what Ray's workers share)")
    parser.add_argument("--options-file", default=str(FIXTURES / "options.json"))
    parser.add_argument("--weight-file", default=str(FIXTURES / "lm_weights.hdf5"))
    parser.add_argument("--threads", type=int, default=1, help="OMP threads of every process")
    parser.add_argument("--port", type=int, default=29517)
    parser.add_argument("--gpu-tokens-per-second", type=float, default=66567.0)
    args = parser.parse_args()

    import torch

    from elmo_plugin.common.hardware import describe_run

    torch.set_num_threads(args.threads)
    print(describe_run())
    work = Path(args.work_dir or tempfile.mkdtemp(prefix="embedding_at_scale.", dir="."))
    work.mkdir(parents=True, exist_ok=True)
    try:
        rates: Dict[str, float] = {}
        if "creation" in args.parts:
            rates = part_creation(args, work)
        if "scale" in args.parts:
            part_scale(args, work)
        if "throughput" in args.parts:
            part_throughput(args, work)
        if "ray" in args.parts:
            part_ray(args, work)
        if "resume" in args.parts:
            part_resume(args, work)
        if "projection" in args.parts:
            part_projection(args, rates.get("flat/float16"))
    finally:
        if args.work_dir is None:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
