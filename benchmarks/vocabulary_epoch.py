"""
What a large vocabulary costs an epoch of training: one epoch of ``allennlp train
training_configs/bilm.jsonnet`` on the sample corpus with its own 160-word vocabulary, and the
same epoch with that vocabulary followed by filler words up to ``--large`` entries (800,000 by
default: the 1B Word Benchmark's 793,471, rounded), in one process, alternately, the vocabulary
the only difference. The filler words never occur in the corpus, so both runs read, batch and
train on the same tokens; only the softmax (``num_words x projection_dim``) and the sampler's
range grow.

    PYTHONPATH=. .venv/bin/python benchmarks/vocabulary_epoch.py [--large 800000] [--repeats 3]
        [--softmax sparse dense] [--threads N] [--batching sentences|stream] [--validation]
        [--json FILE]

``--softmax sparse`` is bilm.jsonnet as it is (``sparse_softmax``: the softmax's gradient and
Adagrad's update touch only the rows a step uses); ``dense`` is the reference
(``sparse_softmax=false``: dense gradients, torch's Adagrad over the whole softmax every step).
For each, the table gives the median over ``--repeats`` of the training epoch (the trainer's
``_train_epoch``), and the ratio of the large vocabulary's epoch to the small one's. The target: a
training epoch at 800,000 words at most 1.5x the 160-word one. ``--validation`` also runs and
times the validation pass, the full softmax over the vocabulary for every held-out token (it
grows with the vocabulary by definition: about a minute at 800,000 words on one core).
"""
import argparse
import json
import math
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Dict, List

import torch

REPOSITORY = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPOSITORY))

from allennlp.commands.train import train_model_from_file  # noqa: E402
from allennlp.training import Trainer  # noqa: E402

from elmo_plugin.common.hardware import describe_run  # noqa: E402

SAMPLE = REPOSITORY / "elmo_plugin" / "sample_corpus"
CONFIG = REPOSITORY / "training_configs" / "bilm.jsonnet"


def write_large_vocabulary(path: Path, size: int) -> None:
    """The sample vocabulary (frequency order), then filler words up to ``size`` entries."""
    words = (SAMPLE / "vocabulary.txt").read_text(encoding="utf-8").split()
    if size < len(words):
        raise SystemExit(f"--large {size} is smaller than the sample vocabulary ({len(words)})")
    fillers = (f"filler{index:07d}" for index in range(size - len(words)))
    with open(path, "w", encoding="utf-8") as handle:
        handle.write("\n".join(words) + "\n")
        handle.writelines(f"{word}\n" for word in fillers)


class PhaseTimer:
    """Times the trainer's training epochs and validation passes (wall clock)."""

    def __init__(self) -> None:
        self.seconds: Dict[str, List[float]] = {"train": [], "validation": []}

    def __enter__(self) -> "PhaseTimer":
        self._class = Trainer.resolve_class_name("gradient_descent")[0]
        self._originals = (self._class._train_epoch, self._class._validation_loss)
        train_epoch, validation_loss = self._originals

        def timed(kind: str, function):
            def method(trainer, epoch):
                start = time.perf_counter()
                try:
                    return function(trainer, epoch)
                finally:
                    self.seconds[kind].append(time.perf_counter() - start)

            return method

        self._class._train_epoch = timed("train", train_epoch)
        self._class._validation_loss = timed("validation", validation_loss)
        return self

    def __exit__(self, *exc) -> None:
        self._class._train_epoch, self._class._validation_loss = self._originals


def train_once(directory: Path, vocabulary: Path, softmax: str, batching: str,
               validation: bool) -> Dict[str, float]:
    config = directory / "config.jsonnet"
    config.write_text(
        f'(import "{CONFIG}")(num_epochs=1, batching="{batching}", '
        f'vocabulary_file="{vocabulary}", sparse_softmax={str(softmax == "sparse").lower()})\n',
        encoding="utf-8",
    )
    overrides = {"trainer.callbacks": []}
    if not validation:
        overrides["validation_data_path"] = None
    with PhaseTimer() as timer:
        train_model_from_file(str(config), str(directory / "run"), overrides=json.dumps(overrides))
    metrics = json.loads((directory / "run" / "metrics.json").read_text())
    return {"train": timer.seconds["train"][0],
            "validation": timer.seconds["validation"][0] if validation else math.nan,
            "validation_ppl": metrics.get("validation_ppl", math.nan),
            "training_ppl": metrics["training_ppl"]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--large", type=int, default=800_000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--softmax", nargs="+", default=["sparse", "dense"],
                        choices=["sparse", "dense"])
    parser.add_argument("--batching", default="sentences", choices=["sentences", "stream"])
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--validation", action="store_true",
                        help="also time the validation pass (full softmax)")
    parser.add_argument("--json", help="also write the results here")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    small_words = len((SAMPLE / "vocabulary.txt").read_text(encoding="utf-8").split())
    print(f"# {describe_run(torch.device('cpu'))}; torch {torch.__version__}, "
          f"{torch.get_num_threads()} threads")
    print(f"# one epoch of {CONFIG.name} ({args.batching} batching) on the sample corpus, "
          f"{small_words} against {args.large:,} words; median of {args.repeats}")
    results: Dict[str, Dict[int, List[Dict[str, float]]]] = {}
    with tempfile.TemporaryDirectory() as temporary:
        root = Path(temporary)
        large = root / "large_vocabulary.txt"
        write_large_vocabulary(large, args.large)
        vocabularies = {small_words: SAMPLE / "vocabulary.txt", args.large: large}
        for repeat in range(args.repeats):
            for softmax in args.softmax:
                for size, vocabulary in vocabularies.items():
                    directory = root / f"{softmax}_{size}_{repeat}"
                    directory.mkdir()
                    run = train_once(directory, vocabulary, softmax, args.batching,
                                     args.validation)
                    results.setdefault(softmax, {}).setdefault(size, []).append(run)
                    print(f"# {softmax} {size:,} words, run {repeat + 1}: training epoch "
                          f"{run['train']:.2f} s",
                          file=sys.stderr, flush=True)
    print("| softmax | words | training epoch s | validation s | training epoch / 160 words "
          "| training ppl | held-out ppl |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    table = []
    for softmax, by_size in results.items():
        base = statistics.median(run["train"] for run in by_size[small_words])
        for size, runs in by_size.items():
            train = statistics.median(run["train"] for run in runs)
            validation = statistics.median(run["validation"] for run in runs)
            row = dict(softmax=softmax, words=size, train_seconds=train,
                       validation_seconds=validation, ratio=train / base,
                       training_ppl=runs[0]["training_ppl"],
                       validation_ppl=runs[0]["validation_ppl"])
            table.append(row)
            print(f"| {softmax} | {size:,} | {train:.2f} | {validation:.2f} | "
                  f"{train / base:.2f}x | {row['training_ppl']:.2f} | "
                  f"{row['validation_ppl']:.2f} |")
    if args.json:
        Path(args.json).write_text(json.dumps(table, indent=1) + "\n", encoding="utf-8")


if __name__ == "__main__":
    sys.exit(main())
