"""
The main job on a small built-in default: ``python -m elmo_plugin.demo OUTPUT_DIR`` (``make demo``).

Until pretraining lands, it

1. builds a tiny biLM with seeded random weights and writes it in the bilm-tf format
   (``options.json`` + ``weights.hdf5``), exactly as a published ELMo model is stored;
2. writes a few English and Korean sample sentences, one tokenized sentence per line;
3. runs ``allennlp elmo sentences.txt embeddings.hdf5 --all`` on them (the real command, in a
   subprocess, as a user would);
4. checks the file against the Python API (`ElmoEmbedder.embed_sentence`) and prints a summary.
"""
import argparse
import json
import os
import shlex
import subprocess
import sys
from typing import List

import h5py
import numpy as np
import torch

from elmo_plugin.bilm import ElmoBiLm
from elmo_plugin.bilm_tf_weights import write_bilm_tf_model
from elmo_plugin.embedder import ElmoEmbedder
from elmo_plugin.options import BilmOptions

# A model of the fixture's size: 5 convolutions, 2 highway layers, 2 LSTM layers of 64 cells
# projected to 16, so it builds and runs in seconds on a CPU.
TINY_OPTIONS = {
    "bidirectional": True,
    "char_cnn": {
        "activation": "relu",
        "embedding": {"dim": 4},
        "filters": [[1, 4], [2, 8], [3, 16], [4, 32], [5, 64]],
        "max_characters_per_token": 50,
        "n_characters": 262,
        "n_highway": 2,
    },
    "dropout": 0.1,
    "lstm": {
        "cell_clip": 3,
        "dim": 64,
        "n_layers": 2,
        "proj_clip": 3,
        "projection_dim": 16,
        "use_skip_connections": True,
    },
}

SAMPLE_SENTENCES = [
    "The cat sat on the mat .",
    "ELMo gives every token a vector that depends on its sentence .",
    "I went to the bank to deposit money .",
    "We sat on the bank of the river .",
    "아버지 가 방 에 들어가 신다 .",
    "이 영화 정말 재밌 어요 !",
]


def _run(command: List[str]) -> None:
    print("$ " + " ".join(shlex.quote(part) for part in command), flush=True)
    subprocess.run(command, check=True)


def main(argv: List[str] = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("output_dir", nargs="?", default="demo_output")
    args = parser.parse_args(argv)
    model_dir = os.path.join(args.output_dir, "model")
    os.makedirs(model_dir, exist_ok=True)

    print("1. A tiny biLM with seeded random weights, in the bilm-tf format")
    torch.manual_seed(0)
    bilm = ElmoBiLm(BilmOptions.from_dict(TINY_OPTIONS, source="elmo_plugin.demo"))
    options_file = os.path.join(model_dir, "options.json")
    weight_file = os.path.join(model_dir, "weights.hdf5")
    write_bilm_tf_model(bilm, options_file, weight_file)
    print(f"   wrote {options_file} and {weight_file}")

    sentences_file = os.path.join(args.output_dir, "sentences.txt")
    with open(sentences_file, "w", encoding="utf-8") as handle:
        handle.write("\n".join(SAMPLE_SENTENCES) + "\n")
    print(f"2. {len(SAMPLE_SENTENCES)} sample sentences in {sentences_file}")

    output_file = os.path.join(args.output_dir, "embeddings.hdf5")
    print("3. Embedding them with the allennlp elmo command")
    _run(
        [sys.executable, "-m", "allennlp", "elmo", sentences_file, output_file, "--all",
         "--options-file", options_file, "--weight-file", weight_file,
         "--include-package", "elmo_plugin"]
    )

    print(f"4. What {output_file} holds, checked against ElmoEmbedder.embed_sentence")
    embedder = ElmoEmbedder(options_file, weight_file)
    with h5py.File(output_file, "r") as embeddings:
        index = json.loads(embeddings["sentence_to_index"][()])
        for number, sentence in enumerate(SAMPLE_SENTENCES):
            vectors = embeddings[str(number)][...]
            expected = embedder.embed_sentence(sentence.split())
            difference = float(np.abs(vectors - expected).max())
            if difference > 1e-5:
                raise SystemExit(f"key {number}: file and Python API differ by {difference}")
            assert index[sentence] == str(number)
            print(f"   [{number}] {vectors.shape} (layers, tokens, dim)  {sentence}")
    with h5py.File(output_file, "r") as embeddings:
        money, river = embeddings["2"][2, 4], embeddings["3"][2, 4]
        token_money, token_river = embeddings["2"][0, 4], embeddings["3"][0, 4]
    print(
        "   'bank' in sentences 2 and 3: identical at layer 0 (max |diff| "
        f"{np.abs(token_money - token_river).max():.1e}), different at the top layer "
        f"(max |diff| {np.abs(money - river).max():.3f}): the vectors depend on context."
    )
    print("Done.")


if __name__ == "__main__":
    main()
