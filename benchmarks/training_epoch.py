"""
Training tokens/s sustained through ``allennlp train``: a stream epoch of a biLM config built as
``allennlp train`` builds it (the plugin's trainer, the ``bilm_stream`` data loader, the model,
the sparse softmax and ``dense_sparse_adagrad``), over the training corpus, timed from the end
of its first batch (the warm-up, and the compile of a compiled path) to the end of its last:
everything a step costs in a real run, the data path, the callbacks and the progress bar
included, beside the step alone that ``training_compiled.py`` times.

    PYTHONPATH=. python3 benchmarks/training_epoch.py [--config training_configs/bilm_original.jsonnet]
        [--size tiny|small|original] [--batch-size 384] [--unroll-steps 20] [--batches 50]
        [--num-samples 8192] [--corpus ../shared/data/en/lm/train] [--vocabulary FILE]
        [--vocabulary-size 793471]
        [--cuda-device -1] [--precision float32|tf32|bfloat16] [--compile false|default|...]
        [--json FILE]

The vocabulary is built from the corpus (``allennlp elmo-vocab``'s counting) unless given, and
filled up with words that never occur to ``--vocabulary-size`` entries (the recipe's 793,471:
the softmax and the sampler's range at their real size); validation, checkpoints and TensorBoard
are off (they are not the step). ``--size`` replaces the
config's architecture with one of ``bilm_sizes.SIZES`` (``tiny`` for a check on a CPU);
without it the config's own is trained.
"""
import argparse
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Dict, Iterator, List, Optional

import torch

REPOSITORY = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPOSITORY / "benchmarks"))

from allennlp.commands.train import TrainModel  # noqa: E402
from allennlp.common import Params  # noqa: E402
from bilm_sizes import TRAINING_CORPUS, options_for  # noqa: E402

import elmo_plugin  # noqa: E402,F401  (registers the plugin's components)
from elmo_plugin.common.hardware import describe_run  # noqa: E402
from elmo_plugin.data.vocabulary import build_lm_vocabulary  # noqa: E402


class TimedLoader:
    """The trainer's data loader, noting when each batch is asked for (the previous step done)."""

    def __init__(self, loader: Any, device: torch.device) -> None:
        self._loader, self._device = loader, device
        self.requested: List[float] = []
        self.tokens: List[torch.Tensor] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self._loader, name)

    def __len__(self) -> int:
        return len(self._loader)

    def __iter__(self) -> Iterator:
        for batch in self._loader:
            if len(self.requested) == 1 and self._device.type == "cuda":
                torch.cuda.synchronize(self._device)  # the first step (the warm-up) is over
            self.requested.append(time.perf_counter())
            characters = batch["forward_tokens"]["elmo_characters"]["elmo_tokens"]
            self.tokens.append((characters > 0).any(-1).sum())  # on the device, read at the end
            yield batch


def stream_config(args: argparse.Namespace, directory: Path, vocabulary: Path) -> Params:
    """The config as ``allennlp train CONFIG -o ...`` would read it."""
    config = directory / "config.jsonnet"
    config.write_text(
        f'(import "{Path(args.config).resolve()}")(train_data_path="{Path(args.corpus).resolve()}'
        f'{"/*.txt" if Path(args.corpus).is_dir() else ""}", validation_data_path=null, '
        f'vocabulary_file="{vocabulary}")\n', encoding="utf-8")
    overrides: Dict[str, Any] = {
        "dataset_reader.mode": "stream",
        "dataset_reader.batch_size": args.batch_size,
        "dataset_reader.unroll_steps": args.unroll_steps,
        "data_loader": {"type": "bilm_stream", "batch_size": args.batch_size,
                        "batches_per_epoch": args.batches, "parallel_directions": True},
        "model.num_samples": args.num_samples,
        "model.tf32": args.precision == "tf32",
        "model.mixed_precision": args.precision == "bfloat16",
        "model.compile": args.compile,
        "trainer.cuda_device": args.cuda_device,
        "trainer.num_epochs": 1,
        "trainer.callbacks": [],
        "trainer.checkpointer": None,
    }
    if args.size:
        overrides["model.options"] = {**options_for(args.size), "dropout": 0.1}
    return Params.from_file(str(config), params_overrides=json.dumps(overrides))


def fill_vocabulary(vocabulary: Path, size: int, directory: Path) -> Path:
    """The vocabulary file, then words that never occur, up to ``size`` entries."""
    words = vocabulary.read_text(encoding="utf-8").split("\n")
    words = [word for word in words if word]
    filled = directory / "filled_vocabulary.txt"
    with open(filled, "w", encoding="utf-8") as handle:
        handle.write("\n".join(words) + "\n")
        handle.writelines(f"filler{index:07d}\n" for index in range(max(0, size - len(words))))
    return filled


def run_epoch(args: argparse.Namespace) -> Dict[str, Any]:
    device = torch.device("cpu" if args.cuda_device < 0 else f"cuda:{args.cuda_device}")
    with tempfile.TemporaryDirectory() as temporary:
        directory = Path(temporary)
        vocabulary = Path(args.vocabulary) if args.vocabulary else directory / "vocabulary.txt"
        if not args.vocabulary:
            corpus = Path(args.corpus)
            build_lm_vocabulary(str(corpus / "*.txt") if corpus.is_dir() else str(corpus),
                                vocabulary, progress=False)
        if args.vocabulary_size:
            vocabulary = fill_vocabulary(vocabulary, args.vocabulary_size, directory)
        params = stream_config(args, directory, vocabulary)
        train_loop = TrainModel.from_params(params=params, serialization_dir=str(directory / "run"),
                                            local_rank=0)
        trainer = train_loop.trainer
        loader = TimedLoader(trainer.data_loader, device)
        trainer.data_loader = loader
        for callback in trainer._callbacks:  # as trainer.train() starts
            callback.on_start(trainer, is_primary=trainer._primary)
        start = time.perf_counter()
        trainer._train_epoch(0)
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        end = time.perf_counter()
        num_words = train_loop.model.vocab.get_vocab_size("lm_targets")
    if len(loader.requested) < 2:
        raise SystemExit(f"{args.corpus}: fewer than 2 batches of {args.batch_size} rows")
    tokens = [int(count) for count in loader.tokens]
    sustained = sum(tokens[1:]) / (end - loader.requested[1])
    return dict(
        config=Path(args.config).name, size=args.size or "config", batch_size=args.batch_size,
        unroll_steps=args.unroll_steps, batches=len(tokens), tokens=sum(tokens[1:]),
        seconds=end - loader.requested[1], first_batch_seconds=loader.requested[1] - start,
        tokens_per_second=sustained, precision=args.precision, compile=args.compile,
        device=str(device), num_words=num_words, num_samples=args.num_samples,
    )


def main(argv: Optional[List[str]] = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--config", default=str(REPOSITORY / "training_configs" / "bilm_original.jsonnet"))
    parser.add_argument("--size", choices=["tiny", "small", "original"], default=None)
    parser.add_argument("--batch-size", type=int, default=384)
    parser.add_argument("--unroll-steps", type=int, default=20)
    parser.add_argument("--batches", type=int, default=50)
    parser.add_argument("--num-samples", type=int, default=8192)
    parser.add_argument("--corpus", default=str(TRAINING_CORPUS))
    parser.add_argument("--vocabulary", default=None)
    parser.add_argument("--vocabulary-size", type=int, default=None,
                        help="fill the vocabulary up to this many words (never occurring)")
    parser.add_argument("--cuda-device", type=int, default=-1)
    parser.add_argument("--precision", choices=["float32", "tf32", "bfloat16"], default="float32")
    parser.add_argument("--compile", default=False,
                        type=lambda value: {"false": False, "true": True}.get(value, value))
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    row = run_epoch(args)
    print(f"# {describe_run(torch.device(row['device']))}; torch {torch.__version__}")
    print(f"# allennlp train {row['config']} ({row['size']}), stream batching {row['batch_size']} "
          f"x {row['unroll_steps']}, {row['num_samples']} negatives of {row['num_words']:,} words, "
          f"{row['precision']}, compile {row['compile']}; batches 2-{row['batches']} timed")
    print("| path | tokens/s sustained | tokens | seconds | first batch s |")
    print("|---|---:|---:|---:|---:|")
    print(f"| allennlp train, stream epoch | {row['tokens_per_second']:,.0f} | {row['tokens']:,} | "
          f"{row['seconds']:.1f} | {row['first_batch_seconds']:.1f} |")
    if args.json:
        args.json.write_text(json.dumps(row, indent=1) + "\n", encoding="utf-8")


if __name__ == "__main__":
    sys.exit(main())
