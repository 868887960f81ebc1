"""
The data path of stream training on its own: reading the corpus, shuffling, packing the streams
into windows, character and vocabulary ids, batching into tensors; no model. Tokens/s on the
host, for the ``bilm_stream`` loader in one process and with ``parallel_directions`` (each stream
direction made in a process of its own, as the GPU configs do) and for AllenNLP's loader over the
same reader (the reference, ``--loaders multiprocess``). A GPU step at the recipe's batch consumes
150,000 tokens/s and more: the data path must keep up (at least 300,000 tokens/s).

    PYTHONPATH=. .venv/bin/python benchmarks/data_path.py [--corpus ../shared/data/en/lm/train]
        [--batch-size 384] [--unroll-steps 20] [--batches 200] [--vocabulary FILE]
        [--loaders bilm_stream bilm_stream_parallel multiprocess] [--json FILE]

Each loader makes ``--batches`` batches of one pass (fewer if the corpus is shorter); the time
is that of asking for them (the loader's own work), and the tokens are the forward direction's
real tokens (the backward direction's are as many), counted outside the timed region. Beside the
wall clock, the process's CPU time: on a shared machine the wall clock also counts the time
other processes had the core; alone, the two agree.
"""
import argparse
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Dict, List, Optional

import torch

REPOSITORY = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPOSITORY / "benchmarks"))

from allennlp.common import Params  # noqa: E402
from allennlp.data import DataLoader  # noqa: E402
from bilm_sizes import TRAINING_CORPUS  # noqa: E402

import elmo_plugin  # noqa: E402,F401  (registers bilm_stream)
from elmo_plugin.common.hardware import describe_run  # noqa: E402
from elmo_plugin.data.dataset_readers.bilm_corpus import BilmCorpusReader  # noqa: E402
from elmo_plugin.data.vocabulary import BilmTfVocabulary, build_lm_vocabulary  # noqa: E402

TARGET_TOKENS_PER_SECOND = 300_000


def time_loader(kind: str, args: argparse.Namespace, corpus: str, vocabulary: BilmTfVocabulary
                ) -> Dict[str, float]:
    reader = BilmCorpusReader(mode="stream", batch_size=args.batch_size,
                              unroll_steps=args.unroll_steps, seed=1)
    if kind.startswith("bilm_stream"):
        params = {"type": "bilm_stream", "batch_size": args.batch_size,
                  "parallel_directions": kind == "bilm_stream_parallel"}
    else:  # AllenNLP's, as the stream configs configured it before bilm_stream
        params = {"batch_size": args.batch_size, "shuffle": False,
                  "max_instances_in_memory": 100 * args.batch_size}
    loader = DataLoader.from_params(Params(params), reader=reader, data_path=corpus)
    loader.index_with(vocabulary)
    seconds, cpu_seconds, tokens, batches = 0.0, 0.0, 0, 0
    iterator = iter(loader)
    while batches < args.batches:
        start, cpu_start = time.perf_counter(), time.process_time()
        batch = next(iterator, None)
        seconds += time.perf_counter() - start
        cpu_seconds += time.process_time() - cpu_start
        if batch is None:
            break
        batches += 1
        tokens += int((batch["forward_tokens"]["elmo_characters"]["elmo_tokens"] > 0).any(-1).sum())
    return dict(loader=kind, batches=batches, tokens=tokens, seconds=seconds,
                cpu_seconds=cpu_seconds,
                tokens_per_second=tokens / seconds if seconds else float("nan"),
                tokens_per_cpu_second=tokens / cpu_seconds if cpu_seconds else float("nan"))


def main(argv: Optional[List[str]] = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--corpus", default=str(TRAINING_CORPUS))
    parser.add_argument("--batch-size", type=int, default=384)
    parser.add_argument("--unroll-steps", type=int, default=20)
    parser.add_argument("--batches", type=int, default=200)
    parser.add_argument("--vocabulary", default=None, help="default: built from the corpus")
    parser.add_argument("--loaders", nargs="+",
                        default=["bilm_stream", "bilm_stream_parallel", "multiprocess"],
                        choices=["bilm_stream", "bilm_stream_parallel", "multiprocess"])
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    corpus = Path(args.corpus)
    pattern = str(corpus / "*.txt") if corpus.is_dir() else str(corpus)
    with tempfile.TemporaryDirectory() as temporary:
        vocabulary_file = args.vocabulary or str(Path(temporary) / "vocabulary.txt")
        if not args.vocabulary:
            build_lm_vocabulary(pattern, vocabulary_file, progress=False)
        vocabulary = BilmTfVocabulary.from_bilm_tf_file(vocabulary_file)
    rows = [time_loader(kind, args, pattern, vocabulary) for kind in args.loaders]
    print(f"# {describe_run(torch.device('cpu'))}")
    print(f"# stream batches of {args.batch_size} x {args.unroll_steps} from {pattern} "
          f"({vocabulary.get_vocab_size('lm_targets'):,} words): reading, shuffling, packing, "
          f"ids, tensors; target {TARGET_TOKENS_PER_SECOND:,} tokens/s")
    print("| loader | batches | tokens | seconds | tokens/s | CPU seconds | tokens/CPU s | keeps up |")
    print("|---|---:|---:|---:|---:|---:|---:|---|")
    for row in rows:
        row["keeps_up"] = row["tokens_per_second"] >= TARGET_TOKENS_PER_SECOND
        print(f"| {row['loader']} | {row['batches']} | {row['tokens']:,} | {row['seconds']:.2f} | "
              f"{row['tokens_per_second']:,.0f} | {row['cpu_seconds']:.2f} | "
              f"{row['tokens_per_cpu_second']:,.0f} | {'yes' if row['keeps_up'] else 'no'} |")
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1) + "\n", encoding="utf-8")


if __name__ == "__main__":
    sys.exit(main())
