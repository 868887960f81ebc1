"""
Downstream gains of ELMo: trains each task config of ``training_configs/tasks/`` as the baseline
and as +ELMo, then prints the BENCHMARKS.md table (test score, epochs, wall time) and plots the
learned softmax-normalised layer weights of every +ELMo model (the paper's Figure 2).

    .venv/bin/python benchmarks/task_gains.py --train            # all 8 runs, then the table
    .venv/bin/python benchmarks/task_gains.py --train --tasks pos_ewt --variants elmo
    .venv/bin/python benchmarks/task_gains.py --figure docs/layer_weights.png   # table + figure

Runs go to ``build/tasks/CONFIG`` (an existing run is kept unless ``--train`` is given for it).
Each run uses ``--threads`` torch threads (default 1), so two can share a 2-core machine, and
``--jobs N`` trains N runs at a time (default 1): on a 2-core machine ``--threads 1 --jobs 2`` does
more work per hour than one run on 2 threads, since small LSTMs use a second thread poorly
(BENCHMARKS.md, "Korean"). The +ELMo runs, the long ones, start first. A failed run does not stop
the others; the script exits with an error naming the failed runs after the rest have finished.
``--num-epochs N`` trains every run for N epochs (AllenNLP's ``-o`` override of the trainer);
``--bilm DIR`` gives the +ELMo runs another biLM (a directory with ``options.json`` and
``weights.hdf5``, as ``allennlp elmo-export`` writes): the script then writes a config that calls
the task's function with it, as a user adapting a config would. ``--variants elmo_io`` (Korean
tasks) trains ELMo at the encoder's input and output (the paper's section 3.3; docs/tasks.md, "ELMo
at the encoder's output"), as runs ``TASK_elmo_io[_seedN]`` from a config written the same way.
"""
import argparse
import json
import os
import re
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Dict, List, Optional, Tuple

import numpy as np
import torch

from elmo_plugin.common.hardware import describe_run

REPO = Path(__file__).resolve().parents[1]
TASKS = ["ner_wikiann", "ner_wnut17", "pos_ewt", "srl_up_ewt", "genre_ewt", "nsmc_sentiment", "klue_ner"]
KOREAN_TASKS = {"nsmc_sentiment", "klue_ner"}
# The task functions that take elmo_at_output (ELMo at the encoder's output too).
ELMO_AT_OUTPUT_TASKS = {"nsmc_sentiment", "klue_ner"}
VARIANTS = ["baseline", "elmo", "elmo_io"]
METRIC = {
    "ner_wikiann": ("test_f1-measure-overall", "span F1"),
    "ner_wnut17": ("test_f1-measure-overall", "span F1"),
    "pos_ewt": ("test_accuracy", "accuracy"),
    "srl_up_ewt": ("test_f1-measure-overall", "span F1"),
    "genre_ewt": ("test_accuracy", "accuracy"),
    "nsmc_sentiment": ("test_accuracy", "accuracy"),
    "klue_ner": ("test_entity_macro_f1", "entity macro F1 (characters, as KLUE)"),
}
TITLE = {
    "ner_wikiann": "NER (WikiANN)",
    "ner_wnut17": "NER (WNUT-17)",
    "pos_ewt": "POS (EWT UPOS)",
    "srl_up_ewt": "SRL (UP EWT)",
    "genre_ewt": "Genre (EWT)",
    "nsmc_sentiment": "Sentiment (NSMC, Korean)",
    "klue_ner": "NER (KLUE, Korean)",
}


def config_name(task: str, variant: str) -> str:
    return task if variant == "baseline" else f"{task}_{variant}"


def config_file(task: str, variant: str, runs: Path, bilm: Optional[Path]) -> Path:
    """The task config to train: the repository's, or for ``--bilm`` one that calls its function."""
    tasks = REPO / "training_configs" / "tasks"
    if variant == "elmo_io" and task not in ELMO_AT_OUTPUT_TASKS:
        sys.exit(f"--variants elmo_io: {task} has no elmo_at_output argument")
    if variant == "baseline" or (variant == "elmo" and bilm is None):
        return tasks / f"{config_name(task, variant)}.jsonnet"
    # The task's default biLM supplies what --bilm does not (do_layer_norm).
    default_elmo = "korean_elmo" if task in KOREAN_TASKS else "english_elmo"
    elmo = f"common.{default_elmo}"
    if bilm is not None:
        options = json.loads((bilm / "options.json").read_text(encoding="utf-8"))
        elmo += " + " + json.dumps({
            "options_file": str((bilm / "options.json").resolve()),
            "weight_file": str((bilm / "weights.hdf5").resolve()),
            "output_dim": 2 * options["lstm"]["projection_dim"],
            "max_characters_per_token": options["char_cnn"]["max_characters_per_token"],
        })
    at_output = ", elmo_at_output=true" if variant == "elmo_io" else ""
    path = runs / f"{config_name(task, variant)}.jsonnet"
    path.write_text(
        f'local common = import "{tasks / "task_common.libsonnet"}";\n'
        f'(import "{tasks / (task + ".libsonnet")}")(use_elmo=true, elmo={elmo}{at_output})\n',
        encoding="utf-8",
    )
    return path


def run_name(task: str, variant: str, seed: Optional[int]) -> str:
    """``TASK[_elmo]``, or ``TASK[_elmo]_seedN`` for a run with its own seed."""
    config = config_name(task, variant)
    return config if seed is None else f"{config}_seed{seed}"


def train(
    config: str,
    config_path: Path,
    runs: Path,
    threads: int,
    num_epochs: Optional[int] = None,
    seed: Optional[int] = None,
    overrides: Optional[Dict] = None,
) -> None:
    """
    ``allennlp train`` of ``config_path`` into ``runs/config`` (its log ``runs/config.log``),
    with ``threads`` torch threads, and ``num_epochs``, ``seed`` and any other ``overrides``
    (AllenNLP's ``-o``, dotted keys) applied to the config.
    """
    serialization_dir = runs / config
    if serialization_dir.exists():
        subprocess.run(["rm", "-rf", str(serialization_dir)], check=True)
    env = {**os.environ, "OMP_NUM_THREADS": str(threads), "MKL_NUM_THREADS": str(threads)}
    command = [
        # This interpreter's allennlp, so that the script runs in any environment (a worktree,
        # the GPU machine's carried packages), not only in the repository's .venv.
        sys.executable, "-m", "allennlp", "train", str(config_path),
        "--include-package", "elmo_plugin", "-s", str(serialization_dir), "--file-friendly-logging",
    ]
    overrides = dict(overrides or {})
    if num_epochs is not None:
        overrides["trainer.num_epochs"] = num_epochs
    if seed is not None:
        # AllenNLP's three seeds (Python, NumPy, torch); the configs leave AllenNLP's defaults.
        overrides.update(random_seed=seed, numpy_seed=seed, pytorch_seed=seed)
    if overrides:
        command += ["-o", json.dumps(overrides)]
    print("+", " ".join(command), flush=True)
    start = time.time()
    with open(runs / f"{config}.log", "w") as log:
        result = subprocess.run(command, cwd=REPO, env=env, stdout=log, stderr=subprocess.STDOUT)
    if result.returncode != 0:
        raise RuntimeError(f"{config} failed (exit {result.returncode}); see {runs / (config + '.log')}")
    print(f"finished {config} in {minutes(time.time() - start)}", flush=True)
    (serialization_dir / "wall_seconds.txt").write_text(f"{time.time() - start:.0f}\n")


def read_run(runs: Path, config: str) -> Optional[Dict]:
    metrics_file = runs / config / "metrics.json"
    if not metrics_file.is_file():
        return None
    metrics = json.loads(metrics_file.read_text())
    wall = runs / config / "wall_seconds.txt"
    if wall.is_file():
        metrics["wall_seconds"] = float(wall.read_text())
    else:
        # A run started by hand: AllenNLP's own training time (without start-up and the test).
        hours, mins, secs = metrics.get("training_duration", "0:0:0").split(":")
        metrics["wall_seconds"] = int(hours) * 3600 + int(mins) * 60 + float(secs)
    return metrics


def layer_weights(runs: Path, config: str) -> Optional[List[float]]:
    """softmax(s) of the +ELMo model's mix, from its best weights."""
    weights_file = runs / config / "best.th"
    if not weights_file.is_file():
        return None
    state = torch.load(weights_file, map_location="cpu")
    # One vector in elmo_plugin 0.1; AllenNLP's list ("...scalar_parameters.0", ...) since.
    vector = state.get(next((n for n in state if n.endswith("scalar_mix_0.scalar_parameters")), ""))
    if vector is None:
        parts = sorted(
            (int(name.rsplit(".", 1)[1]), value)
            for name, value in state.items()
            if re.search(r"scalar_mix_0\.scalar_parameters\.\d+$", name)
        )
        if not parts:
            return None
        vector = torch.cat([value.reshape(1) for _, value in parts])
    return torch.softmax(vector.float(), dim=0).tolist()


def minutes(seconds: Optional[float]) -> str:
    return "-" if seconds is None else f"{seconds / 60:.1f} min"


def mean_std(scores: List[float]) -> str:
    """``mean ± sample std (n)`` of scores, to two decimals (std nan for a single score)."""
    std = float(np.std(scores, ddof=1)) if len(scores) > 1 else float("nan")
    return f"{np.mean(scores):.2f} ± {std:.2f} ({len(scores)})"


def seeds_table(runs: Path, tasks: List[str], seeds: List[int]) -> str:
    """
    Mean ± sample standard deviation over the seeds' runs (``TASK[_elmo]_seedN``); where
    ``TASK_elmo_io_seedN`` runs exist, a second row puts them in the +ELMo column.
    """
    lines = [
        "| task | metric | baseline mean ± std (n) | +ELMo mean ± std (n) | gain | baseline runs | +ELMo runs "
        "| wall time per run baseline / +ELMo |",
        "|---|---|---:|---:|---:|---|---|---:|",
    ]
    rows = [(task, "elmo") for task in tasks] + [
        (task, "elmo_io") for task in tasks
        if any(read_run(runs, run_name(task, "elmo_io", seed)) for seed in seeds)
    ]
    for task, elmo_variant in rows:
        key, label = METRIC[task]
        title = TITLE[task] + (", ELMo at input and output" if elmo_variant == "elmo_io" else "")
        cells, walls, raw = [], [], []
        for variant in ("baseline", elmo_variant):
            found = [read_run(runs, run_name(task, variant, seed)) for seed in seeds]
            scores = [100 * m[key] for m in found if m is not None and key in m]
            seconds = [m["wall_seconds"] for m in found if m is not None]
            raw.append(scores)
            if scores:
                cells.append(mean_std(scores))
            else:
                cells.append("-")
            walls.append(minutes(float(np.mean(seconds))) if seconds else "-")
        gain = f"{np.mean(raw[1]) - np.mean(raw[0]):+.2f}" if raw[0] and raw[1] else "-"
        each = [", ".join(f"{x:.2f}" for x in scores) or "-" for scores in raw]
        lines.append(
            f"| {title} | {label} | {cells[0]} | {cells[1]} | {gain} | {each[0]} | {each[1]} | "
            f"{walls[0]} / {walls[1]} |"
        )
    return "\n".join(lines)


def table(runs: Path) -> str:
    lines = [
        "| task | metric | baseline | +ELMo | gain | epochs | wall time baseline / +ELMo "
        "| ELMo layer weights softmax(s) |",
        "|---|---|---:|---:|---:|---:|---:|---|",
    ]
    for task in TASKS:
        key, label = METRIC[task]
        base, elmo = read_run(runs, task), read_run(runs, f"{task}_elmo")
        score = lambda m: None if m is None or key not in m else 100 * m[key]  # noqa: E731
        b, e = score(base), score(elmo)
        gain = f"{e - b:+.2f}" if b is not None and e is not None else "-"
        epochs = "/".join(
            str(m.get("training_epochs", m.get("epoch", -1)) + 1) if m else "-" for m in (base, elmo)
        )
        weights = layer_weights(runs, f"{task}_elmo")
        lines.append(
            f"| {TITLE[task]} | {label} | {'-' if b is None else f'{b:.2f}'} | "
            f"{'-' if e is None else f'{e:.2f}'} | {gain} | {epochs} | "
            f"{minutes(base and base['wall_seconds'])} / {minutes(elmo and elmo['wall_seconds'])} | "
            f"{'-' if weights is None else ', '.join(f'{w:.2f}' for w in weights)} |"
        )
    return "\n".join(lines)


def figure(runs: Path, output: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    found = {task: layer_weights(runs, f"{task}_elmo") for task in TASKS}
    found = {task: w for task, w in found.items() if w is not None}
    if not found:
        sys.exit(f"no +ELMo runs with weights under {runs}")
    num_layers = max(len(w) for w in found.values())
    figure_, axis = plt.subplots(figsize=(6.4, 3.2))
    width = 0.8 / len(found)
    for i, (task, weights) in enumerate(found.items()):
        positions = [layer + (i - (len(found) - 1) / 2) * width for layer in range(len(weights))]
        axis.bar(positions, weights, width=width, label=TITLE[task])
    axis.axhline(1.0 / num_layers, color="gray", linestyle=":", linewidth=1, label="equal mix")
    axis.set_xticks(range(num_layers))
    axis.set_xticklabels(["0: characters"] + [f"{j}: LSTM {j}" for j in range(1, num_layers)])
    axis.set_ylabel("softmax(s)$_j$")
    # Head room above the bars for the legend.
    axis.set_ylim(0, 1.45 * max(max(w) for w in found.values()))
    axis.set_title("Learned ELMo layer weights (our bilm_small biLMs, frozen)")
    axis.legend(fontsize=8, ncol=2)
    figure_.tight_layout()
    output.parent.mkdir(parents=True, exist_ok=True)
    figure_.savefig(output, dpi=120)
    print(f"wrote {output}")


def selected_runs(args: argparse.Namespace) -> List[Tuple[str, str, Optional[int]]]:
    """
    (task, variant, seed) of every run to train, the +ELMo variants first: with ``--jobs`` > 1
    the long runs then start early and the last to finish are short ones.
    """
    runs = [
        (task, variant, seed)
        for task in args.tasks
        for variant in args.variants
        for seed in args.seeds or [None]
    ]
    return sorted(runs, key=lambda run: run[1] == "baseline")  # stable: keeps the given order


def train_all(runs: List[Tuple[str, str, Optional[int]]], args: argparse.Namespace) -> List[str]:
    """Trains the runs, ``args.jobs`` at a time; returns the messages of the failed ones."""
    to_train = []
    for task, variant, seed in runs:
        name = run_name(task, variant, seed)
        if args.keep_finished and (args.runs / name / "metrics.json").is_file():
            print(f"kept {name} (finished)", flush=True)
            continue
        # Written here, in one thread, before any run starts.
        to_train.append((name, config_file(task, variant, args.runs, args.bilm), seed))

    def train_one(name: str, config_path: Path, seed: Optional[int]) -> Optional[str]:
        try:
            train(name, config_path, args.runs, args.threads, args.num_epochs, seed)
        except RuntimeError as error:
            print(error, flush=True)
            return str(error)
        return None

    with ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        results = list(pool.map(lambda run: train_one(*run), to_train))
    return [message for message in results if message is not None]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    parser.add_argument("--runs", type=Path, default=REPO / "build" / "tasks")
    parser.add_argument("--train", action="store_true", help="train the selected runs first")
    parser.add_argument("--tasks", nargs="+", choices=TASKS, default=TASKS)
    parser.add_argument("--variants", nargs="+", choices=VARIANTS, default=["baseline", "elmo"])
    parser.add_argument("--threads", type=int, default=1, help="torch threads per run")
    parser.add_argument("--jobs", type=int, default=1, help="runs trained at the same time")
    parser.add_argument("--num-epochs", type=int, help="epochs for every run (default: each config's)")
    parser.add_argument(
        "--seeds", type=int, nargs="+",
        help="train one run per seed (TASK[_elmo]_seedN) and print mean ± std over them",
    )
    parser.add_argument(
        "--keep-finished", action="store_true",
        help="with --train, skip runs that already have metrics.json (to resume a series)",
    )
    parser.add_argument("--bilm", type=Path, help="the +ELMo runs' biLM: a directory of options.json + weights.hdf5")
    parser.add_argument("--figure", type=Path, help="also plot the layer weights to this PNG")
    args = parser.parse_args()
    args.runs.mkdir(parents=True, exist_ok=True)
    if args.train:
        failed = train_all(selected_runs(args), args)
        if failed:
            sys.exit("failed runs:\n" + "\n".join(failed))
    print(f"{describe_run()}, {os.cpu_count()} cores")
    print(seeds_table(args.runs, args.tasks, args.seeds) if args.seeds else table(args.runs))
    if args.figure:
        figure(args.runs, args.figure)


if __name__ == "__main__":
    main()
