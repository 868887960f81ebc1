"""
Speed on a shared machine: embedding (``ElmoEmbedder``, the Python API that ``allennlp elmo``
runs) at batch 1 and 64, Small and Original, and a training step of Small, each quiet and then
with a busy process (a Python busy loop, one core's worth) started after the model has loaded,
on the plugin's own threads against one thread and against PyTorch's default (one per core).

    .venv/bin/python benchmarks/shared_machine.py [--sizes small original] [--works 1 64 train]
        [--settings own one default passive] [--seconds 8] [--repeats 1]

Each cell runs in a fresh process, so that the OpenMP settings are those a user's process starts
with: ``own`` sets nothing (the plugin chooses: `elmo_plugin.common.threads`), ``one`` sets
``OMP_NUM_THREADS=1``, ``default`` sets it to the cores (PyTorch's own number, fixed), ``passive``
is ``default`` with ``OMP_WAIT_POLICY=PASSIVE`` (OpenMP's threads sleep at once when idle instead
of spinning). Reports sentences/s (training: sentences of 20 tokens/s) over at least ``--seconds``
and 3 calls, quiet and busy, the median of ``--repeats``, and two ratios: busy against one thread's
busy speed, and quiet against the faster of one thread and the default quiet. Random weights (speed
does not depend on them); real held-out sentences cut to 20 tokens. Run it on an otherwise idle
machine.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Callable, Dict, List

SETTINGS = ("own", "one", "default", "passive")
WORKS = ("1", "64", "train")
TOKENS = 20
TRAINING_BATCH = 32


def environment(setting: str, cores: int) -> Dict[str, str]:
    env = {key: value for key, value in os.environ.items() if key not in ("OMP_NUM_THREADS", "OMP_WAIT_POLICY")}
    if setting == "one":
        env["OMP_NUM_THREADS"] = "1"
    elif setting in ("default", "passive"):
        env["OMP_NUM_THREADS"] = str(cores)
    if setting == "passive":
        env["OMP_WAIT_POLICY"] = "PASSIVE"
    env["PYTHONPATH"] = os.pathsep.join([str(Path(__file__).resolve().parents[1]), env.get("PYTHONPATH", "")])
    return env


def rate(call: Callable[[], None], rows: int, seconds: float) -> float:
    calls, start = 0, time.perf_counter()
    while calls < 3 or time.perf_counter() - start < seconds:
        call()
        calls += 1
    return calls * rows / (time.perf_counter() - start)


def embedding_call(size: str, rows: int, directory: str) -> Callable[[], None]:
    from bilm_sizes import load_sentences, write_random_bilm

    from elmo_plugin.elmo_embedder import ElmoEmbedder

    options_file, weight_file = write_random_bilm(size, directory)
    embedder = ElmoEmbedder(options_file, weight_file)
    batch = load_sentences(rows, TOKENS)
    return lambda: embedder.embed_batch(batch)


def training_call(size: str, directory: str) -> Callable[[], None]:
    """A training step as ``allennlp train`` runs it, `follow_the_load` first, as our trainer."""
    import torch
    from bilm_sizes import SIZES, load_sentences, write_random_bilm
    from training_throughput import make_step

    from elmo_plugin.common.threads import follow_the_load
    from elmo_plugin.data.character_ids import batch_to_ids
    from elmo_plugin.modules.bilm import ElmoBiLm
    from elmo_plugin.modules.sampled_softmax_loss import SampledSoftmaxLoss

    options_file, weight_file = write_random_bilm(size, directory)
    bilm = ElmoBiLm.from_files(options_file, weight_file, requires_grad=True).train()
    softmax = SampledSoftmaxLoss(100_000, SIZES[size]["projection_dim"], 8192, sparse_gradients=True).train()
    step = make_step(bilm, softmax, lambda: None)
    ids = batch_to_ids(load_sentences(TRAINING_BATCH, TOKENS))
    # <S> and </S> positions: the biLM adds them; the targets cover time + 2.
    targets = torch.nn.functional.pad(torch.randint(3, 100_000, ids.shape[:2]), (1, 1), value=1)
    most = torch.get_num_threads()

    def call() -> None:
        follow_the_load(most)
        step(ids, targets, softmax.sample(torch.device("cpu")))

    return call


def worker(size: str, work: str, seconds: float) -> Dict[str, float]:
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import torch

    with tempfile.TemporaryDirectory() as directory:
        if work == "train":
            call, rows = training_call(size, directory), TRAINING_BATCH
        else:
            call, rows = embedding_call(size, int(work), directory), int(work)
    call()
    call()
    quiet = rate(call, rows, seconds)
    busy_loop = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        busy = rate(call, rows, seconds)
    finally:
        busy_loop.kill()
        busy_loop.wait()
    return {"quiet": quiet, "busy": busy, "threads_at_end": torch.get_num_threads()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", nargs="+", default=["small", "original"])
    parser.add_argument("--works", nargs="+", choices=WORKS, default=list(WORKS))
    parser.add_argument("--settings", nargs="+", choices=SETTINGS, default=list(SETTINGS))
    parser.add_argument("--seconds", type=float, default=8.0)
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--worker", nargs=2, metavar=("SIZE", "WORK"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        print(json.dumps(worker(args.worker[0], args.worker[1], args.seconds)))
        return

    from elmo_plugin.common.hardware import describe_run
    from elmo_plugin.common.threads import usable_cores

    cores = usable_cores()
    print(f"# {describe_run()}; {cores} usable cores; {args.seconds:g} s a measurement, median of {args.repeats}")
    print("| size | work | setting | quiet /s | busy /s | busy / one's busy | quiet / best of one and default |")
    print("|---|---|---|---:|---:|---:|---:|")
    for size in args.sizes:
        for work in args.works:
            if work == "train" and size != args.sizes[0]:
                continue  # a training step of the first size only (Original's takes minutes)
            results: Dict[str, Dict[str, float]] = {}
            for setting in args.settings:
                runs: List[Dict[str, float]] = []
                for _ in range(args.repeats):
                    output = subprocess.run(
                        [sys.executable, __file__, "--worker", size, work, "--seconds", str(args.seconds)],
                        env=environment(setting, cores), check=True, capture_output=True, text=True,
                    ).stdout
                    runs.append(json.loads(output.strip().splitlines()[-1]))
                results[setting] = {key: statistics.median(run[key] for run in runs) for key in ("quiet", "busy")}
            for setting, result in results.items():
                one = results.get("one")
                best_quiet = max(results[name]["quiet"] for name in ("one", "default") if name in results)
                print(f"| {size} | {'train step' if work == 'train' else 'batch ' + work} | {setting} "
                      f"| {result['quiet']:.2f} | {result['busy']:.2f} "
                      f"| {result['busy'] / one['busy'] if one else float('nan'):.2f} "
                      f"| {result['quiet'] / best_quiet:.2f} |", flush=True)


if __name__ == "__main__":
    main()
