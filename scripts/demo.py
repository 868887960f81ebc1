"""
The main job on a small built-in default: ``python -m elmo_plugin.demo [OUTPUT_DIR]`` (``make demo``).

1. ``allennlp train training_configs/bilm.jsonnet``: pretrain a tiny biLM on the built-in sample
   corpus (a few minutes on 2 CPU cores);
2. ``allennlp elmo-export``: write it in the bilm-tf format (``options.json`` + ``weights.hdf5``),
   the format every ELMo loader reads;
3. ``allennlp elmo``: embed a few sentences with it into HDF5, all layers;
4. check the file against the Python API (`ElmoEmbedder`) and AllenNLP core's own ELMo module
   loading the same exported files, and print a summary.

Each step is the real command, run as a user would run it; the commands are printed.
"""
import argparse
import json
import os
import shlex
import shutil
import subprocess
import sys
from typing import List

import h5py
import numpy as np
import torch

from elmo_plugin.elmo_embedder import ElmoEmbedder

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

SAMPLE_SENTENCES = [
    "she put the money in the bank and went home .",
    "they sat on the bank of the river and watched the ships .",
    "the old farmer carries a heavy book across the road .",
    "the children that sing often visit the market .",
    "a bat flew out of the dark cave at night .",
    "the boy hit the ball with a bat .",
]


def _run(command: List[str]) -> None:
    print("$ " + " ".join(shlex.quote(part) for part in command), flush=True)
    subprocess.run(command, check=True, cwd=REPO_ROOT)


def _allennlp(*arguments: str) -> List[str]:
    return [sys.executable, "-m", "allennlp", *arguments, "--include-package", "elmo_plugin"]


def main(argv: List[str] = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("output_dir", nargs="?", default="demo_output")
    args = parser.parse_args(argv)
    output_dir = os.path.abspath(args.output_dir)
    run_dir = os.path.join(output_dir, "run")
    bilm_dir = os.path.join(output_dir, "bilm")
    if os.path.isdir(run_dir):
        shutil.rmtree(run_dir)  # a fresh run each time: the demo is short
    os.makedirs(output_dir, exist_ok=True)

    print("1. Pretrain a tiny biLM on the built-in sample corpus", flush=True)
    _run(_allennlp("train", "training_configs/bilm.jsonnet", "-s", run_dir, "--file-friendly-logging"))
    with open(os.path.join(run_dir, "metrics.json")) as handle:
        metrics = json.load(handle)

    print("2. Export it in the bilm-tf format", flush=True)
    _run(_allennlp("elmo-export", run_dir, bilm_dir))
    options_file = os.path.join(bilm_dir, "options.json")
    weight_file = os.path.join(bilm_dir, "weights.hdf5")

    print("3. Embed sentences with it", flush=True)
    sentences_file = os.path.join(output_dir, "sentences.txt")
    with open(sentences_file, "w", encoding="utf-8") as handle:
        handle.write("\n".join(SAMPLE_SENTENCES) + "\n")
    output_file = os.path.join(output_dir, "embeddings.hdf5")
    # --overwrite: each demo writes its embeddings again (allennlp elmo refuses an existing file).
    _run(_allennlp("elmo", sentences_file, output_file, "--all", "--overwrite",
                   "--options-file", options_file, "--weight-file", weight_file))

    print("4. Check the file against ElmoEmbedder and AllenNLP core's Elmo module", flush=True)
    from allennlp.modules.elmo import _ElmoBiLm, batch_to_ids

    embedder = ElmoEmbedder(options_file, weight_file)
    core = _ElmoBiLm(options_file, weight_file)
    worst_api, worst_core = 0.0, 0.0
    with h5py.File(output_file, "r") as embeddings, torch.no_grad():
        for number, sentence in enumerate(SAMPLE_SENTENCES):
            tokens = sentence.split()
            vectors = embeddings[str(number)][...]
            worst_api = max(worst_api, float(np.abs(vectors - embedder.embed_sentence(tokens)).max()))
            core._elmo_lstm.reset_states()
            activations = core(batch_to_ids([tokens]))["activations"]
            from_core = np.stack([layer[0, 1 : len(tokens) + 1].numpy() for layer in activations])
            worst_core = max(worst_core, float(np.abs(vectors - from_core).max()))
            print(f"   [{number}] {vectors.shape} (layers, tokens, dim)  {sentence}")
        money, river = embeddings["0"][...], embeddings["1"][...]
    if worst_api > 1e-5 or worst_core > 1e-5:
        raise SystemExit(f"mismatch: Python API {worst_api:.1e}, AllenNLP core {worst_core:.1e}")
    bank_0 = np.abs(money[0, 6] - river[0, 4]).max()
    bank_top = np.abs(money[2, 6] - river[2, 4]).max()
    print(
        f"   max |difference| to ElmoEmbedder {worst_api:.1e}, to AllenNLP core's Elmo "
        f"{worst_core:.1e}\n"
        f"   held-out perplexity after {metrics['epoch'] + 1} epochs: forward "
        f"{metrics['validation_forward_ppl']:.1f}, backward {metrics['validation_backward_ppl']:.1f}\n"
        f"   'bank' (money) vs 'bank' (river): identical at layer 0 (max |diff| {bank_0:.1e}), "
        f"different at the top layer (max |diff| {bank_top:.3f}): the vectors depend on context.\n"
        f"Done. Model: {os.path.relpath(bilm_dir)}  Embeddings: {os.path.relpath(output_file)}"
    )


if __name__ == "__main__":
    main()
