"""
Wall time of ``make demo`` (scripts/demo.py: pretrain the tiny biLM, export it, embed, check)
alone and beside a second busy process (a Python busy loop, one core's worth), with the demo's
own threads (one, the default) and with PyTorch's (one per core, ``OMP_NUM_THREADS`` set to the
cores), so that the cost of threads that wait for a busy core shows.

    .venv/bin/python benchmarks/demo_under_load.py [--runs quiet busy quiet-all-cores busy-all-cores]
        [--repeats 1] [--out DIR]

Prints, per run, the wall time from starting the demo to its exit, and the ratio of each busy run
to its quiet one (the issue asked for at most 2x with the demo's own threads). Run it on an
otherwise idle machine: on a shared one the figures vary with the other load.
"""
import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Dict, List

from elmo_plugin.common.hardware import describe_run
from elmo_plugin.common.threads import usable_cores

REPO = Path(__file__).resolve().parents[1]
RUNS = ("quiet", "busy", "quiet-all-cores", "busy-all-cores")


def run_demo(output: Path, busy: bool, all_cores: bool) -> float:
    environment = {**os.environ, "PYTHONPATH": str(REPO)}
    if all_cores:
        environment["OMP_NUM_THREADS"] = str(usable_cores())
    else:
        environment.pop("OMP_NUM_THREADS", None)
    busy_loop = subprocess.Popen([sys.executable, "-c", "while True: pass"]) if busy else None
    try:
        started = time.monotonic()
        subprocess.run([sys.executable, str(REPO / "scripts" / "demo.py"), str(output)], cwd=REPO,
                       env=environment, check=True, stdout=subprocess.DEVNULL)
        return time.monotonic() - started
    finally:
        if busy_loop is not None:
            busy_loop.kill()
            busy_loop.wait()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", nargs="+", choices=RUNS, default=list(RUNS))
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--out", type=Path, default=None, help="where the demo writes (a temporary folder)")
    args = parser.parse_args()
    print(describe_run())
    seconds: Dict[str, List[float]] = {}
    with tempfile.TemporaryDirectory() as temporary:
        output = args.out or Path(temporary) / "demo_output"
        for _ in range(args.repeats):
            for name in args.runs:
                wall = run_demo(output, busy=name.startswith("busy"), all_cores=name.endswith("all-cores"))
                seconds.setdefault(name, []).append(wall)
                print(f"{name:16} {wall:6.1f} s", flush=True)
    best = {name: min(walls) for name, walls in seconds.items()}
    for busy, quiet in (("busy", "quiet"), ("busy-all-cores", "quiet-all-cores")):
        if busy in best and quiet in best:
            print(f"{busy} / {quiet}: {best[busy] / best[quiet]:.2f}x (best of {args.repeats})")


if __name__ == "__main__":
    main()
