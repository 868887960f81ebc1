"""
How exact our float32 ELMo is: per configuration and output layer, the distance of our float32
``allennlp elmo`` output (`ElmoEmbedder`, stateless, one batch of sentences of mixed length) from
AllenNLP core's ``_ElmoBiLm`` run in float64 on the same files, against core float32's own
distance from it. Issue 34's bar: ours no further than twice core float32's distance, on every
layer.

    .venv/bin/python benchmarks/float32_exactness.py [--std 0.3] [--seeds 0 1 ...] [--threads N]

Rows: three random biLMs in the bilm-tf layout (every weight drawn N(0, std), std 0.3 by default:
large enough that the cell and the projection clip, both 3, bind; one draw, seed 0, unless
``--seeds`` asks for more) and the trained golden fixture (``tests/fixtures/elmo_allennlp``). The
batch: 64 sentences of 1 to 25 tokens, among them an 80-character token (cut to 48 bytes), Korean
(3-byte UTF-8) and emoji (4-byte UTF-8). Distances are over the real tokens only (core's
``<S>`` and ``</S>`` removed): ``max`` and ``mean`` absolute difference; the bar is on ``max``.
The clip columns count the values of core float64's LSTM cells and projected outputs that were
beyond the clip before clipping (share of all values computed).

The ratio of two maxima is a noisy statistic where the LSTM amplifies rounding: over eight draws
of each configuration (``--seeds 0 1 2 3 4 5 6 7``, the highway's oneDNN kernel switched off) it
ranged from 0.43 to 1.68 while the ratio of the means stayed within 0.85-1.08; the ratio of the
means is the steadier sign of a less exact computation.

``tests/modules/test_float32_exactness.py`` runs the same measurement on the three random biLMs
and fails where the bar is missed.
"""
import argparse
import math
import random
import sys
import tempfile
from pathlib import Path
from typing import Any, Dict, List, NamedTuple, Optional, Sequence, Tuple
from unittest import mock

import torch
from allennlp.modules import lstm_cell_with_projection
from allennlp.modules.elmo import _ElmoBiLm
from allennlp.modules.elmo import batch_to_ids as core_batch_to_ids
from allennlp.nn.util import remove_sentence_boundaries

from elmo_plugin import ElmoEmbedder
from elmo_plugin.common.hardware import describe_run
from elmo_plugin.model_files.bilm_tf.directory import write_bilm_tf_directory
from elmo_plugin.model_files.bilm_tf.options import BilmOptions
from elmo_plugin.modules.bilm import ElmoBiLm

REPO_ROOT = Path(__file__).resolve().parents[1]
GOLDEN = REPO_ROOT / "tests" / "fixtures" / "elmo_allennlp"
GOLDEN_FILES = (GOLDEN / "options.json", GOLDEN / "lm_weights.hdf5")

# Issue 34: our float32 may be at most this many times as far from core float64 as core float32.
BAR = 2.0
STD = 0.3
CLIP = 3.0

# AllenNLP core reads 50 characters per token and needs skip connections.
_COMMON = dict(max_characters_per_token=50, use_skip_connections=True, cell_clip=CLIP,
               proj_clip=CLIP)
# The random configurations (`BilmOptions` keyword arguments), drawn with seed `SEED` unless
# told otherwise.
CONFIGURATIONS: Dict[str, Dict[str, Any]] = {
    # The golden fixture's architecture: 5 filters, relu, 2 highway layers, 64 cells -> 16.
    "small_relu": dict(filters=[[1, 4], [2, 8], [3, 16], [4, 32], [5, 64]], char_embedding_dim=4,
                       n_highway=2, activation="relu", lstm_dim=64, projection_dim=16, n_layers=2,
                       **_COMMON),
    # Issue 34's "wide": 8-dim characters, 7 filter widths (320 filters), 2 highway layers, tanh.
    "wide": dict(filters=[[1, 8], [2, 8], [3, 16], [4, 32], [5, 64], [6, 64], [7, 128]],
                 char_embedding_dim=8, n_highway=2, activation="tanh", lstm_dim=64,
                 projection_dim=32, n_layers=2, **_COMMON),
    "three_layers_no_highway": dict(filters=[[1, 8], [2, 16], [3, 32]], char_embedding_dim=4,
                                    n_highway=0, activation="relu", lstm_dim=64,
                                    projection_dim=16, n_layers=3, **_COMMON),
}
SEED = 0

TOKEN_80 = ("Lopado-temacho-selacho-galeo-kranio-leipsano-drim-hypo-trimmato-silphio-"
            "karabo-melito")[:80]
assert len(TOKEN_80) == 80
# Sentences that every run must include: English, a token of 80 characters, Korean, emoji
# (4-byte UTF-8, one a ZWJ sequence), lengths from 1 to 19 tokens.
SPECIAL_SENTENCES: List[List[str]] = [
    ["The", "quick", "brown", "fox", "jumps", "over", "the", "lazy", "dog", "."],
    ["A", TOKEN_80, "token", "is", "cut", "to", "48", "bytes", "."],
    ["아버지가방에들어가신다", "밥", "을", "먹었다", "."],
    ["Emoji", "😀", "🎉", "👩‍👩‍👧", "and", "café", "!"],
    ["Short", "."],
    ["ELMo", "reads", "characters", ",", "so", "every", "token", "gets", "a", "vector", ",",
     "even", "unseen", "ones", "like", "glorptastic", "and", "1,234.5", "."],
    ["x"],
]
BATCH_SIZE = 64  # ``allennlp elmo``'s default


def batch_of_sentences(size: int = BATCH_SIZE, seed: int = 0) -> List[List[str]]:
    """
    One batch as ``allennlp elmo`` runs it: `SPECIAL_SENTENCES`, then sentences of 1 to 25
    tokens drawn (seeded) from their tokens, ``size`` in all. A batch this large makes the
    largest distance of a layer a steadier statistic than a handful of sentences would.
    """
    generator = random.Random(seed)
    pool = sorted({token for sentence in SPECIAL_SENTENCES for token in sentence})
    drawn = [[generator.choice(pool) for _ in range(generator.randint(1, 25))]
             for _ in range(size - len(SPECIAL_SENTENCES))]
    return [list(sentence) for sentence in SPECIAL_SENTENCES] + drawn


SENTENCES = batch_of_sentences()


def write_random_bilm(directory: Path, arch: Dict[str, Any], seed: int = 0,
                      std: float = STD) -> Tuple[Path, Path]:
    """
    A biLM of architecture ``arch`` (`BilmOptions` keyword arguments) with every weight drawn
    from N(0, std) (the byte embedding's mask row stays zero), written by the plugin's bilm-tf
    writer as ``options.json`` + ``weights.hdf5`` in ``directory``. Our parameters keep bilm-tf's
    conventions, so each HDF5 dataset is N(0, std) too (the stored LSTM bias without the forget
    bias of 1 that bilm-tf and both loaders add). Returns both paths.
    """
    options = BilmOptions(**arch)
    bilm = ElmoBiLm(options)
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for _, parameter in sorted(bilm.named_parameters()):
            parameter.copy_(torch.randn(parameter.shape, generator=generator) * std)
        bilm.character_encoder.char_embedding.weight[0].zero_()
    written = write_bilm_tf_directory(str(directory), options, bilm.state_dict())
    return Path(written["options"]), Path(written["weights"])


class ClipCounts(NamedTuple):
    cell_values: int
    cells_clipped: int
    output_values: int
    outputs_clipped: int


class _ClipCounter:
    """
    Counts the values that core's LSTM cells (``LstmCellWithProjection``) clip, by wrapping
    ``torch.clamp`` while core runs: it clamps the cell (``cell_size`` wide), then the projected
    output (``hidden_size`` wide).
    """

    def __init__(self, cell_size: int, hidden_size: int) -> None:
        assert cell_size != hidden_size, "cells and outputs are told apart by their width"
        self.widths = {cell_size: "cells", hidden_size: "outputs"}
        self.values = {"cells": 0, "outputs": 0}
        self.clipped = {"cells": 0, "outputs": 0}
        self.original = torch.clamp

    def clamp(self, tensor: torch.Tensor, low: float, high: float) -> torch.Tensor:
        kind = self.widths[tensor.size(-1)]
        self.values[kind] += tensor.numel()
        self.clipped[kind] += int(((tensor < low) | (tensor > high)).sum())
        return self.original(tensor, low, high)

    def counts(self) -> ClipCounts:
        return ClipCounts(self.values["cells"], self.clipped["cells"], self.values["outputs"],
                          self.clipped["outputs"])


def core_layers(options_file: Path, weight_file: Path, sentences: Sequence[Sequence[str]],
                dtype: torch.dtype, count_clips: bool = False):
    """
    AllenNLP core's ``_ElmoBiLm`` on the files, converted to ``dtype`` (the float32 weights as
    they are, so float64 computes with the same weights), on one batch: every layer with ``<S>``
    and ``</S>`` removed, ``(layers, batch, time, dim)``, the mask ``(batch, time)`` and, with
    ``count_clips``, the `ClipCounts`.
    """
    bilm = _ElmoBiLm(str(options_file), str(weight_file)).to(dtype).eval()
    assert all(p.dtype == dtype for p in bilm.parameters())
    ids = core_batch_to_ids([list(sentence) for sentence in sentences])
    counter = None
    with torch.no_grad():
        if count_clips:
            cell = bilm._elmo_lstm.forward_layer_0
            counter = _ClipCounter(cell.cell_size, cell.hidden_size)
            with mock.patch.object(lstm_cell_with_projection.torch, "clamp", counter.clamp):
                output = bilm(ids)
        else:
            output = bilm(ids)
    layers, mask = [], None
    for activation in output["activations"]:
        assert activation.dtype == dtype, (activation.dtype, dtype)
        layer, mask = remove_sentence_boundaries(activation, output["mask"])
        layers.append(layer)
    return torch.stack(layers), mask.bool(), counter.counts() if counter else None


def our_layers(options_file: Path, weight_file: Path, sentences: Sequence[Sequence[str]]):
    """Ours in float32 through the public API, as ``allennlp elmo`` runs it: `ElmoEmbedder`
    (stateless) on one batch; ``(layers, batch, time, dim)`` and the mask."""
    embedder = ElmoEmbedder(options_file=options_file, weight_file=weight_file)
    activations, mask = embedder.batch_to_embeddings([list(s) for s in sentences])
    assert activations.dtype == torch.float32, activations.dtype
    return activations.transpose(0, 1), mask


class LayerDistance(NamedTuple):
    layer: int
    core32_max: float
    ours32_max: float
    core32_mean: float
    ours32_mean: float

    @property
    def ratio(self) -> float:
        if self.core32_max == 0.0:
            return 0.0 if self.ours32_max == 0.0 else math.inf
        return self.ours32_max / self.core32_max


def _distances(layer: torch.Tensor, reference: torch.Tensor, mask: torch.Tensor):
    """Max and mean absolute difference over the real tokens."""
    diff = (layer.double() - reference)[mask]  # (tokens, dim)
    return float(diff.abs().max()), float(diff.abs().mean())


class Measurement(NamedTuple):
    layers: List[LayerDistance]
    clips: ClipCounts

    def failures(self, bar: float = BAR) -> List[LayerDistance]:
        return [layer for layer in self.layers if not layer.ratio <= bar]

    def describe(self) -> str:
        return "; ".join(
            f"layer {d.layer}: ours32 {d.ours32_max:.3g} vs core32 {d.core32_max:.3g} "
            f"(ratio {d.ratio:.2f}; mean {d.ours32_mean:.3g} vs {d.core32_mean:.3g})"
            for d in self.layers
        )


def measure(options_file: Path, weight_file: Path,
            sentences: Sequence[Sequence[str]] = SENTENCES) -> Measurement:
    """The distances of every layer (see the module's docstring) and core float64's clips."""
    core64, mask64, clips = core_layers(options_file, weight_file, sentences, torch.float64,
                                        count_clips=True)
    core32, mask32, _ = core_layers(options_file, weight_file, sentences, torch.float32)
    ours32, mask = our_layers(options_file, weight_file, sentences)
    assert torch.equal(mask, mask64) and torch.equal(mask, mask32)
    assert ours32.shape == core64.shape == core32.shape, (ours32.shape, core64.shape)
    assert int(mask.sum()) == sum(len(sentence) for sentence in sentences)
    layers = []
    for index in range(core64.size(0)):
        core_max, core_mean = _distances(core32[index], core64[index], mask)
        ours_max, ours_mean = _distances(ours32[index], core64[index], mask)
        layers.append(LayerDistance(index, core_max, ours_max, core_mean, ours_mean))
    return Measurement(layers, clips)


def measure_configuration(name: str, directory: Path, seed: int = SEED,
                          std: float = STD) -> Measurement:
    """`measure` on a random biLM of configuration ``name``, written under ``directory``."""
    files = write_random_bilm(directory / f"{name}-{seed}", CONFIGURATIONS[name], seed, std)
    return measure(*files)


def _percent(part: int, whole: int) -> str:
    return f"{100 * part / whole:.2f}% ({part})" if whole else "-"


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--std", type=float, default=STD,
                        help="standard deviation of the random weights")
    parser.add_argument("--seeds", type=int, nargs="+", default=[SEED],
                        help="draw each random configuration with each of these seeds")
    parser.add_argument("--threads", type=int, default=None,
                        help="torch intra-op threads (default: torch's)")
    args = parser.parse_args(argv)
    if args.threads is not None:
        torch.set_num_threads(args.threads)
    print(f"# {describe_run()}")
    print(f"# random weights N(0, {args.std}), clips {CLIP:g}; {len(SENTENCES)} sentences in one "
          f"batch; distances from AllenNLP core float64 over the real tokens; bar: ratio <= "
          f"{BAR:g}")
    print("| configuration | layer | core32 max | ours32 max | ratio | core32 mean | ours32 mean "
          "| cells clipped (core64) | outputs clipped (core64) |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    worst = 0.0
    with tempfile.TemporaryDirectory() as directory:
        runs = [(name if args.seeds == [SEED] else f"{name} (seed {seed})",
                 lambda name=name, seed=seed: measure_configuration(name, Path(directory), seed,
                                                                    args.std))
                for name in CONFIGURATIONS for seed in args.seeds]
        runs.append(("golden fixture (trained)", lambda: measure(*GOLDEN_FILES)))
        for name, run in runs:
            result = run()
            clips = result.clips
            for d in result.layers:
                print(f"| {name} | {d.layer} | {d.core32_max:.3g} | {d.ours32_max:.3g} | "
                      f"{d.ratio:.2f} | {d.core32_mean:.3g} | {d.ours32_mean:.3g} | "
                      f"{_percent(clips.cells_clipped, clips.cell_values)} | "
                      f"{_percent(clips.outputs_clipped, clips.output_values)} |", flush=True)
                worst = max(worst, d.ratio)
    print(f"# worst ratio {worst:.2f}: {'within' if worst <= BAR else 'MISSES'} the bar of {BAR:g}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
