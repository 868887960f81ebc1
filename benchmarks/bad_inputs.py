"""
Every bad input we know of, against the real command line (``allennlp elmo``, ``elmo-vocab``,
``elmo-tokenize``, ``elmo-export`` and ``train``), each in a fresh directory: prints a markdown
table (input, command, exit status, first line of the message, files left, verdict) and exits
with status 1 if any case loses data, leaves garbage output, prints a raw traceback, exits with
the wrong status or gives a message that does not say what is wrong.

    .venv/bin/python benchmarks/bad_inputs.py [--only TEXT ...] [--keep DIR] [--list]

``--only`` runs the cases whose input or command contains one of the texts (tests/benchmarks
runs a few); ``--keep`` leaves the case directories in DIR to look at. Each case starts a new
``allennlp`` process (a few seconds each; all of them take a few minutes on 2 CPU cores).

The models are the golden fixture (tests/fixtures/elmo_allennlp: options.json and
lm_weights.hdf5) for ``allennlp elmo``, the archive tests/fixtures/legacy_elmo_bilm/model.tar.gz
for ``elmo-export``, and a tiny ``training_configs/bilm.jsonnet`` (16 LSTM cells, one epoch) on
parts of the sample corpus for ``train``.

What counts as a failure:

- data loss: a file that was there before the command (an input, an earlier output) is changed
  or gone, except the outputs a successful case is meant to replace;
- garbage output: a bad input leaves a new file (or a temporary ``*.tmp`` file), or a successful
  case misses its output;
- raw traceback: ``Traceback (most recent call last)`` in the output of a plugin command. For
  ``allennlp train`` the plugin reports a `ConfigurationError` on one line (issue 37); other
  errors keep AllenNLP's traceback, for which the verdict requires that the plugin's message is
  the error line, and the table says "AllenNLP traceback";
- wrong exit status: not 1 or 2 for an error, not 130 (SIGINT) or 143 (SIGTERM) for an
  interruption, not 0 for a case that must succeed;
- unclear message: the message lacks the words that say what is wrong (each case names them).

``allennlp train`` with the plugin checks the config's data before it creates its serialization
directory, and removes the directory a run made when an error found as training starts ends it
before any checkpoint (elmo_plugin/commands/train_command.py); what is left is still listed
(``allowed_left``).
"""
import argparse
import glob
import hashlib
import json
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Dict, List, Optional, Sequence

REPO = Path(__file__).resolve().parents[1]
FIXTURE = REPO / "tests" / "fixtures" / "elmo_allennlp"
FIXTURE_OPTIONS = FIXTURE / "options.json"
FIXTURE_WEIGHTS = FIXTURE / "lm_weights.hdf5"
LEGACY_ARCHIVE = REPO / "tests" / "fixtures" / "legacy_elmo_bilm" / "model.tar.gz"
SAMPLE = REPO / "elmo_plugin" / "sample_corpus"
MODEL_ARGS = ["--options-file", str(FIXTURE_OPTIONS), "--weight-file", str(FIXTURE_WEIGHTS)]

TRACEBACK = "Traceback (most recent call last)"
SENTENCES = ["the cat sat on the mat .", "the dog ran .", "a bird sang in the old garden ."]
KOREAN = ["아버지가 방에 들어가신다 .", "영화 정말 재밌어요 ."]

# The last line of an error that AllenNLP's `train` prints with a traceback.
_TRAIN_ERROR = re.compile(r"^(?:\S+\.)?(?:ConfigurationError|RuntimeError): (?:RUNTIME ERROR: )?")


@dataclass
class Result:
    status: int
    stdout: str
    stderr: str
    seconds: float


@dataclass
class Case:
    """
    One bad input. ``setup`` writes the case's files into its directory; ``args`` are the
    command's arguments, relative to that directory. ``expect``: "error", "ok" or "interrupt"
    (``signal`` is sent once a file matching ``signal_when`` exists). ``words``: what the
    message must contain. ``outputs``: files a successful case writes; ``replaced``: existing
    files it may replace. ``check``: anything else to verify (returns a problem or None).
    """

    input: str
    command: str
    args: List[str]
    setup: Callable[[Path], None]
    expect: str = "error"
    words: Sequence[str] = ()
    outputs: Sequence[str] = ()
    replaced: Sequence[str] = ()
    signal: Optional[int] = None
    signal_when: str = ".*.tmp"
    check: Optional[Callable[[Path, Result], Optional[str]]] = None
    # For `allennlp train`: the serialization directory it may leave (see the module docstring).
    allowed_left: Sequence[str] = ()


# -- files -------------------------------------------------------------------------------------


def write(path: Path, lines: Sequence[str]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")


def sentences_file(name: str = "in.txt", lines: Sequence[str] = SENTENCES):
    return lambda directory: write(directory / name, lines)


def raw_bytes(name: str, content: bytes):
    def setup(directory: Path) -> None:
        (directory / name).write_bytes(content)

    return setup


def combine(*setups: Callable[[Path], None]) -> Callable[[Path], None]:
    def setup(directory: Path) -> None:
        for each in setups:
            each(directory)

    return setup


def symlink(name: str, target: str):
    return lambda directory: (directory / name).symlink_to(directory / target)


def hard_link(name: str, target: str, subdirectory: str = ""):
    def setup(directory: Path) -> None:
        (directory / subdirectory).mkdir(parents=True, exist_ok=True)
        os.link(directory / target, directory / subdirectory / name)

    return setup


def big_input(directory: Path) -> None:
    # Long enough that embedding runs for seconds, so that a signal arrives in the middle.
    generator = random.Random(0)
    words = "the a cat dog sat on mat ran river bank house old new".split()
    write(
        directory / "in.txt",
        [" ".join(generator.choice(words) for _ in range(20)) for _ in range(20000)],
    )


def copy(source: Path, name: str):
    return lambda directory: shutil.copyfile(source, directory / name)


def truncated(source: Path, name: str, size: int):
    return lambda directory: (directory / name).write_bytes(source.read_bytes()[:size])


def export_with_softmax(directory: Path) -> None:
    run(["elmo-export", str(LEGACY_ARCHIVE), "export", "--include-softmax"], directory)


def sample_part(directory: Path, train_lines: int = 200, heldout_lines: int = 20) -> None:
    for name, count in (("train.txt", train_lines), ("heldout.txt", heldout_lines)):
        lines = (SAMPLE / name).read_text(encoding="utf-8").splitlines()[:count]
        write(directory / "data" / name, lines)


def shuffled_vocabulary(directory: Path) -> None:
    tokens = (SAMPLE / "vocabulary.txt").read_text(encoding="utf-8").split()
    rest = tokens[3:]
    random.Random(0).shuffle(rest)
    write(directory / "shuffled_vocabulary.txt", tokens[:3] + rest)


def train_config(**arguments) -> Callable[[Path], None]:
    """A config of the user's own: the tiny `bilm.jsonnet` on ``data/`` (see `sample_part`)."""

    def setup(directory: Path) -> None:
        values = {
            "train_data_path": str(directory / "data" / "train.txt"),
            "validation_data_path": str(directory / "data" / "heldout.txt"),
            "lstm_dim": 16,
            "projection_dim": 8,
            "batch_size": 16,
            "num_samples": 16,
            "num_epochs": 1,
            **arguments,
        }
        # "./x" arguments are paths in the case's directory.
        call = ", ".join(
            f"{name}={json.dumps(local(directory, value))}" for name, value in values.items()
        )
        (directory / "config.jsonnet").write_text(
            f'(import "{REPO / "training_configs" / "bilm.jsonnet"}")({call})\n', encoding="utf-8"
        )

    return setup


def local(directory: Path, value):
    if isinstance(value, str) and value.startswith("./"):
        return str(directory / value[2:])
    return value


def same_tokens_counted_twice(directory: Path, result: Result) -> Optional[str]:
    # The second run must count what the first counted: the vocabulary is not corpus.
    counted = re.findall(r"tokens counted:\s+(\d+)", result.stdout)
    if counted != ["22"]:
        return f"tokens counted {counted}, expected 22 (as the first run)"
    return None


def no_stale_softmax(directory: Path, result: Result) -> Optional[str]:
    left = sorted(os.listdir(directory / "export"))
    if left != ["options.json", "vocabulary.txt", "weights.hdf5"]:
        return f"export holds {left}"
    return None


# -- the cases ---------------------------------------------------------------------------------


def cases() -> List[Case]:
    train = ["config.jsonnet", "-s", "run"]
    train_left = ("run",)
    return [
        # allennlp elmo
        Case("missing input file", "elmo", ["in.txt", "out.hdf5", "--top", *MODEL_ARGS],
             lambda d: None, words=["input file not found"]),
        Case("blank lines", "elmo", ["in.txt", "out.hdf5", "--top", *MODEL_ARGS],
             sentences_file(lines=["the cat", "", "a dog", " "]), words=["blank", "2, 4"]),
        Case("empty file", "elmo", ["in.txt", "out.hdf5", "--top", *MODEL_ARGS],
             raw_bytes("in.txt", b""), words=["no sentences"]),
        Case("invalid UTF-8", "elmo", ["in.txt", "out.hdf5", "--top", *MODEL_ARGS],
             raw_bytes("in.txt", b"the cat\ncaf\xe9 au lait\n"), words=["in.txt:2", "UTF-8"]),
        Case("UTF-16 without BOM", "elmo", ["in.txt", "out.hdf5", "--top", *MODEL_ARGS],
             raw_bytes("in.txt", "the cat sat\n".encode("utf-16-le")),
             words=["in.txt:1", "NUL byte", "UTF-16"]),
        Case("UTF-16 with BOM", "elmo", ["in.txt", "out.hdf5", "--top", *MODEL_ARGS],
             raw_bytes("in.txt", "the cat sat\n".encode("utf-16")),
             words=["in.txt:1", "UTF-16 byte order mark"]),
        Case("NUL byte in UTF-8", "elmo", ["in.txt", "out.hdf5", "--top", *MODEL_ARGS],
             raw_bytes("in.txt", b"the cat\nthe d\x00g\n"), words=["in.txt:2", "NUL byte"]),
        Case("overlong tokens (cut to 50 bytes)", "elmo",
             ["in.txt", "out.hdf5", "--top", *MODEL_ARGS],
             sentences_file(lines=["the " + "x" * 300 + " cat", "한" * 100]), expect="ok",
             outputs=["out.hdf5"]),
        Case("missing weight file", "elmo",
             ["in.txt", "out.hdf5", "--top", "--options-file", str(FIXTURE_OPTIONS),
              "--weight-file", "nothing.hdf5"],
             sentences_file(), words=["nothing.hdf5"]),
        Case("truncated weight file", "elmo",
             ["in.txt", "out.hdf5", "--top", "--options-file", str(FIXTURE_OPTIONS),
              "--weight-file", "weights.hdf5"],
             combine(sentences_file(), truncated(FIXTURE_WEIGHTS, "weights.hdf5", 100_000)),
             words=["weights.hdf5"]),
        Case("weight file of another model", "elmo",
             ["in.txt", "out.hdf5", "--top", "--options-file", str(FIXTURE_OPTIONS),
              "--weight-file", "export/weights.hdf5"],
             combine(sentences_file(), export_with_softmax), words=["weights.hdf5", "shape"]),
        Case("options file as weight file", "elmo",
             ["in.txt", "out.hdf5", "--top", "--options-file", str(FIXTURE_OPTIONS),
              "--weight-file", "options.json"],
             combine(sentences_file(), copy(FIXTURE_OPTIONS, "options.json")),
             words=["options.json"]),
        Case("output = input", "elmo", ["in.txt", "in.txt", "--top", *MODEL_ARGS],
             sentences_file(), words=["would replace the input"]),
        Case("output = symlink to input", "elmo", ["in.txt", "link.txt", "--top", *MODEL_ARGS],
             combine(sentences_file(), symlink("link.txt", "in.txt")),
             words=["would replace the input"]),
        Case("output = hard link of input", "elmo", ["in.txt", "hard.txt", "--top", *MODEL_ARGS],
             combine(sentences_file(), hard_link("hard.txt", "in.txt")),
             words=["would replace the input"]),
        Case("output directory missing", "elmo",
             ["in.txt", "no/out.hdf5", "--top", *MODEL_ARGS], sentences_file(),
             words=["does not exist"]),
        Case("SIGTERM while embedding", "elmo", ["in.txt", "out.hdf5", "--top", *MODEL_ARGS],
             big_input, expect="interrupt", signal=signal.SIGTERM, words=["interrupted"]),
        Case("SIGINT (Ctrl-C) while embedding", "elmo",
             ["in.txt", "out.hdf5", "--top", *MODEL_ARGS],
             big_input, expect="interrupt", signal=signal.SIGINT, words=["interrupted"]),
        # allennlp elmo-vocab
        Case("output = input", "elmo-vocab", ["corpus.txt", "corpus.txt", "--no-progress"],
             sentences_file("corpus.txt"), words=["would replace the corpus file"]),
        Case("output = hard link of input", "elmo-vocab",
             ["corpus.txt", "hard.txt", "--no-progress"],
             combine(sentences_file("corpus.txt"), hard_link("hard.txt", "corpus.txt")),
             words=["would replace the corpus file"]),
        Case("corpus glob matches the earlier output", "elmo-vocab",
             ["corpus/*.txt", "corpus/vocab.txt", "--no-progress"],
             combine(
                 sentences_file("corpus/a.txt", SENTENCES[:2]),
                 sentences_file("corpus/b.txt", SENTENCES[:2]),
                 lambda d: run(["elmo-vocab", "corpus/*.txt", "corpus/vocab.txt",
                                "--no-progress"], d),
             ),
             expect="ok", outputs=["corpus/vocab.txt"], replaced=["corpus/vocab.txt"],
             words=["left out"], check=same_tokens_counted_twice),
        Case("glob matching nothing", "elmo-vocab", ["corpus/*.txt", "vocab.txt"],
             lambda d: None, words=["no files match"]),
        Case("only blank lines", "elmo-vocab", ["corpus.txt", "vocab.txt", "--no-progress"],
             sentences_file("corpus.txt", ["", "  ", ""]), words=["no tokens"]),
        Case("blank lines among sentences (skipped)", "elmo-vocab",
             ["corpus.txt", "vocab.txt", "--no-progress"],
             sentences_file("corpus.txt", ["the cat", "", "a dog"]), expect="ok",
             outputs=["vocab.txt"], words=["1 blank lines skipped"]),
        Case("UTF-16 without BOM", "elmo-vocab", ["corpus.txt", "vocab.txt", "--no-progress"],
             raw_bytes("corpus.txt", "the cat sat\n".encode("utf-16-le")),
             words=["corpus.txt:1", "NUL byte", "UTF-16"]),
        Case("invalid UTF-8", "elmo-vocab", ["corpus.txt", "vocab.txt", "--no-progress"],
             raw_bytes("corpus.txt", b"ok\nbad \xff\n"), words=["corpus.txt:2", "UTF-8"]),
        # allennlp elmo-tokenize
        Case("output directory = input directory", "elmo-tokenize",
             ["raw/*.txt", "raw", "--workers", "1", "--no-progress"],
             sentences_file("raw/a.txt", KOREAN), words=["would overwrite an input"]),
        Case("output = hard link of input", "elmo-tokenize",
             ["raw/*.txt", "out", "--workers", "1", "--no-progress"],
             combine(sentences_file("raw/a.txt", KOREAN), hard_link("a.txt", "raw/a.txt", "out")),
             words=["would overwrite an input"]),
        Case("glob matching nothing", "elmo-tokenize",
             ["raw/*.txt", "out", "--workers", "1", "--no-progress"], lambda d: None,
             words=["no files match"]),
        Case("UTF-16 without BOM", "elmo-tokenize",
             ["raw/*.txt", "out", "--workers", "1", "--no-progress"],
             combine(lambda d: (d / "raw").mkdir(),
                     raw_bytes("raw/a.txt", "영화 좋아요\n".encode("utf-16-le"))),
             words=["a.txt:1", "NUL byte"]),
        # allennlp elmo-export
        Case("output is an existing file", "elmo-export", [str(LEGACY_ARCHIVE), "notes.txt"],
             sentences_file("notes.txt", ["keep me"]), words=["exists and is not a directory"]),
        Case("output directory holds other files", "elmo-export", [str(LEGACY_ARCHIVE), "mine"],
             sentences_file("mine/notes.txt", ["keep me"]), words=["holds other files"]),
        Case("truncated model.tar.gz", "elmo-export", ["model.tar.gz", "export"],
             truncated(LEGACY_ARCHIVE, "model.tar.gz", 20_000),
             words=["model.tar.gz", "damaged or incomplete"]),
        Case("missing model", "elmo-export", ["model.tar.gz", "export"], lambda d: None,
             words=["no model archive"]),
        Case("re-export without --include-softmax", "elmo-export",
             [str(LEGACY_ARCHIVE), "export"], export_with_softmax, expect="ok",
             outputs=["export/weights.hdf5"],
             replaced=[f"export/{name}" for name in
                       ("options.json", "weights.hdf5", "vocabulary.txt", "softmax.hdf5")],
             check=no_stale_softmax),
        # allennlp train
        Case("num_epochs=0 (config argument)", "train", train,
             combine(sample_part, train_config(num_epochs=0)),
             words=["num_epochs must be an integer >= 1, got 0"]),
        Case("num_epochs=0 (-o override)", "train",
             train + ["-o", '{"trainer.num_epochs": 0}'],
             combine(sample_part, train_config()),
             words=["trainer.num_epochs must be an integer >= 1, got 0"],
             allowed_left=train_left),
        Case("empty corpus", "train", train,
             combine(sample_part, raw_bytes("data/train.txt", b"\n\n"), train_config()),
             words=["no sentences"], allowed_left=train_left),
        Case("glob matching nothing", "train", train,
             combine(sample_part, train_config(train_data_path="./data/none/*.txt")),
             words=["no files match"], allowed_left=train_left),
        Case("UTF-16 corpus", "train", train,
             combine(sample_part, raw_bytes("data/train.txt", "the cat\n".encode("utf-16-le")),
                     train_config()),
             words=["train.txt:1", "NUL byte"], allowed_left=train_left),
        Case("vocabulary not sorted by frequency", "train", train,
             combine(lambda d: sample_part(d, train_lines=1000), shuffled_vocabulary,
                     train_config(vocabulary_file="./shuffled_vocabulary.txt")),
             words=["not sorted by descending frequency", "shuffled_vocabulary.txt:"],
             allowed_left=train_left),
    ]


# -- running -------------------------------------------------------------------------------------


def environment() -> Dict[str, str]:
    env = {key: value for key, value in os.environ.items() if not key.startswith("ELMO_")}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
    env["PYTHONWARNINGS"] = "ignore"
    return env


def run(arguments: List[str], directory: Path, case: Optional[Case] = None) -> Result:
    """``allennlp ARGUMENTS`` in ``directory`` (whose .allennlp_plugins loads the plugin)."""
    plugins = directory / ".allennlp_plugins"
    if not plugins.exists():
        plugins.write_text("elmo_plugin\n")
    command = [sys.executable, "-m", "allennlp", *arguments]
    start = time.monotonic()
    process = subprocess.Popen(
        command, cwd=directory, env=environment(), stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True,
    )
    try:
        if case is not None and case.signal is not None:
            deadline = time.monotonic() + 300
            while not glob.glob(str(directory / case.signal_when)) and process.poll() is None:
                if time.monotonic() > deadline:
                    break
                time.sleep(0.05)
            if process.poll() is None:
                process.send_signal(case.signal)
        stdout, stderr = process.communicate(timeout=900)
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()
    return Result(process.returncode, stdout, stderr, time.monotonic() - start)


def snapshot(directory: Path) -> Dict[str, str]:
    """Every file under ``directory`` (relative path -> SHA-256 of its content)."""
    files = {}
    for root, _, names in os.walk(directory):
        for name in names:
            path = Path(root) / name
            relative = str(path.relative_to(directory))
            if relative != ".allennlp_plugins":
                files[relative] = hashlib.sha256(path.read_bytes()).hexdigest()
    return files


def message_line(case: Case, result: Result) -> str:
    """The first line of the command's own message (its error line, or its first output line)."""
    lines = result.stderr.splitlines()
    prefix = f"allennlp {case.command}: error: "
    for line in lines:
        if prefix in line:
            return line[line.index(prefix):]
    if case.command == "train":
        errors = [line for line in lines if _TRAIN_ERROR.match(line)]
        if errors:
            return errors[-1]
    output = [line for line in result.stdout.splitlines() if line.strip()]
    if output:
        return output[0]
    return lines[-1] if lines else ""


def judge(case: Case, directory: Path, before: Dict[str, str], result: Result) -> Dict[str, str]:
    after = snapshot(directory)
    message = message_line(case, result)
    everything = result.stdout + result.stderr
    problems: List[str] = []
    notes: List[str] = []

    replaced = set(case.replaced)
    lost = [name for name, digest in before.items()
            if name not in replaced and after.get(name) != digest]
    if lost:
        problems.append(f"DATA LOSS ({', '.join(sorted(lost))})")

    new = sorted(name for name in after if name not in before)
    changed = sorted(name for name in after if name in before and after[name] != before[name])
    left = [name for name in new + changed if name not in lost]
    temporaries = [name for name in left if name.endswith(".tmp")]
    in_allowed = [name for name in left
                  if any(name == d or name.startswith(d + "/") for d in case.allowed_left)]
    garbage = temporaries + (
        [name for name in left if name not in in_allowed and name not in case.outputs]
        if case.expect != "ok"
        else [name for name in left if name not in case.outputs and name not in replaced]
    )
    if case.expect == "ok":
        garbage += [f"missing {name}" for name in case.outputs if name not in after]
    if garbage:
        problems.append(f"GARBAGE OUTPUT ({', '.join(sorted(set(garbage)))})")

    if TRACEBACK in result.stderr:
        if case.command == "train" and _TRAIN_ERROR.match(message):
            notes.append("AllenNLP traceback")
        else:
            problems.append("RAW TRACEBACK")

    expected_status = {"error": (1, 2), "ok": (0,), "interrupt": (130, 143)}[case.expect]
    if case.signal is not None:
        expected_status = (128 + case.signal,)
    if result.status not in expected_status:
        problems.append(f"WRONG EXIT (expected {'/'.join(map(str, expected_status))})")

    missing_words = [word for word in case.words if word not in everything]
    if missing_words or (case.expect != "ok" and not message):
        problems.append(f"UNCLEAR MESSAGE (lacks {', '.join(map(repr, missing_words))})")

    if case.check is not None:
        problem = case.check(directory, result)
        if problem:
            problems.append(problem)

    shown_left = sorted({name.split("/")[0] + ("/" if "/" in name else "") for name in left})
    return {
        "message": message.replace(str(directory) + "/", "").replace(str(directory), "."),
        "left": ", ".join(shown_left) or "none",
        "verdict": "; ".join(problems) if problems else "ok" + (
            f" ({', '.join(notes)})" if notes else ""),
        "failed": "yes" if problems else "",
    }


def shown_command(case: Case) -> str:
    arguments = []
    for argument in case.args:
        if argument in MODEL_ARGS[1::2]:
            argument = Path(argument).name
        elif argument == str(LEGACY_ARCHIVE):
            argument = "legacy/model.tar.gz"
        elif argument == str(FIXTURE_OPTIONS):
            argument = "options.json"
        arguments.append(argument)
    return " ".join([case.command, *arguments])


def markdown(rows: List[Dict[str, str]]) -> str:
    def cell(text: str, limit: int = 160) -> str:
        text = text if len(text) <= limit else text[: limit - 3] + "..."
        return text.replace("|", "\\|")

    lines = [
        "| # | input | command | exit | first line of the message | files left | verdict |",
        "|---:|---|---|---:|---|---|---|",
    ]
    for index, row in enumerate(rows, 1):
        lines.append(
            f"| {index} | {cell(row['input'])} | `{cell(row['command'], 90)}` | {row['status']} "
            f"| {cell(row['message'])} | {cell(row['left'], 60)} | {row['verdict']} |"
        )
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", nargs="+", default=None, metavar="TEXT",
                        help="run the cases whose input or command contains one of these")
    parser.add_argument("--keep", default=None, metavar="DIR",
                        help="leave the case directories in DIR")
    parser.add_argument("--list", action="store_true", help="list the cases and exit")
    args = parser.parse_args()

    selected = [
        case for case in cases()
        if args.only is None
        or any(text in f"{case.command}: {case.input}" for text in args.only)
    ]
    if args.list:
        for case in selected:
            print(f"{case.command}: {case.input}")
        return 0
    root = Path(args.keep or tempfile.mkdtemp(prefix="bad_inputs_")).resolve()
    root.mkdir(parents=True, exist_ok=True)
    rows = []
    try:
        for index, case in enumerate(selected, 1):
            directory = root / f"{index:02d}"
            if directory.exists():
                shutil.rmtree(directory)
            directory.mkdir()
            (directory / ".allennlp_plugins").write_text("elmo_plugin\n")
            case.setup(directory)
            before = snapshot(directory)
            result = run([case.command, *case.args], directory, case)
            row = {"input": case.input, "command": shown_command(case), "status": str(result.status),
                   **judge(case, directory, before, result)}
            rows.append(row)
            print(f"[{index}/{len(selected)}] {case.command}: {case.input}: exit {result.status}, "
                  f"{result.seconds:.1f} s, {row['verdict']}", file=sys.stderr, flush=True)
    finally:
        if args.keep is None:
            shutil.rmtree(root, ignore_errors=True)
    print(markdown(rows))
    failed = [row for row in rows if row["failed"]]
    print(f"\n{len(rows)} cases, {len(failed)} failed.")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
