"""
Draws the speed ratios of elmo_plugin against AllenNLP core's ELMo (ours / core, side by side in
one process) from benchmarks/results/speed_ratios.json, the machine-readable copy of BENCHMARKS.md's
table "Speed against AllenNLP core", into the chart of the documentation's performance page:
one bar a measurement, grouped by machine, coloured by precision, hatched for training, on a
logarithmic axis with AllenNLP core (1x) and the CPU target (2x) marked.

    make figure-speed-ratios
    .venv/bin/python scripts/plot_speed_ratios.py [--input JSON] [--output PNG]

matplotlib comes from requirements/figures.txt (the make target installs it).
"""
import argparse
import hashlib
import json
import re
import sys
from pathlib import Path
from typing import Dict, List

REPO_ROOT = Path(__file__).resolve().parent.parent
DEFAULT_INPUT = REPO_ROOT / "benchmarks" / "results" / "speed_ratios.json"
DEFAULT_OUTPUT = REPO_ROOT / "docs" / "speed_ratios.png"

# One colour per precision, as BENCHMARKS.md names them ("bfloat16 / float32": ours in bfloat16
# against core in float32; "bfloat16": both sides in bfloat16 autocast).
COLOURS = {"float32": "#4c72b0", "bfloat16 / float32": "#dd8452", "bfloat16": "#55a868"}


def load_measurements(path: Path) -> List[Dict]:
    """The measurements of a speed_ratios.json, checked for the keys the chart reads."""
    measurements = json.loads(path.read_text(encoding="utf-8"))["measurements"]
    needed = {"what", "size", "batch", "precision", "ratio", "ratio_text", "variant", "machine",
              "hardware"}
    for index, measurement in enumerate(measurements):
        missing = needed - measurement.keys()
        if missing:
            raise ValueError(f"{path}: measurement {index + 1} lacks {', '.join(sorted(missing))}")
        if measurement["precision"] not in COLOURS:
            raise ValueError(
                f"{path}: measurement {index + 1}: unknown precision {measurement['precision']!r}"
            )
    return measurements


def short_hardware(hardware: str) -> str:
    """The machine's description without the software: ``AMD EPYC (x86_64: AVX2 AVX512F
    AVX512_BF16; no AMX), 2 cores`` (the CPU and its vector extensions), ``NVIDIA H100 80GB
    HBM3``."""
    text = hardware.split(", torch")[0]
    text = re.sub(r"; PyTorch kernels \w+", "", text)
    return re.sub(r"^vm ", "", text).replace("Intel(R) Xeon(R) Processor", "Intel Xeon")


def source_digest(path: Path) -> str:
    """What the chart records of the JSON it was drawn from (in the PNG's ``Description``), so
    that a test can tell a chart that is older than its JSON without drawing it again."""
    return "speed_ratios.json sha256 " + hashlib.sha256(path.read_bytes()).hexdigest()


def plot(measurements: List[Dict], output: Path, description: str = "") -> None:
    """Writes the chart of ``measurements`` (in their order, grouped by machine) to ``output``,
    with ``description`` in the PNG's metadata."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.patches import Patch

    machines: List[str] = []
    for measurement in measurements:
        if measurement["machine"] not in machines:
            machines.append(measurement["machine"])
    # Rows from the top: a header row per machine, then its measurements.
    labels, positions, header_positions = [], [], []
    bars = []
    row = 0
    for machine in machines:
        group = [m for m in measurements if m["machine"] == machine]
        header_positions.append((row, f"{machine}: {short_hardware(group[0]['hardware'])}"))
        row += 1
        for measurement in group:
            label = f"{measurement['what']}, {measurement['size']}, batch {measurement['batch']}"
            # What tells apart two rows of one machine that differ only in a setting (threads,
            # the allocator), as the table's "setting" column does.
            variant = measurement["variant"]
            labels.append(label + (f" ({variant})" if variant else ""))
            positions.append(row)
            bars.append(measurement)
            row += 1
        row += 0.5

    figure, axis = plt.subplots(figsize=(8.4, 0.24 * row + 1.2))
    for position, measurement in zip(positions, bars):
        axis.barh(
            position,
            measurement["ratio"],
            height=0.75,
            color=COLOURS[measurement["precision"]],
            hatch="///" if measurement["what"] == "training" else None,
            edgecolor="white",
            linewidth=0,
        )
        axis.text(
            measurement["ratio"] * 1.03, position, measurement["ratio_text"], va="center", fontsize=7
        )
    axis.set_xscale("log")
    axis.set_xlim(0.9, max(m["ratio"] for m in bars) * 1.5)
    axis.set_xticks([1, 2, 3, 5, 10])
    axis.set_xticklabels(["1x", "2x", "3x", "5x", "10x"])
    axis.axvline(1.0, color="black", linewidth=0.8)
    axis.axvline(2.0, color="grey", linewidth=0.8, linestyle="--")
    axis.set_yticks(positions)
    axis.set_yticklabels(labels, fontsize=7)
    for position, text in header_positions:
        axis.text(0.91, position, text, va="center", fontsize=8, fontweight="bold")
    axis.set_ylim(row, -1)
    axis.set_xlabel("elmo_plugin / AllenNLP core (higher is faster; dashed: the CPU target, 2x)")
    axis.legend(
        handles=[
            Patch(color=COLOURS["float32"], label="float32, both"),
            Patch(color=COLOURS["bfloat16 / float32"], label="ours bfloat16 / core float32"),
            Patch(color=COLOURS["bfloat16"], label="bfloat16 autocast, both"),
            Patch(facecolor="white", edgecolor="black", hatch="///", label="training step"),
        ],
        fontsize=7,
        loc="lower right",
    )
    figure.tight_layout()
    output.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(output, dpi=110, metadata={"Software": None, "Description": description or None})
    plt.close(figure)


def main(argv: List[str] = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument("--input", type=Path, default=DEFAULT_INPUT, help="speed_ratios.json")
    parser.add_argument("--output", type=Path, default=DEFAULT_OUTPUT, help="the PNG to write")
    args = parser.parse_args(argv)
    try:
        measurements = load_measurements(args.input)
    except (OSError, ValueError, KeyError) as error:
        print(f"plot_speed_ratios.py: error: {error}", file=sys.stderr)
        return 1
    plot(measurements, args.output, source_digest(args.input))
    print(f"Wrote {args.output} ({len(measurements)} measurements)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
