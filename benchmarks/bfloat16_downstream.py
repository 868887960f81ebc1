"""
What ``precision="bfloat16"`` does to a downstream task (issue 28): the task's +ELMo model
trained with float32 ELMo features and evaluated with float32 and with bfloat16 features, and the
same model trained with bfloat16 features, with the same seeds.

    .venv/bin/python benchmarks/bfloat16_downstream.py --bilm DIR [--task pos_ewt]
        [--seeds 1 2] [--runs build/bfloat16_downstream] [--cuda-device -1] [--jobs 1]
        [--threads 1] [--num-epochs N]

DIR is a trained biLM (``options.json`` + ``weights.hdf5``, as ``allennlp elmo-export`` or
``make pretrain-small`` writes). Each run is ``allennlp train`` of the task's +ELMo config
(``training_configs/tasks/``, written for ``--bilm`` as ``task_gains.py`` does) with
``precision`` set on its ``elmo_token_embedder`` by AllenNLP's ``-o``; the float32 runs are then
evaluated on the test file again with ``allennlp evaluate --overrides`` setting bfloat16. Runs go
to ``RUNS/TASK_PRECISION_seedN`` (an existing run is trained again).

bfloat16 must be native where the runs compute (``--cuda-device N``: an Ampere or newer GPU; the
CPU: AVX512-BF16 or AMX), or the option warns and computes float32, and the table would compare
float32 with itself: the script stops before training if it is not.
"""
import argparse
import json
import os
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Dict, List, Optional

import torch
from allennlp.common import Params
from task_gains import METRIC, REPO, TASKS, config_file, mean_std, read_run, train

from elmo_plugin.common.hardware import bfloat16_support, describe_run

NATIVE_LINE = "precision bfloat16: the biLM's products in bfloat16"
PRECISION_KEY = "model.text_field_embedder.token_embedders.elmo.precision"


def run_name(task: str, precision: str, seed: int) -> str:
    return f"{task}_{precision}_seed{seed}"


def evaluate_in_bfloat16(runs: Path, name: str, test_file: str, cuda_device: int,
                         threads: int) -> Dict:
    """The float32-trained run's test metrics with bfloat16 ELMo features."""
    output = runs / name / "test_bfloat16.json"
    command = [
        sys.executable, "-m", "allennlp", "evaluate", str(runs / name / "model.tar.gz"), test_file,
        "--include-package", "elmo_plugin", "--cuda-device", str(cuda_device),
        "--output-file", str(output), "--overrides", json.dumps({PRECISION_KEY: "bfloat16"}),
        "--file-friendly-logging",
    ]
    print("+", " ".join(command), flush=True)
    env = {"OMP_NUM_THREADS": str(threads), "MKL_NUM_THREADS": str(threads)}
    with open(runs / f"{name}_evaluate_bfloat16.log", "w") as log:
        result = subprocess.run(command, cwd=REPO, stdout=log, stderr=subprocess.STDOUT,
                                env={**os.environ, **env})
    if result.returncode != 0:
        raise RuntimeError(f"evaluating {name} in bfloat16 failed; see {log.name}")
    return json.loads(output.read_text())


def main() -> Optional[int]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--bilm", type=Path, required=True)
    parser.add_argument("--task", choices=TASKS, default="pos_ewt")
    parser.add_argument("--seeds", nargs="+", type=int, default=[1, 2])
    parser.add_argument("--runs", type=Path, default=REPO / "build" / "bfloat16_downstream")
    parser.add_argument("--cuda-device", type=int, default=-1)
    parser.add_argument("--jobs", type=int, default=1, help="runs trained at the same time")
    parser.add_argument("--threads", type=int, default=1, help="torch threads per run")
    parser.add_argument("--num-epochs", type=int, help="epochs for every run (default: the task's)")
    parser.add_argument("--table-only", action="store_true", help="print the table of finished runs")
    args = parser.parse_args()
    device = torch.device("cpu" if args.cuda_device < 0 else f"cuda:{args.cuda_device}")
    support = bfloat16_support(device)
    print(f"# {describe_run(device)}; bfloat16 {'native' if support.native else 'NOT native'} "
          f"({support.reason})", flush=True)
    key, label = METRIC[args.task]
    args.runs.mkdir(parents=True, exist_ok=True)
    config = config_file(args.task, "elmo", args.runs, args.bilm)
    test_file = Params.from_file(str(config)).as_dict()["test_data_path"]
    if not args.table_only:
        if not support.native:
            sys.exit(f"bfloat16 is not native on {device} ({support.reason}): the bfloat16 runs "
                     "would compute float32; run where it is native")
        overrides = {"trainer.cuda_device": args.cuda_device}
        runs = [(precision, seed) for seed in args.seeds for precision in ("float32", "bfloat16")]

        def train_and_evaluate(run) -> None:
            precision, seed = run
            name = run_name(args.task, precision, seed)
            train(name, config, args.runs, args.threads, args.num_epochs, seed,
                  overrides={**overrides, PRECISION_KEY: precision})
            if precision == "float32":
                evaluate_in_bfloat16(args.runs, name, test_file, args.cuda_device, args.threads)
            # The option's own log line (elmo_plugin.modules.precision), so that a bfloat16
            # computation that fell back to float32 cannot pass for one in bfloat16.
            log = args.runs / (f"{name}_evaluate_bfloat16.log" if precision == "float32"
                               else f"{name}.log")
            if NATIVE_LINE not in log.read_text(encoding="utf-8", errors="replace"):
                raise RuntimeError(f"{log} does not say that the biLM ran in bfloat16")

        start = time.time()
        with ThreadPoolExecutor(max_workers=args.jobs) as pool:
            for future in [pool.submit(train_and_evaluate, run) for run in runs]:
                future.result()
        print(f"# {len(runs)} runs in {(time.time() - start) / 60:.1f} min", flush=True)

    print(f"\n{args.task}, test {label}, biLM {args.bilm}")
    print("| seed | trained float32, evaluated float32 | trained float32, evaluated bfloat16 "
          "| trained bfloat16, evaluated bfloat16 |")
    print("|---|---:|---:|---:|")
    columns: List[List[float]] = [[], [], []]
    for seed in args.seeds:
        float32 = read_run(args.runs, run_name(args.task, "float32", seed))
        bfloat16 = read_run(args.runs, run_name(args.task, "bfloat16", seed))
        evaluated = args.runs / run_name(args.task, "float32", seed) / "test_bfloat16.json"
        cells = [
            float32.get(key) if float32 else None,
            json.loads(evaluated.read_text()).get(key.replace("test_", "", 1)) if evaluated.is_file() else None,
            bfloat16.get(key) if bfloat16 else None,
        ]
        for column, value in zip(columns, cells):
            if value is not None:
                column.append(100 * value)
        print(f"| {seed} | " + " | ".join("-" if v is None else f"{100 * v:.2f}" for v in cells) + " |")
    print("| mean ± std | " + " | ".join(mean_std(column) if column else "-" for column in columns)
          + " |")
    return None


if __name__ == "__main__":
    sys.exit(main())
