"""
How much a token's ELMo vectors change with its context, layer by layer: reads the sentences
file and the HDF5 file that ``allennlp elmo SENTENCES OUT --all`` wrote for it, finds every
occurrence of TOKEN, and prints, for each layer, the largest |difference| between the first
occurrence's vector and each later one.

Layer 0 is the character encoder's output, which sees only the token itself, so an occurrence
has the same layer-0 vector everywhere (difference 0); the LSTM layers see the sentence, so their
vectors differ: that is what makes ELMo contextual.

    allennlp elmo sentences.txt out.hdf5 --all --model build/ko/bilm
    python scripts/compare_token_vectors.py sentences.txt out.hdf5 는
"""
import argparse
import sys
from typing import List, Tuple

import h5py
import numpy as np


def occurrences(sentences: List[List[str]], token: str) -> List[Tuple[int, int]]:
    """``(sentence index, token position)`` of every occurrence of ``token``."""
    return [
        (i, j) for i, sentence in enumerate(sentences) for j, word in enumerate(sentence) if word == token
    ]


def main(argv: List[str] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    parser.add_argument("sentences", help="the tokenized sentences file given to allennlp elmo")
    parser.add_argument("embeddings", help="the HDF5 file allennlp elmo --all wrote for it")
    parser.add_argument("token", help="the token to compare across its occurrences")
    args = parser.parse_args(argv)
    with open(args.sentences, encoding="utf-8") as handle:
        sentences = [line.split() for line in handle]
    found = occurrences(sentences, args.token)
    if len(found) < 2:
        print(f"{args.token!r} occurs {len(found)} time(s) in {args.sentences}; need two or more")
        return 1
    with h5py.File(args.embeddings, "r") as hdf5:
        vectors = [hdf5[str(i)][:, j, :] for i, j in found]  # each (layers, dim)
    if vectors[0].ndim != 2:
        print(f"{args.embeddings} does not hold every layer: write it with allennlp elmo --all")
        return 1
    first_sentence, first_position = found[0]
    print(f"{args.token!r}: {len(found)} occurrences; compared with sentence {first_sentence}, token {first_position}")
    for (i, j), vector in zip(found[1:], vectors[1:]):
        differences = np.abs(vector - vectors[0]).max(axis=-1)
        per_layer = ", ".join(f"layer {layer}: {value:.3g}" for layer, value in enumerate(differences))
        print(f"  sentence {i}, token {j} ({' '.join(sentences[i])}): max |diff| {per_layer}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
