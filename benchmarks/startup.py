"""
Where the start-up time of the plugin's commands goes (issue 37): wall time of whole commands,
each run in a fresh process, and, for ``allennlp elmo --help``, the time of each phase of
AllenNLP's start-up and the import time by top-level package (``python -X importtime``).

    .venv/bin/python benchmarks/startup.py [--runs 5] [--json FILE]

Run it from the repository root (``allennlp`` finds the plugin through ``.allennlp_plugins``
there), alone on the machine: start-up is mostly reading and compiling thousands of modules, so
another process on the same cores slows it by seconds. Medians, with the smallest and largest of
the runs, are printed.

The phases are what ``allennlp <plugin command>`` does before the command runs (AllenNLP's
``allennlp.commands.parse_args`` and ``allennlp.common.plugins.import_plugins``): import
``allennlp.commands``; import every module of ``allennlp``; import every module of the default
plugin ``allennlp_models`` (AllenNLP does so whenever it is installed); import the plugins named in
``.allennlp_plugins`` (here ``elmo_plugin``). Only the last one is the plugin's own.
"""
import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Dict, List

BIN = Path(sys.executable).parent
PYTHON = str(BIN / "python")
ALLENNLP = str(BIN / "allennlp")

COMMANDS = {
    "python -c 'import torch'": [PYTHON, "-c", "import torch"],
    "python -c 'import allennlp.commands'": [PYTHON, "-c", "import allennlp.commands"],
    "python -c 'import elmo_plugin'": [PYTHON, "-c", "import elmo_plugin"],
    "allennlp --help": [ALLENNLP, "--help"],
    "allennlp elmo --help": [ALLENNLP, "elmo", "--help"],
}

# One process, timing AllenNLP's start-up for a plugin command phase by phase.
PHASES = r"""
import json, time
times = {}
start = time.perf_counter()
import allennlp.commands
times["import allennlp.commands"] = time.perf_counter() - start
from allennlp.common.util import import_module_and_submodules
start = time.perf_counter()
import_module_and_submodules("allennlp", exclude={"allennlp.sanity_checks", "allennlp.tools"})
times["every other allennlp module"] = time.perf_counter() - start
start = time.perf_counter()
try:
    import_module_and_submodules("allennlp_models")
except ModuleNotFoundError:
    pass
times["allennlp_models (default plugin)"] = time.perf_counter() - start
start = time.perf_counter()
import elmo_plugin
times["elmo_plugin"] = time.perf_counter() - start
print(json.dumps(times))
"""


def wall_times(command: List[str], runs: int) -> List[float]:
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        subprocess.run(command, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        times.append(time.perf_counter() - start)
    return times


def phase_times(runs: int) -> Dict[str, List[float]]:
    collected: Dict[str, List[float]] = {}
    for _ in range(runs):
        output = subprocess.run([PYTHON, "-c", PHASES], check=True, capture_output=True,
                                text=True).stdout
        for phase, seconds in json.loads(output.splitlines()[-1]).items():
            collected.setdefault(phase, []).append(seconds)
    return collected


def import_time_by_package(command: List[str]) -> Counter:
    """Seconds of import (each module's own time) by top-level package, from -X importtime."""
    script = ("import sys; sys.argv = " + repr(["allennlp"] + command[1:]) +
              "; from allennlp.__main__ import run; run()")
    stderr = subprocess.run([PYTHON, "-X", "importtime", "-c", script],
                            capture_output=True, text=True).stderr
    by_package: Counter = Counter()
    for line in stderr.splitlines():
        match = re.match(r"import time:\s+(\d+) \|\s+\d+ \|\s*([\w.]+)", line)
        if match:
            by_package[match.group(2).split(".")[0]] += int(match.group(1)) / 1e6
    return by_package


def summary(times: List[float]) -> str:
    return f"{statistics.median(times):6.2f} s  ({min(times):.2f}-{max(times):.2f})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=5, help="runs of each command")
    parser.add_argument("--json", help="also write the times to this file")
    args = parser.parse_args()
    if not Path(".allennlp_plugins").is_file():
        sys.exit("run this from the repository root (it needs .allennlp_plugins)")

    results: Dict[str, Dict[str, List[float]]] = {"commands": {}, "phases": {}}
    print(f"Wall time, median of {args.runs} runs (smallest-largest):")
    for name, command in COMMANDS.items():
        results["commands"][name] = wall_times(command, args.runs)
        print(f"  {name:40s} {summary(results['commands'][name])}")
    print(f"\nallennlp's start-up for a plugin command, by phase (median of {args.runs}):")
    results["phases"] = phase_times(args.runs)
    for phase, times in results["phases"].items():
        print(f"  {phase:40s} {summary(times)}")
    print("\nallennlp elmo --help, import time by top-level package (one run, -X importtime):")
    by_package = import_time_by_package(COMMANDS["allennlp elmo --help"])
    total = sum(by_package.values())
    for package, seconds in by_package.most_common(15):
        print(f"  {package:24s} {seconds:6.2f} s  {100 * seconds / total:4.1f} %")
    print(f"  {'all':24s} {total:6.2f} s")

    from elmo_plugin.common.hardware import describe_run

    print(f"\n{describe_run()}; {os.cpu_count()} CPUs; Python {sys.version.split()[0]}")
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1), encoding="utf-8")


if __name__ == "__main__":
    main()
