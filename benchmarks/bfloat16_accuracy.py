"""
How far ``precision="bfloat16"`` moves the biLM's layers from float32, per layer: the largest
absolute difference, and the cosine between each token's float32 and bfloat16 vectors (mean
over tokens, and the worst token), on real English held-out sentences at their own lengths.

    .venv/bin/python benchmarks/bfloat16_accuracy.py [--sizes golden small original DIR ...]
        [--sentences 256] [--batch-size 64] [--threads 0] [--device cpu|cuda]

``golden`` is the trained biLM of AllenNLP's golden fixture (tests/fixtures/elmo_allennlp: tiny,
trained with bilm-tf); ``small`` and ``original`` have random weights (bilm_sizes.py); a
directory with ``options.json`` and ``weights.hdf5`` (what ``allennlp elmo-export`` writes) is
that trained biLM. bfloat16 runs whether or not the device has it natively
(``InferenceSettings(native_only=False)``): on a CPU without it, emulated, which is slow but
computes the same numbers. Only accuracy is measured here; speed is embedding_throughput.py's
``--precision bfloat16``.
"""
import argparse
import sys
import tempfile
from pathlib import Path

import torch
from bilm_sizes import load_sentences, write_random_bilm

from elmo_plugin.common.hardware import bfloat16_support, describe_run
from elmo_plugin.data.character_ids import batch_to_ids
from elmo_plugin.modules.bilm import ElmoBiLm
from elmo_plugin.modules.precision import InferenceSettings, run_bilm

FIXTURE = Path(__file__).resolve().parents[1] / "tests" / "fixtures" / "elmo_allennlp"


def load_bilm(size: str, directory: str) -> ElmoBiLm:
    if Path(size).is_dir():
        return ElmoBiLm.from_files(Path(size) / "options.json", Path(size) / "weights.hdf5")
    if size == "golden":
        return ElmoBiLm.from_files(FIXTURE / "options.json", FIXTURE / "lm_weights.hdf5")
    return ElmoBiLm.from_files(*write_random_bilm(size, directory))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", nargs="+", default=["golden", "small", "original"])
    parser.add_argument("--sentences", type=int, default=256)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--threads", type=int, default=0,
                        help="intra-op threads (torch.set_num_threads); 0: torch's default")
    parser.add_argument("--device", default="cpu")
    args = parser.parse_args()
    device = torch.device(args.device)
    if args.threads > 0:
        torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    support = bfloat16_support(device)
    print(f"# {describe_run(device)}; bfloat16 {'native' if support.native else 'emulated'} "
          f"({support.reason}); {args.sentences} held-out sentences at their own lengths, "
          f"batches of {args.batch_size}")
    print("| size | layer | max abs diff | largest abs value | mean cosine | worst-token cosine |")
    print("|---|---:|---:|---:|---:|---:|")
    sentences = load_sentences(args.sentences, 0)
    float32 = InferenceSettings("float32")
    bfloat16 = InferenceSettings("bfloat16", native_only=False)
    for size in args.sizes:
        with tempfile.TemporaryDirectory() as directory:
            bilm = load_bilm(size, directory).eval().to(device)
        differences, largest, cosines = None, None, None
        for start in range(0, len(sentences), args.batch_size):
            ids = batch_to_ids(sentences[start : start + args.batch_size]).to(device)
            with torch.no_grad():
                expected = run_bilm(bilm, ids, float32.plan(ids.device))
                got = run_bilm(bilm, ids, bfloat16.plan(ids.device))
            mask = expected["mask"]
            if differences is None:
                layers = len(expected["activations"])
                differences, largest, cosines = [0.0] * layers, [0.0] * layers, [[] for _ in range(layers)]
            for layer, (want, have) in enumerate(zip(expected["activations"], got["activations"])):
                want, have = want[mask], have[mask]
                differences[layer] = max(differences[layer], float((have - want).abs().max()))
                largest[layer] = max(largest[layer], float(want.abs().max()))
                cosines[layer].append(torch.nn.functional.cosine_similarity(have, want, dim=-1))
        for layer in range(len(differences)):
            cosine = torch.cat(cosines[layer])
            print(f"| {size} | {layer} | {differences[layer]:.3g} | {largest[layer]:.3g} | "
                  f"{float(cosine.mean()):.6f} | {float(cosine.min()):.6f} |", flush=True)
        print(f"<!-- {size}: {cosine.numel()} tokens, <S> and </S> included -->", flush=True)


if __name__ == "__main__":
    sys.exit(main())
