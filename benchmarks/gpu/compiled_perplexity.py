"""
Does the compiled training path learn what the eager one learns? Two copies of the
``elmo_bilm`` training model, from the same random weights, train the same number of steps on the
same stream batches with the same sampled negatives, one with ``compile`` off and one with it on
(and, with ``--tf32``, both with TF32 products); then both are evaluated (full softmax, true
perplexity) on the same held-out sentences.

    python3 benchmarks/gpu/compiled_perplexity.py [--device cuda] [--size original]
        [--steps 200] [--batch-size 128] [--unroll-steps 20] [--num-samples 8192]
        [--vocabulary-size 100000] [--mode default] [--tf32] [--amp] [--corpus FILE]

The corpus (default ``../shared/data/en/lm/heldout.txt``: one tokenized sentence per line) is
split: its last ``--eval-sentences`` sentences are held out, the rest is the training stream
(bilm-tf's stream batching, windows of ``--unroll-steps`` tokens, the state carried between
windows; repeated if the steps need more); the vocabulary is the training part's words by
frequency. The two runs' training losses are compared step by step (they drift apart only by
float32 rounding, amplified by training), and the held-out perplexities side by side; tokens/s of
each run after its first step are printed too. Works on a CPU at a small size, to check it:
``--device cpu --size tiny --steps 5 --batch-size 4 --num-samples 64``.
"""
import argparse
import collections
import copy
import logging
import sys
import tempfile
import time
from pathlib import Path
from typing import Dict, List

import torch
from allennlp.data import Batch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/

from allennlp.nn.util import move_to_device  # noqa: E402
from bilm_sizes import DATA, options_for  # noqa: E402

from elmo_plugin.common.hardware import describe_run  # noqa: E402
from elmo_plugin.data.dataset_readers.bilm_corpus import BilmCorpusReader  # noqa: E402
from elmo_plugin.data.vocabulary import BilmTfVocabulary  # noqa: E402
from elmo_plugin.models.elmo_language_model import ElmoLanguageModel  # noqa: E402
from elmo_plugin.modules.execution import compiled_step  # noqa: E402
from elmo_plugin.modules.execution.plan import COMPILE_MODES  # noqa: E402


def tensor_batches(reader: BilmCorpusReader, path: str, vocab, batch_size: int, count: int,
                   device: torch.device) -> List[Dict]:
    """``count`` batches of ``batch_size`` instances read from ``path`` (again from the start
    when it runs out), indexed and on ``device``."""
    batches: List[Dict] = []
    while len(batches) < count:
        instances = list(reader.read(path))
        for start in range(0, len(instances) - batch_size + 1, batch_size):
            batch = Batch(instances[start : start + batch_size])
            batch.index_instances(vocab)
            batches.append(move_to_device(batch.as_tensor_dict(), device))
            if len(batches) == count:
                break
    return batches


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--size", default="original", choices=["tiny", "small", "original"])
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--batch-size", type=int, default=128)
    parser.add_argument("--unroll-steps", type=int, default=20)
    parser.add_argument("--num-samples", type=int, default=8192)
    parser.add_argument("--vocabulary-size", type=int, default=100_000)
    parser.add_argument("--eval-sentences", type=int, default=200)
    parser.add_argument("--mode", default="default", choices=COMPILE_MODES)
    parser.add_argument("--tf32", action="store_true")
    parser.add_argument("--amp", action="store_true", help="both runs in bfloat16 autocast")
    parser.add_argument("--corpus", default=str(DATA))
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING, format="# %(name)s: %(message)s")
    logging.getLogger(compiled_step.__name__).setLevel(logging.INFO)
    device = torch.device(args.device)  # TF32: the models' own tf32 option
    print(f"# {describe_run(device)}; torch {torch.__version__} CUDA {torch.version.cuda}")
    lines = [line.split() for line in Path(args.corpus).read_text(encoding="utf-8").splitlines()]
    lines = [tokens for tokens in lines if tokens]
    train, held_out = lines[: -args.eval_sentences], lines[-args.eval_sentences :]
    counts = collections.Counter(token for tokens in train for token in tokens)
    words = [word for word, _ in counts.most_common(args.vocabulary_size - 3)
             if word not in ("<S>", "</S>", "<UNK>")]
    with tempfile.TemporaryDirectory() as directory:
        vocabulary_file = Path(directory) / "vocabulary.txt"
        vocabulary_file.write_text("\n".join(["<S>", "</S>", "<UNK>"] + words) + "\n")
        train_file = Path(directory) / "train.txt"
        train_file.write_text("\n".join(" ".join(tokens) for tokens in train) + "\n")
        held_out_file = Path(directory) / "heldout.txt"
        held_out_file.write_text("\n".join(" ".join(tokens) for tokens in held_out) + "\n")
        vocab = BilmTfVocabulary.from_bilm_tf_file(str(vocabulary_file))
        stream = BilmCorpusReader(mode="stream", batch_size=args.batch_size,
                                  unroll_steps=args.unroll_steps, shuffle=False)
        training_batches = tensor_batches(stream, str(train_file), vocab, args.batch_size,
                                          args.steps, device)
        sentences = BilmCorpusReader(mode="sentences", shuffle=False)
        eval_batches = tensor_batches(sentences, str(held_out_file), vocab, 50,
                                      len(held_out) // 50, device)
    num_samples = min(args.num_samples, vocab.get_vocab_size("lm_targets") - 1)
    print(f"# {args.size}, {args.steps} steps of {args.batch_size} x {args.unroll_steps} tokens, "
          f"{num_samples} sampled negatives of {vocab.get_vocab_size('lm_targets'):,} words, "
          f"Adagrad 0.2; {'TF32' if args.tf32 else 'float32'}"
          f"{', bfloat16 autocast' if args.amp else ''}; compile mode {args.mode}; held out: "
          f"{len(eval_batches) * 50} sentences")
    options = {**options_for(args.size), "dropout": 0.0}
    torch.manual_seed(0)
    eager = ElmoLanguageModel(vocab, options, num_samples=num_samples, compile=False,
                              mixed_precision=args.amp, tf32=args.tf32,
                              check_vocabulary_order=False).to(device)
    compiled = copy.deepcopy(eager)
    compiled._compile = args.mode
    runs = {"eager": eager, "compiled": compiled}
    optimizers = {name: torch.optim.Adagrad(model.parameters(), lr=0.2,
                                            initial_accumulator_value=1.0)
                  for name, model in runs.items()}
    losses: Dict[str, List[float]] = {name: [] for name in runs}
    seconds = {name: 0.0 for name in runs}
    for step, batch in enumerate(training_batches):
        for name, model in runs.items():
            model.train()
            if device.type == "cuda":
                torch.cuda.synchronize(device)
            start = time.perf_counter()
            optimizers[name].zero_grad(set_to_none=True)
            torch.manual_seed(step)  # the same negatives for both runs
            loss = model(**batch)["loss"]
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 10.0)
            optimizers[name].step()
            losses[name].append(float(loss.detach()))
            if step > 0:
                seconds[name] += time.perf_counter() - start
    tokens = (args.steps - 1) * args.batch_size * args.unroll_steps  # as training_throughput counts
    perplexity = {}
    for name, model in runs.items():
        model.eval()
        model.get_metrics(reset=True)
        with torch.no_grad():
            for batch in eval_batches:
                model(**batch)
        perplexity[name] = model.get_metrics(reset=True)["ppl"]
    differences = [abs(a - b) for a, b in zip(losses["eager"], losses["compiled"])]
    print("| run | first loss | last loss | mean loss of the last 10 steps | held-out perplexity "
          "| training tokens/s |")
    print("|---|---:|---:|---:|---:|---:|")
    for name in runs:
        last = losses[name][-10:]
        rate = tokens / seconds[name] if seconds[name] else float("nan")
        print(f"| {name} | {losses[name][0]:.4f} | {losses[name][-1]:.4f} | "
              f"{sum(last) / len(last):.4f} | {perplexity[name]:.2f} | {rate:,.0f} |")
    print(f"# largest training-loss difference: {max(differences):.2e} (at step "
          f"{differences.index(max(differences))}); at the first step {differences[0]:.2e}")


if __name__ == "__main__":
    sys.exit(main())
