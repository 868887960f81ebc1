"""
The table of ``bash benchmarks/gpu/session.sh day``: what its runs measured (the JSON files in
one folder), and the projection, in hours, of the published recipe (10 passes over the 1B Word
Benchmark) on 1 and 8 GPUs, with the perplexity to expect.

    python3 benchmarks/gpu/day_report.py RESULTS_FOLDER [--out day.md] [--dry]

Reads ``step.json`` (``training_compiled.py``), ``epoch.json`` (``training_epoch.py``),
``profile.json`` (``gpu/training_step_profile.py``), ``data.json`` (``data_path.py``) and
``perplexity.json`` (``compiled_against_eager.py``); a file that is missing is a row "not
measured". ``--dry`` marks the table as the CPU smoke run's (tiny sizes: no figure to quote).

The projection: 10 x 768,648,884 tokens at the rate ``allennlp train`` sustained over a stream
epoch (the step's own rate beside it, an upper bound). On 8 GPUs the recipe's 384 rows are 48 per
GPU, and DDP all-reduces dense gradients: the biLM's 93.6M weights and the softmax's
``V x (512 + 1)``, 2.0 GB in float32 at V = 793,471, every step. A step of 48 rows costs at most
what one of 384 costs (a launch-bound step: the GPU is busy a small share of it), so the 8-GPU
rate is at least 7,680 tokens / (the 384-row step + the all-reduce at ``--all-reduce-gb-per-s``
bus bandwidth + Adagrad's dense pass over the softmax at ``--memory-gb-per-s``): assumptions,
printed with the figure, until 8 GPUs measure it.
"""
import argparse
import datetime
import json
import sys
from pathlib import Path
from typing import Any, Dict, List, Optional

TOKENS_PER_PASS = 768_648_884  # the 1B Word Benchmark's training tokens (bilm-tf's n_train_tokens)
PASSES = 10
VOCABULARY = 793_471
PROJECTION_DIM = 512
BILM_PARAMETERS = 93_600_000
ROWS_PER_UPDATE, UNROLL_STEPS = 384, 20
# bilm-tf's released Original: held-out perplexity after 10 passes, forward and backward averaged.
PUBLISHED_PERPLEXITY = 39.7
TARGETS = {"step": 150_000, "epoch": 89_000, "data": 300_000}


def _load(folder: Path, name: str) -> Optional[Any]:
    path = folder / f"{name}.json"
    return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else None


def _rate(value: Optional[float]) -> str:
    return "not measured" if value is None else f"{value:,.0f}"


def _hours(rate: Optional[float]) -> str:
    return "-" if not rate else f"{PASSES * TOKENS_PER_PASS / rate / 3600:.1f}"


def step_table(rows: Optional[List[Dict]]) -> List[str]:
    lines = ["| path | TF32 tokens/s | bfloat16 tokens/s | bfloat16 / TF32 | compile s (TF32) |",
             "|---|---:|---:|---:|---:|"]
    if not rows:
        return lines + ["| (not measured) | | | | |"]
    names = {"allennlp": "AllenNLP core's biLM", "eager": "ours, eager",
             "compiled": "ours, LSTM recurrence compiled", "captured": "ours, the step captured whole"}
    for side in [s for s in names if any(r["side"] == s for r in rows)]:
        by_precision = {r["precision"]: r for r in rows if r["side"] == side}
        tf32 = by_precision.get("tf32") or by_precision.get("float32")
        bf16 = by_precision.get("bfloat16")
        ratio = (f"{bf16['tokens_per_second'] / tf32['tokens_per_second']:.2f}x"
                 if tf32 and bf16 else "-")
        compile_s = f"{tf32['compile_seconds']:.0f}" if tf32 and side == "compiled" else "-"
        lines.append(f"| {names[side]} | {_rate(tf32 and tf32['tokens_per_second'])} | "
                     f"{_rate(bf16 and bf16['tokens_per_second'])} | {ratio} | {compile_s} |")
    if not any(r["side"] == "captured" for r in rows):
        lines.append("| ours, the step captured whole | not measured | | | |")
    return lines


def best_step_rate(rows: Optional[List[Dict]]) -> Optional[float]:
    ours = [r["tokens_per_second"] for r in rows or [] if r["side"] != "allennlp"]
    return max(ours) if ours else None


def eight_gpu_rate(step_rate: Optional[float], all_reduce_gb_per_s: float,
                   memory_gb_per_s: float) -> Optional[float]:
    if not step_rate:
        return None
    tokens = ROWS_PER_UPDATE * UNROLL_STEPS
    softmax = VOCABULARY * (PROJECTION_DIM + 1)
    gradient_bytes = 4 * (BILM_PARAMETERS + softmax)
    all_reduce = 2 * 7 / 8 * gradient_bytes / (all_reduce_gb_per_s * 1e9)
    # Dense Adagrad over the softmax: read gradient, read/write accumulator and weight.
    adagrad = 5 * 4 * softmax / (memory_gb_per_s * 1e9)
    return tokens / (tokens / step_rate + all_reduce + adagrad)


def report(folder: Path, dry: bool, all_reduce_gb_per_s: float, memory_gb_per_s: float) -> str:
    step, epoch, profile = _load(folder, "step"), _load(folder, "epoch"), _load(folder, "profile")
    data, perplexity = _load(folder, "data"), _load(folder, "perplexity")
    device = (step and step[0].get("device")) or (epoch and epoch.get("device")) or "?"
    lines = [f"# A day of ELMo Original: `session.sh day`, {datetime.date.today()}, device {device}"]
    if dry:
        lines += ["", "**DRY RUN on the CPU, tiny sizes: it shows that the session runs end to "
                      "end; none of these numbers is a figure.**"]
    if step:
        first = step[0]
        lines += ["", f"## The recipe's step: {first['batch_size']} rows x "
                      f"{first['tokens_per_sentence']} tokens, {first['softmax']} softmax "
                      f"gradients (`training_compiled.py`, target {TARGETS['step']:,} tokens/s)"]
    else:
        lines += ["", "## The recipe's step"]
    lines += [""] + step_table(step)
    lines += ["", "## Sustained through `allennlp train` (a stream epoch, `training_epoch.py`, "
                  f"target {TARGETS['epoch']:,} tokens/s)", ""]
    if epoch:
        lines += ["| config | precision | compile | batches | tokens/s sustained | first batch s |",
                  "|---|---|---|---:|---:|---:|",
                  f"| {epoch['config']} ({epoch['size']}, {epoch['batch_size']} x "
                  f"{epoch['unroll_steps']}, {epoch['num_words']:,} words) | {epoch['precision']} | "
                  f"{epoch['compile']} | {epoch['batches']} | {epoch['tokens_per_second']:,.0f} | "
                  f"{epoch['first_batch_seconds']:.1f} |"]
    else:
        lines += ["not measured"]
    lines += ["", "## Where the step's time goes (`training_step_profile.py`)", ""]
    if profile:
        waits = ", ".join(f"{count} {name}" for name, count in profile["host_waits"].items())
        lines += [f"- {profile['side']}, {profile['precision']}, {profile['batch_size']} rows: wall "
                  f"{profile['wall_ms']:.1f} ms, GPU busy {profile['gpu_busy_ms']:.1f} ms "
                  f"({100 * profile['busy_share']:.0f}%), {profile['kernels']:,} kernels; the host "
                  f"waited: {waits}"]
    else:
        lines += ["not measured (a GPU run: the profiler's CUDA activity)"]
    lines += ["", f"## The data path alone (`data_path.py`, target {TARGETS['data']:,} tokens/s)", ""]
    if data:
        lines += ["| loader | tokens/s | keeps up |", "|---|---:|---|"]
        lines += [f"| {row['loader']} | {row['tokens_per_second']:,.0f} | "
                  f"{'yes' if row['tokens_per_second'] >= TARGETS['data'] else 'no'} |" for row in data]
    else:
        lines += ["not measured"]
    lines += ["", "## Compiled against eager (`compiled_against_eager.py`)", ""]
    if perplexity:
        lines += ["| run | held-out ppl | distance to eager |", "|---|---:|---:|"]
        lines += [f"| {row['run']} | {row['validation_ppl']:.2f} | {100 * row['distance']:.3f}% |"
                  for row in perplexity["rows"]]
        verdict = "not run" if perplexity["passes"] is None else perplexity["passes"]
        lines += ["", f"Compiled within 1% and the noise floor: {verdict} "
                      f"({perplexity['size']}, {perplexity['steps']} steps, {perplexity['precision']})"]
    else:
        lines += ["not measured"]
    epoch_rate = epoch and epoch["tokens_per_second"]
    step_rate = best_step_rate(step)
    eight = eight_gpu_rate(epoch_rate or step_rate, all_reduce_gb_per_s, memory_gb_per_s)
    lines += ["", f"## Projection: {PASSES} passes over the 1B Word Benchmark "
                  f"({TOKENS_PER_PASS:,} tokens a pass){' (dry: meaningless)' if dry else ''}", "",
              "| GPUs | tokens/s | hours | from |", "|---|---:|---:|---|",
              f"| 1 | {_rate(epoch_rate)} | {_hours(epoch_rate)} | `allennlp train`, measured |",
              f"| 1, the step alone | {_rate(step_rate)} | {_hours(step_rate)} | the fastest step "
              "measured: a bound |",
              f"| 8 | at least {_rate(eight)} | at most {_hours(eight)} | projected: 48 rows per GPU "
              f"(no slower than 384), DDP's all-reduce of {4 * (BILM_PARAMETERS + VOCABULARY * 513) / 1e9:.1f} "
              f"GB at {all_reduce_gb_per_s:.0f} GB/s, dense Adagrad over the softmax at "
              f"{memory_gb_per_s:.0f} GB/s |",
              "", f"A day is {PASSES * TOKENS_PER_PASS / 86400:,.0f} tokens/s sustained. The "
              f"perplexity to expect after the {PASSES} passes: {PUBLISHED_PERPLEXITY} (held out, "
              "forward and backward averaged), the released model's, if the recipe is reproduced; "
              "the compiled path only where it stays within eager's noise floor."]
    return "\n".join(lines) + "\n"


def main(argv: Optional[List[str]] = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("folder", type=Path)
    parser.add_argument("--out", type=Path)
    parser.add_argument("--dry", action="store_true")
    parser.add_argument("--all-reduce-gb-per-s", type=float, default=200.0,
                        help="the all-reduce's bus bandwidth between 8 GPUs (assumed)")
    parser.add_argument("--memory-gb-per-s", type=float, default=2000.0,
                        help="a GPU's memory bandwidth for the dense Adagrad pass (assumed)")
    args = parser.parse_args(argv)
    text = report(args.folder, args.dry, args.all_reduce_gb_per_s, args.memory_gb_per_s)
    if args.out:
        args.out.write_text(text, encoding="utf-8")
    print(text)


if __name__ == "__main__":
    sys.exit(main())
