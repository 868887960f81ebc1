"""
How often a trained biLM's ``cell_clip`` and ``proj_clip`` bind on real sentences: per LSTM layer
and direction, the share of positions (tokens, ``<S>`` and ``</S>`` included) where at least one
cell or projected output was clipped, the share of clipped values, and the largest value reached
before clipping.

    .venv/bin/python benchmarks/clip_binding.py DIR [DIR ...] [--sentences 1024]
        [--batch-size 64] [--device cpu|cuda] [--data FILE]

DIR holds ``options.json`` and ``weights.hdf5`` (what ``allennlp elmo-export`` writes; the golden
fixture's ``tests/fixtures/elmo_allennlp`` works too). Sentences are the held-out English file at
their own lengths unless ``--data`` names another (one tokenized sentence per line).

Why: cuDNN's LSTM (``torch.nn.LSTM(proj_size=...)``) has a projection but no clipping. If the
clips never bind on real text, inference could run on cuDNN with a check that they did not
(issue 29); the ``would bind`` columns say how often that check would fail. The recurrence runs as
in training (``keep_for_backward=True``), which records which values each clip changed; the
outputs are the same as inference's.
"""
import argparse
import sys
from collections import defaultdict
from pathlib import Path
from typing import Dict

import torch
from bilm_sizes import DATA, load_sentences

from elmo_plugin.common.hardware import describe_run
from elmo_plugin.data.character_ids import batch_to_ids
from elmo_plugin.modules.bilm import ElmoBiLm
from elmo_plugin.modules.execution import lstm_layer
from elmo_plugin.modules.execution.lstm_recurrence import recurrence_loop
from elmo_plugin.modules.projected_lstm import ProjectedLstmLayer


class ClipCounter:
    """Counts, per layer, what the clips changed, by running the recurrence with its pass masks."""

    def __init__(self) -> None:
        self.current = ""
        self.counts: Dict[str, Dict[str, float]] = defaultdict(lambda: defaultdict(float))

    def recurrence(self, input_gates, h0, c0, weights, step_sizes, few_rows=None):
        """`recurrence_loop`'s arguments, run as training runs it, which keeps the pass masks."""
        cell_clip, proj_clip = weights.cell_clip, weights.proj_clip
        unclipped = weights._replace(cell_clip=None, proj_clip=None)
        outputs, h, c, saved = recurrence_loop(input_gates, h0, c0, unclipped, step_sizes, True)
        cells = saved.cells
        # The same run with the clips: what the biLM computes. The run above, without them,
        # gives the values before clipping (the largest ones, and how many lie outside).
        clipped_outputs, h, c, saved = recurrence_loop(input_gates, h0, c0, weights, step_sizes,
                                                       True)
        cell_passes, output_passes = saved.cell_passes, saved.output_passes
        counts = self.counts[self.current]
        counts["positions"] += cells.size(0)
        counts["largest cell (unclipped run)"] = max(
            counts["largest cell (unclipped run)"], float(cells.abs().max()))
        counts["largest output (unclipped run)"] = max(
            counts["largest output (unclipped run)"], float(outputs.abs().max()))
        counts["cell values"] += cells.numel()
        counts["output values"] += outputs.numel()
        if cell_clip is not None:
            counts["cell_clip"] = cell_clip
            counts["positions with a cell clipped"] += int((~cell_passes).any(dim=1).sum())
            counts["cell values clipped"] += int((~cell_passes).sum())
        if proj_clip is not None:
            counts["proj_clip"] = proj_clip
            counts["positions with an output clipped"] += int((~output_passes).any(dim=1).sum())
            counts["output values clipped"] += int((~output_passes).sum())
        return clipped_outputs, h, c


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("models", nargs="+", type=Path)
    parser.add_argument("--sentences", type=int, default=1024)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--data", type=Path, default=DATA)
    args = parser.parse_args()
    device = torch.device(args.device)
    sentences = load_sentences(args.sentences, 0, path=args.data)
    print(f"# {describe_run(device)}; {len(sentences)} sentences of {args.data.name} at their "
          f"own lengths")
    print("| model | layer | cell_clip | positions with a cell clipped | cell values clipped "
          "| largest cell | proj_clip | positions with an output clipped | output values clipped "
          "| largest output |")
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    counter = ClipCounter()
    original = lstm_layer.recurrence_loop
    lstm_layer.recurrence_loop = counter.recurrence
    try:
        for directory in args.models:
            counter.counts.clear()
            weights = directory / "weights.hdf5"
            if not weights.is_file():  # the golden fixture's name
                weights = directory / "lm_weights.hdf5"
            bilm = ElmoBiLm.from_files(directory / "options.json", weights)
            bilm = bilm.eval().to(device)
            for name, module in bilm.named_modules():
                if isinstance(module, ProjectedLstmLayer):
                    module.register_forward_pre_hook(
                        lambda _module, _inputs, name=name: setattr(counter, "current", name))
            for start in range(0, len(sentences), args.batch_size):
                ids = batch_to_ids(sentences[start : start + args.batch_size]).to(device)
                with torch.no_grad():
                    bilm(ids)
            for layer, counts in sorted(counter.counts.items()):
                def share(part: str, whole: str) -> str:
                    return f"{100 * counts[part] / counts[whole]:.3f}%"

                print(f"| {directory.name} | {layer} | {counts.get('cell_clip', '-')} | "
                      f"{share('positions with a cell clipped', 'positions')} | "
                      f"{share('cell values clipped', 'cell values')} | "
                      f"{counts['largest cell (unclipped run)']:.3g} | "
                      f"{counts.get('proj_clip', '-')} | "
                      f"{share('positions with an output clipped', 'positions')} | "
                      f"{share('output values clipped', 'output values')} | "
                      f"{counts['largest output (unclipped run)']:.3g} |", flush=True)
    finally:
        lstm_layer.recurrence_loop = original


if __name__ == "__main__":
    sys.exit(main())
