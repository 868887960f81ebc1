"""
The main job on a small built-in default: ``python scripts/demo.py [OUTPUT_DIR]`` (``make demo``).

1. ``allennlp train training_configs/bilm.jsonnet``: pretrain a tiny biLM on the built-in sample
   corpus (a minute on 2 CPU cores);
2. ``allennlp elmo-export``: write it in the bilm-tf format (``options.json`` + ``weights.hdf5``),
   the format every ELMo loader reads, into the run's ``bilm`` folder (where the training report
   says to);
3. ``allennlp elmo``: embed a few sentences with it into HDF5, all layers;
4. check the file against the Python API (`ElmoEmbedder`) and AllenNLP core's own ELMo module
   loading the same exported files, and print a summary.

Each step is the real command, run as a user would run it; the commands are printed. The model
is so small that a second thread only waits for the first (and, beside another busy process,
for a core): every step runs on one thread, unless ``OMP_NUM_THREADS`` says otherwise.

Ctrl-C or SIGTERM (``make`` passes it on) stops the step that runs: the command says in one
line what it left, and the demo exits with status 130 or 143, without a traceback.
"""
import argparse
import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
from typing import Dict, List, Optional, Tuple

import h5py
import numpy as np
import torch

from elmo_plugin.common.threads import threads_from_environment
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

# 128 + the signal's number, as the shell reports a process ended by it.
EXIT_INTERRUPTED = 130
EXIT_TERMINATED = 143


class Terminated(Exception):
    """SIGTERM, raised in the demo's main thread (as AllenNLP's command does)."""


class StepStopped(Exception):
    """A step stopped by Ctrl-C or SIGTERM, after it said what it left; ``status`` is the demo's."""

    def __init__(self, status: int) -> None:
        super().__init__(status)
        self.status = status


def _raise_terminated(signum, frame) -> None:
    raise Terminated()


def step_environment() -> Dict[str, str]:
    """The environment of the steps: one intra-op thread unless ``OMP_NUM_THREADS`` is set."""
    environment = dict(os.environ)
    environment.setdefault("OMP_NUM_THREADS", "1")
    return environment


def _run(command: List[str]) -> None:
    """
    Runs one step and waits for it. The step has a session of its own, so that Ctrl-C at the
    terminal reaches the demo only, which passes it (or a SIGTERM) on, once, and waits for the
    step to say what it left; then the demo exits with the status of the signal.
    """
    print("$ " + " ".join(shlex.quote(part) for part in command), flush=True)
    step = subprocess.Popen(command, cwd=REPO_ROOT, env=step_environment(), start_new_session=True)
    try:
        status = step.wait()
    except (KeyboardInterrupt, Terminated) as interruption:
        signum = signal.SIGINT if isinstance(interruption, KeyboardInterrupt) else signal.SIGTERM
        step.send_signal(signum)
        _wait_through_interruptions(step)
        raise StepStopped(128 + signum) from None
    if status != 0:
        # The step printed its own one-line error (a negative status: killed by that signal).
        sys.exit(status if status > 0 else 128 - status)


def _wait_through_interruptions(step: subprocess.Popen) -> None:
    """Waits for a step that was told to stop, through further Ctrl-C or SIGTERM."""
    while True:
        try:
            step.wait()
            return
        except (KeyboardInterrupt, Terminated):
            continue


def _allennlp(*arguments: str) -> List[str]:
    return [sys.executable, "-m", "allennlp", *arguments, "--include-package", "elmo_plugin"]


def main(argv: Optional[List[str]] = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("output_dir", nargs="?", default="demo_output")
    args = parser.parse_args(argv)
    signal.signal(signal.SIGTERM, _raise_terminated)
    try:
        demo(os.path.abspath(args.output_dir))
    except StepStopped as stopped:
        sys.exit(stopped.status)
    except (KeyboardInterrupt, Terminated) as interruption:
        sys.stdout.flush()
        sys.stderr.write("make demo: interrupted; run it again to start over\n")
        sys.exit(EXIT_INTERRUPTED if isinstance(interruption, KeyboardInterrupt) else EXIT_TERMINATED)


def directories(output_dir: str) -> Tuple[str, str]:
    """The training run's folder and the exported biLM's, in it (where the run's report says)."""
    run_dir = os.path.join(output_dir, "run")
    return run_dir, os.path.join(run_dir, "bilm")


def demo(output_dir: str) -> None:
    torch.set_num_threads(threads_from_environment() or 1)
    run_dir, bilm_dir = directories(output_dir)
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
