"""
Wall time of pretraining a biLM config with ``allennlp train`` as one process against the
docs/pretraining.md's two-node rehearsal on this machine: two ``allennlp train`` processes, ``--node-rank 0``
and ``--node-rank 1``, one CPU worker each (``"distributed": {"cuda_devices": [-1],
"num_nodes": 2}``), gloo over 127.0.0.1, each node with its own serialization directory.

    .venv/bin/python benchmarks/multinode_pretraining.py [--config training_configs/bilm.jsonnet]
        [--num-epochs 1] [--threads 1] [--runs one two-nodes] [--out DIR] [-o '{...}']

Runs, in order (``--runs`` picks): ``one``, one process with ``--threads`` intra-op threads;
``one-2x``, one process with twice as many threads (the same cores as two nodes); ``two-nodes``.
Prints, per run, the wall time from starting the command(s) to the last exit (imports, the
vocabulary, reading the data and writing the archive included), the trainer's own
``training_duration`` (epochs only) and the held-out perplexity. The two nodes make half the
updates, each of a global batch of 2 x ``batch_size`` sentences (DDP averages the two nodes'
gradients), so their perplexity after the same epochs is not the single process's.
On a shared machine the figures vary with the other load: say so when quoting them.
"""
import argparse
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Dict, List

from elmo_plugin.common.hardware import describe_run

REPO = Path(__file__).resolve().parents[1]
ALLENNLP = str(Path(sys.executable).parent / "allennlp")


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _command(config: str, directory: Path, overrides: Dict) -> List[str]:
    return [ALLENNLP, "train", config, "--include-package", "elmo_plugin", "-s", str(directory),
            "-o", json.dumps(overrides)]


def run(name: str, args: argparse.Namespace, root: Path) -> Dict:
    overrides = {"trainer.num_epochs": args.num_epochs, **json.loads(args.overrides)}
    threads = args.threads * (2 if name == "one-2x" else 1)
    environment = {**os.environ, "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": str(threads)}
    if name == "two-nodes":
        overrides["distributed"] = {"cuda_devices": [-1], "num_nodes": 2,
                                    "primary_port": _free_port()}
        commands = [_command(args.config, root / name / f"node{rank}", overrides)
                    + ["--node-rank", str(rank)] for rank in range(2)]
    else:
        commands = [_command(args.config, root / name, overrides)]
    root.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    processes = [subprocess.Popen(command, env=environment, stdout=subprocess.DEVNULL,
                                  stderr=open(root / f"{name}-stderr{i}.log", "w"))
                 for i, command in enumerate(commands)]
    codes = [process.wait() for process in processes]
    wall = time.perf_counter() - start
    if any(codes):
        sys.exit(f"{name}: exit codes {codes}; see {root}/{name}-stderr*.log")
    directory = root / name / "node0" if name == "two-nodes" else root / name
    metrics = json.loads((directory / "metrics.json").read_text())
    return {"run": name, "processes": len(commands), "threads each": threads,
            "wall s": round(wall, 1), "training_duration": metrics["training_duration"],
            "validation ppl": round(metrics.get("validation_ppl", float("nan")), 2)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--config", default=str(REPO / "training_configs" / "bilm.jsonnet"))
    parser.add_argument("--num-epochs", type=int, default=1)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--runs", nargs="+", default=["one", "one-2x", "two-nodes"],
                        choices=["one", "one-2x", "two-nodes"])
    parser.add_argument("--out", help="where the runs are written (default: a temporary directory)")
    parser.add_argument("-o", "--overrides", default="{}", help="more AllenNLP overrides (JSON)")
    args = parser.parse_args()
    print(describe_run())
    print(f"config {args.config}, {args.num_epochs} epoch(s), overrides {args.overrides}")
    with tempfile.TemporaryDirectory() as temporary:
        root = Path(args.out or temporary)
        rows = [run(name, args, root) for name in args.runs]
    print("| run | processes x threads | wall s | training_duration | validation ppl |")
    print("|---|---|---|---|---|")
    for row in rows:
        print(f"| {row['run']} | {row['processes']} x {row['threads each']} | {row['wall s']} | "
              f"{row['training_duration']} | {row['validation ppl']} |")


if __name__ == "__main__":
    main()
