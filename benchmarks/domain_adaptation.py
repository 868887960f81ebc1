"""
Adapting a general biLM to a domain (docs/adapting.md): held-out perplexity on the domain's test
text of the general model, of ``allennlp elmo-adapt`` runs from it (epochs x learning rates), and of
the same architecture trained from scratch on the domain text alone, all with the general model's
words (the adapted runs re-sort them, the scratch run is given them re-sorted the same way), so that
every perplexity counts the same tokens as ``<UNK>`` and the numbers compare. Also the general
domain's held-out perplexity before and after adapting (what adapting costs there), and the
out-of-vocabulary rates with ``--extend-vocabulary``.

    .venv/bin/python benchmarks/domain_adaptation.py --general build/en_small/run \\
        --general-heldout ../shared/data/en/lm/heldout.txt --domain ../shared/data/en/ner/wnut17

The domain folder holds ``train.txt``, ``dev.txt``, ``test.txt``: one sentence a line, or CoNLL
(``token<TAB>tag`` lines, sentences apart by blank lines), whose tokens are taken. Runs go to
``--out`` (default ``build/adaptation``); an existing run or evaluation is kept, so an interrupted
script goes on where it stopped. Dev chooses each run's best epoch; test is reported.
"""
import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Dict, List, Optional

REPO = Path(__file__).resolve().parents[1]
ALLENNLP = [sys.executable, "-m", "allennlp"]


def _run(command: List[str], log: Path) -> float:
    started = time.monotonic()
    with open(log, "w", encoding="utf-8") as handle:
        status = subprocess.call(command, stdout=handle, stderr=subprocess.STDOUT, cwd=REPO)
    if status != 0:
        raise SystemExit(f"failed (status {status}): {' '.join(command)}; see {log}")
    return time.monotonic() - started


def domain_text(domain: Path, out: Path) -> Dict[str, Path]:
    """One tokenized sentence a line, from plain or CoNLL files."""
    out.mkdir(parents=True, exist_ok=True)
    paths = {}
    for split in ("train", "dev", "test"):
        lines = (domain / f"{split}.txt").read_text(encoding="utf-8").splitlines()
        conll = any("\t" in line for line in lines[:50])
        sentences: List[str] = []
        if conll:
            tokens: List[str] = []
            for line in lines + [""]:
                if line.strip():
                    tokens.append(line.split("\t")[0])
                elif tokens:
                    sentences.append(" ".join(tokens))
                    tokens = []
        else:
            sentences = [line for line in lines if line.strip()]
        paths[split] = out / f"{split}.txt"
        paths[split].write_text("\n".join(sentences) + "\n", encoding="utf-8")
    return paths


def evaluate(archive: Path, data: Path, output: Path) -> float:
    if not output.exists():
        _run([*ALLENNLP, "evaluate", str(archive), str(data), "--include-package", "elmo_plugin",
              "--output-file", str(output)], output.with_suffix(".log"))
    return float(json.loads(output.read_text())["ppl"])


def adapt(general: Path, text: Dict[str, Path], run: Path, epochs: int, learning_rate: Optional[float],
          extend: Optional[int] = None) -> float:
    """The run's wall time (0 when it was already there)."""
    if (run / "bilm" / "weights.hdf5").exists():
        return 0.0
    command = [*ALLENNLP, "elmo-adapt", str(general), str(text["train"]), str(run), "--validation-data",
               str(text["dev"]), "--epochs", str(epochs), "--file-friendly-logging"]
    if learning_rate is not None:
        command += ["--learning-rate", str(learning_rate)]
    if extend is not None:
        command += ["--extend-vocabulary", str(extend)]
    if run.exists():
        command.append("--recover")
    run.parent.mkdir(parents=True, exist_ok=True)
    return _run(command, run.parent / f"{run.name}.log")


def from_scratch(general: Path, text: Dict[str, Path], run: Path, epochs: int, out: Path) -> float:
    """bilm_small's architecture and recipe on the domain text alone, with the general words."""
    if (run / "model.tar.gz").exists():
        return 0.0
    config = out / "scratch.jsonnet"
    config.write_text(
        f'(import "{REPO}/training_configs/bilm_small.jsonnet")(train_data_path="{text["train"]}", '
        f'validation_data_path="{text["dev"]}", vocabulary_file=null, num_epochs={epochs}) + '
        f'{{vocabulary: {{type: "adapted_from_source", source: "{general}", corpus: "{text["train"]}"}}}}\n',
        encoding="utf-8",
    )
    command = [*ALLENNLP, "train", str(config), "-s", str(run), "--include-package", "elmo_plugin",
               "--file-friendly-logging"] + (["--recover"] if run.exists() else [])
    return _run(command, out / f"{run.name}.log")


def out_of_vocabulary(run: Path) -> str:
    log = (run / "out.log").read_text(encoding="utf-8", errors="replace")
    for line in log.splitlines():
        if "out of the source's vocabulary" in line:
            return line.split(" - ", 3)[-1]
    return ""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--general", type=Path, required=True, help="the general elmo_bilm run (or archive)")
    parser.add_argument("--general-heldout", type=Path, required=True, help="the general domain's held-out text")
    parser.add_argument("--domain", type=Path, required=True, help="a folder with train.txt, dev.txt, test.txt")
    parser.add_argument("--out", type=Path, default=REPO / "build" / "adaptation")
    parser.add_argument("--epochs", type=int, nargs="+", default=[1, 3])
    parser.add_argument("--learning-rates", type=float, nargs="+", default=[0.0005, 0.001, 0.002])
    parser.add_argument("--scratch-epochs", type=int, default=10)
    parser.add_argument("--extend", type=int, default=2, help="--extend-vocabulary's count for one more run")
    args = parser.parse_args()

    from elmo_plugin.common.hardware import describe_run

    out = args.out.resolve()
    general = args.general.resolve()
    archive = general / "model.tar.gz" if general.is_dir() else general
    text = domain_text(args.domain, out / "text")
    rows = []
    general_test = evaluate(archive, text["test"], out / "general_test.json")
    general_heldout = evaluate(archive, args.general_heldout, out / "general_heldout.json")
    rows.append(("general, not adapted", "-", general_test, general_heldout, "-"))
    for epochs in args.epochs:
        for rate in args.learning_rates:
            run = out / f"adapted_e{epochs}_lr{rate:g}"
            seconds = adapt(general, text, run, epochs, rate)
            rows.append((
                f"adapted, {epochs} epoch(s), Adam {rate:g}", f"{seconds:.0f}" if seconds else "(kept)",
                evaluate(run / "model.tar.gz", text["test"], run / "test.json"),
                evaluate(run / "model.tar.gz", args.general_heldout, run / "general_heldout.json"), "",
            ))
    scratch = out / f"scratch_e{args.scratch_epochs}"
    seconds = from_scratch(general, text, scratch, args.scratch_epochs, out)
    rows.append((f"from scratch, {args.scratch_epochs} epochs", f"{seconds:.0f}" if seconds else "(kept)",
                 evaluate(scratch / "model.tar.gz", text["test"], scratch / "test.json"), None, ""))
    extended = out / f"extended_min{args.extend}"
    adapt(general, text, extended, max(args.epochs[:1]), None, extend=args.extend)

    print(describe_run())
    print(f"domain: {args.domain} (test {text['test']}), general: {general}")
    print("| model | wall s | domain test ppl | general held-out ppl |")
    print("|---|---|---|---|")
    for name, seconds, test, heldout, _ in rows:
        heldout_text = f"{heldout:.1f}" if isinstance(heldout, float) else "-"
        print(f"| {name} | {seconds} | {test:.1f} | {heldout_text} |")
    best = min(row[2] for row in rows if row[0].startswith("adapted"))
    scratch_ppl = rows[-1][2]
    print(f"best adapted {best:.1f}: {1 - best / general_test:.1%} below the general model, "
          f"{1 - best / scratch_ppl:.1%} below from scratch")
    print(f"--extend-vocabulary {args.extend}: {out_of_vocabulary(extended)}")
    summary = {"rows": rows, "machine": describe_run(), "date": time.strftime("%Y-%m-%d")}
    (out / "summary.json").write_text(json.dumps(summary, indent=2), encoding="utf-8")
    os.sync()


if __name__ == "__main__":
    main()
