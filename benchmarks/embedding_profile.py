"""
Where embedding time goes, ours against AllenNLP core's ``_ElmoBiLm``: one batch of each under
``torch.profiler``, each operator's own CPU time attributed to the part of the biLM it ran in
(character encoder or LSTM) and split into matrix multiplies and everything else.

    .venv/bin/python benchmarks/embedding_profile.py [--size original] [--batch-size 64]
        [--tokens-per-sentence 20]

Same weights and sentences as ``embedding_throughput.py``. Profiler times include its own
overhead (a few percent here); they explain a ratio, they do not replace the throughput run.
"""
import argparse
import platform
import sys
import tempfile
import time
from collections import defaultdict
from typing import Dict, Tuple

import torch
from torch.profiler import ProfilerActivity, profile, record_function

from allennlp.modules.elmo import _ElmoBiLm

from bilm_sizes import load_sentences, write_random_bilm
from elmo_plugin.bilm import ElmoBiLm
from elmo_plugin.character_ids import batch_to_ids

MATRIX_MULTIPLIES = {"aten::mm", "aten::addmm", "aten::bmm", "aten::baddbmm", "aten::matmul",
                     "aten::linear", "aten::mkldnn_convolution", "aten::convolution"}


def label(module: torch.nn.Module, name: str) -> None:
    """Runs ``module``'s forward inside ``record_function(name)``."""
    contexts = []

    def enter(*_):
        contexts.append(record_function(name))
        contexts[-1].__enter__()

    def leave(*_):
        contexts.pop().__exit__(None, None, None)

    module.register_forward_pre_hook(enter)
    module.register_forward_hook(leave)


def profile_one(bilm: torch.nn.Module, ids: torch.Tensor) -> Dict[Tuple[str, str], float]:
    """Self CPU milliseconds by (part, kind)."""
    with torch.no_grad():
        bilm(ids)  # warm-up
        with profile(activities=[ProfilerActivity.CPU]) as prof:
            bilm(ids)
    totals: Dict[Tuple[str, str], float] = defaultdict(float)
    for event in prof.events():
        if event.name in ("encoder", "lstm"):
            continue
        part, parent = "other", event.cpu_parent
        while parent is not None:
            if parent.name in ("encoder", "lstm"):
                part = parent.name
                break
            parent = parent.cpu_parent
        kind = "matrix multiplies" if event.name in MATRIX_MULTIPLIES else "other operators"
        totals[(part, kind)] += event.self_cpu_time_total / 1000.0
    return totals


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size", default="original")
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--tokens-per-sentence", type=int, default=20)
    args = parser.parse_args()
    torch.manual_seed(0)
    with tempfile.TemporaryDirectory() as directory:
        options_file, weight_file = write_random_bilm(args.size, directory)
        ours = ElmoBiLm.from_files(options_file, weight_file).eval()
        theirs = _ElmoBiLm(options_file, weight_file).eval()
    label(ours.character_encoder, "encoder")
    label(ours.lstm, "lstm")
    label(theirs._token_embedder, "encoder")
    label(theirs._elmo_lstm, "lstm")
    ids = batch_to_ids(load_sentences(args.batch_size, args.tokens_per_sentence))
    ours_ms = profile_one(ours, ids)
    theirs._elmo_lstm.reset_states()
    theirs_ms = profile_one(theirs, ids)
    print(f"# {platform.node()} {platform.processor() or platform.machine()}, "
          f"torch {torch.__version__}, {torch.get_num_threads()} threads, "
          f"{time.strftime('%Y-%m-%d')}; {args.size}, batch {args.batch_size} x "
          f"{args.tokens_per_sentence or 'natural'} tokens")
    print("| part | kind | ours ms | AllenNLP ms | AllenNLP / ours |")
    print("|---|---|---:|---:|---:|")
    keys = sorted(set(ours_ms) | set(theirs_ms))
    for key in keys + [("total", "")]:
        a = sum(ours_ms.values()) if key[0] == "total" else ours_ms.get(key, 0.0)
        b = sum(theirs_ms.values()) if key[0] == "total" else theirs_ms.get(key, 0.0)
        ratio = f"{b / a:.2f}" if a > 0 else "-"
        print(f"| {key[0]} | {key[1]} | {a:,.0f} | {b:,.0f} | {ratio} |", flush=True)


if __name__ == "__main__":
    sys.exit(main())
