"""
Every shell block of README.md and of the documentation pages, run as typed, each in a checkout of
its own (`shell_sandbox.py`), then its products checked: an ``allennlp elmo`` output holds one
entry per input line, an ``allennlp train`` run its ``model.tar.gz``, an ``elmo-export`` its
files, an ``elmo-vocab`` vocabulary bilm-tf's first three lines, an ``elmo-score`` one JSON line per
input line. `test_code_blocks.py` parses the
same blocks' commands against the code (every flag, every make target) in the default run; this
runs them (slow: ``make test-all`` and CI).

What a test cannot do as typed has an explicit stand-in, listed here with its reason:

- `NOT_RUN`: blocks run elsewhere (the own-environment set-up, other Pythons), or that need what a
  test machine lacks (a GPU's CUDA packages, two machines, hours of benchmarks);
- `REWRITES`: words replaced before the block runs: a GPU command's by their CPU equivalents
  (no GPU in tests), a benchmark's ``python`` by `parse_arguments_only` (its arguments parsed by
  the script's own parser, no measuring);
- `MAKE_DRY_RUN`: make targets checked with ``make -n`` instead of run (the test run itself, or
  hours of training); every other target runs, on the sandbox's samples of the shared data, and
  never remakes the environment (``make -o`` its stamp: the one running the tests);
- ``curl``: no internet in tests; the download is a model the tests build;
- the published models are served from 127.0.0.1 (the golden fixture under each name), as in
  `test_code_blocks.py`'s python blocks.

A block whose commands read ``../shared/data`` (through the Makefile or a config's defaults) runs
on samples of it, and is skipped, naming the path, where the shared data is absent.
"""
import os
import subprocess
import sys
from pathlib import Path
from typing import Dict, List, Tuple

import h5py
import pytest

from elmo_plugin.model_files.catalogue import MODELS_URL_VARIABLE, PUBLISHED_MODELS
from tests.documentation.code_blocks import CodeBlock, all_code_blocks, shell_commands
from tests.documentation.shell_sandbox import Sandboxes
from tests.documentation.test_code_blocks import allennlp_arguments
from tests.helpers import FIXTURES, REPO_ROOT, SHARED_DATA
from tests.model_server import ModelServer

SHELL_BLOCKS = [block for block in all_code_blocks() if block.language in ("bash", "sh")]

# Blocks not run here, each found by a fragment of its text: why, and what runs it instead.
NOT_RUN: Dict[str, str] = {
    "make venv PYTHON=python3.12":
        "makes a Python 3.12 or 3.13 environment (minutes, GBs): tests/test_python_versions.py "
        "runs that command in a clean copy",
    "~/elmo-env/bin/pip install --no-deps -r requirements/constraints.txt":
        "the own-environment set-up: tests/test_first_hour.py runs it in a fresh HOME",
    "requirements/torch-cuda.txt":
        "installs PyPI's CUDA build of torch (several GB) into ~/elmo-env: no GPU in tests",
    "make TORCH=cuda":
        "installs PyPI's CUDA build of torch and asks torch.cuda.is_available(): no GPU in tests",
    "tf-hub-format=compressed":
        "downloads google/elmo/3 (hundreds of MB) from TF-Hub: no internet in tests; the block "
        "before it converts the small module of tests/fixtures/tf_hub_elmo the same way, and runs",
    "ray start --head":
        "a Ray cluster of several machines (and Kubernetes): tests/embedding_output/"
        "test_ray_engine.py runs --ray local, and the block before this one runs as typed",
    "allennlp elmo-adapt original":
        "downloads the Original model's published softmax (1.6 GB): no internet in tests; "
        "docs/adapting.md's first block adapts a local model and runs here, and "
        "tests/training/test_continue_pretraining.py reads a served published softmax",
    "MASTER_ADDR=node0.example.org":
        "two machines with four GPUs each: docs/pretraining.md's rehearsal block (the same "
        "commands, two nodes on one machine, CPU) runs here",
}

# Words of a block replaced before it runs: what they become, and why.
REWRITES: Dict[str, Tuple[str, str]] = {
    '"trainer.cuda_device": 0': ('"trainer.cuda_device": -1', "no GPU in tests: the CPU"),
    "--cuda-device 0": ("--cuda-device -1", "no GPU in tests: the CPU"),
    "--nproc-per-node 8": ("--nproc-per-node 2", "8 processes for 8 GPUs; the test machine has 2 cores"),
    ".venv/bin/python benchmarks/": (
        ".venv/bin/python -m tests.documentation.parse_arguments_only benchmarks/",
        "a benchmark measures for minutes to hours, alone on an idle machine (BENCHMARKS.md): "
        "its command line is parsed by the script's own parser, then it stops",
    ),
}

# make targets checked with `make -n`, not run, and why.
MAKE_DRY_RUN: Dict[str, str] = {
    "test": "the test run this test is part of",
    "test-all": "the test run this test is part of (what CI runs)",
    "docs": "CI runs it after the tests",
    "tasks-en": "trains eight task models on the whole data (hours); "
                "tests/training_configs/test_task_configs.py trains every config on samples",
}

# Fragments of a block that mean it reads ../shared/data (the Makefile's targets and the task
# configs' default data).
READS_SHARED_DATA = ("make pretrain-", "../shared/data", "training_configs/tasks/")

STAMP = ".venv/.elmo_plugin-installed"


def _stand_ins(downloads: Path) -> str:
    """The shell functions put before every block."""
    dry = "|".join(MAKE_DRY_RUN)
    return f"""set -eo pipefail
make() {{
  local word
  for word in "$@"; do
    case "$word" in
      {dry}) command make -n "$@" > /dev/null; echo "stand-in: make -n $*" >&2; return;;
    esac
  done
  command make -o {STAMP} "$@"
}}
curl() {{
  local url="${{@: -1}}"
  cp "{downloads}/$(basename "$url")" .
  echo "stand-in: curl $* (a model the tests build)" >&2
}}
"""


def _not_run_reason(block: CodeBlock) -> str:
    reasons = [reason for fragment, reason in NOT_RUN.items() if fragment in block.text]
    return reasons[0] if reasons else ""


def _rewritten(text: str) -> str:
    for words, (replacement, _) in REWRITES.items():
        text = text.replace(words, replacement)
    return text


def test_every_stand_in_names_a_block_that_is_there():
    # A rule whose block was edited away would go on excusing nothing, silently.
    for fragment in [*NOT_RUN, *REWRITES]:
        matching = [block.where for block in SHELL_BLOCKS if fragment in block.text]
        assert matching, f"no shell block has {fragment!r}: remove or update the rule"
    made = {word for block in SHELL_BLOCKS for command in shell_commands(block.text)
            if command[0] == "make" for word in command[1:]}
    assert set(MAKE_DRY_RUN) <= made, f"no block makes {set(MAKE_DRY_RUN) - made}"
    for fragment in NOT_RUN:
        matching = [block.where for block in SHELL_BLOCKS if fragment in block.text]
        assert len(matching) <= 2, f"{fragment!r} excuses {matching}: too wide a fragment"


@pytest.fixture(scope="module")
def sandboxes(tmp_path_factory):
    root = tmp_path_factory.mktemp("shell_blocks")
    with ModelServer() as server:
        for model in PUBLISHED_MODELS.values():
            server.serve_published(model, FIXTURES)
        yield Sandboxes(root, with_shared_data=SHARED_DATA.is_dir()), server.url


# --- what the commands made -----------------------------------------------------------------


def _check_products(command: List[str], repo: Path, where: str) -> None:
    """What one ``allennlp`` command of a block should have left in the sandbox (its paths as
    AllenNLP's parser reads them from the line)."""
    launched = command
    if os.path.basename(command[0]) == "torchrun":
        launched = command[next(i for i, word in enumerate(command) if "allennlp" in word):]
    # `allennlp`, `.venv/bin/allennlp`, or what torchrun launches: "$(command -v allennlp)"
    if not launched[0].rstrip(")").endswith("allennlp") or len(launched) < 2:
        return
    subcommand, arguments = launched[1], allennlp_arguments(launched[1:])
    if subcommand == "elmo":
        from elmo_plugin import EmbeddingsFile
        from elmo_plugin.embedding_output import ParquetEmbeddings

        source, output = repo / arguments.input_file, repo / arguments.output_file
        lines = [line for line in source.read_text(encoding="utf-8").splitlines() if line.strip()]
        reader = ParquetEmbeddings if output.is_dir() else EmbeddingsFile  # --ray: Parquet
        with reader(output) as embeddings:
            entries = len(embeddings)
            assert entries == len(lines), f"{where}: {output.name}: {entries} entries for {len(lines)} lines"
            if not embeddings.sentence_vectors:  # else one vector (per layer) a line
                assert embeddings[0].shape[-2] == len(lines[0].split())
    elif subcommand == "train" and "--node-rank" not in launched:
        # (Of a run on several nodes only node 0 writes the archive; the line's $R is not known.)
        run = repo / arguments.serialization_dir
        assert (run / "model.tar.gz").is_file(), f"{where}: {run} has no model.tar.gz"
    elif subcommand == "elmo-export":
        output = repo / arguments.output_directory
        if arguments.format == "onnx":
            assert list(output.glob("*.onnx")), f"{where}: no .onnx in {output}"
        else:
            assert (output / "options.json").is_file() and (output / "weights.hdf5").is_file(), where
            with h5py.File(output / "weights.hdf5", "r") as weights:
                assert "char_embed" in weights, where
    elif subcommand == "elmo-score" and arguments.output:
        import json

        lines = (repo / arguments.input_file).read_text(encoding="utf-8").splitlines()
        scores = (repo / arguments.output).read_text(encoding="utf-8").splitlines()
        assert len(scores) == len(lines), f"{where}: {len(scores)} scores for {len(lines)} lines"
        assert json.loads(scores[0])["tokens"] == len(lines[0].split()), where
    elif subcommand == "elmo-adapt":
        exported = repo / arguments.output_directory / "bilm"
        for name in ("options.json", "weights.hdf5", "vocabulary.txt", "softmax.hdf5"):
            assert (exported / name).is_file(), f"{where}: {exported} has no {name}"
    elif subcommand == "elmo-task-text":
        for name in ("train.txt", "validation.txt"):
            text = (repo / arguments.output_directory / name).read_text(encoding="utf-8")
            assert text.strip() and "\t" not in text, f"{where}: {arguments.output_directory}/{name}"
    elif subcommand == "elmo-vocab":
        vocabulary = (repo / arguments.output_file).read_text(encoding="utf-8").splitlines()
        assert vocabulary[:3] == ["<S>", "</S>", "<UNK>"] and len(vocabulary) > 3, where
    elif subcommand == "elmo-tokenize":
        assert any((repo / arguments.output_dir).rglob("*.txt")), f"{where}: {arguments.output_dir} is empty"


# --- the blocks -----------------------------------------------------------------------------


def test_the_stand_ins_can_fail(tmp_path):
    def run(script: str) -> subprocess.CompletedProcess:
        return subprocess.run(["bash", "-c", _stand_ins(tmp_path) + script], cwd=REPO_ROOT,
                              capture_output=True, text=True, timeout=300)

    # A benchmark's arguments are its parser's: a wrong one fails as the script would.
    parsed = run(_rewritten(".venv/bin/python benchmarks/bad_inputs.py --no-such-option 1"))
    assert parsed.returncode == 2 and "unrecognized arguments: --no-such-option" in parsed.stderr
    # make's dry run still needs the target; `make test` is not run (no pytest inside pytest).
    assert run("make tset").returncode != 0
    dry = run("make test")
    assert dry.returncode == 0 and "stand-in: make -n test" in dry.stderr and dry.stdout == ""
    # The download stand-in has only the files the tests build.
    assert run("curl -LO http://vectors.nlpl.eu/repository/11/999.zip").returncode != 0


def test_the_products_check_can_fail(tmp_path):
    from elmo_plugin.elmo_embedder import ElmoEmbedder

    (tmp_path / "one.txt").write_text("the dog runs .\n", encoding="utf-8")
    (tmp_path / "two.txt").write_text("the dog runs .\na cat .\n", encoding="utf-8")
    ElmoEmbedder(model=str(FIXTURES)).embed_file(
        str(tmp_path / "one.txt"), str(tmp_path / "out.hdf5"), output_format="all"
    )
    _check_products(["allennlp", "elmo", "one.txt", "out.hdf5", "--all"], tmp_path, "here")
    with pytest.raises(AssertionError, match="1 entries for 2 lines"):
        _check_products(["allennlp", "elmo", "two.txt", "out.hdf5", "--all"], tmp_path, "here")
    with pytest.raises(AssertionError, match="no model.tar.gz"):
        _check_products(["allennlp", "train", "c.jsonnet", "-s", "run"], tmp_path, "here")


@pytest.mark.slow
@pytest.mark.parametrize("block", SHELL_BLOCKS, ids=lambda block: block.where)
def test_shell_block_runs_as_typed(block, sandboxes):
    reason = _not_run_reason(block)
    if reason:
        pytest.skip(f"not run here: {reason}")
    first = next(earlier for earlier in SHELL_BLOCKS if earlier.text == block.text)
    if first is not block:
        pytest.skip(f"the same block as {first.where}, which runs")
    if any(fragment in block.text for fragment in READS_SHARED_DATA) and not SHARED_DATA.is_dir():
        pytest.skip(f"needs {SHARED_DATA}: the shared data, which is not in the repository")
    makers, models_url = sandboxes
    repo = makers.make(block.text)
    text = _rewritten(block.text)
    (repo / "block.sh").write_text(_stand_ins(makers.downloads) + text, encoding="utf-8")
    environment = dict(
        os.environ,
        **{MODELS_URL_VARIABLE: models_url, "ALLENNLP_CACHE_ROOT": str(repo.parent / "cache")},
        PATH=f"{Path(sys.prefix) / 'bin'}{os.pathsep}{os.environ.get('PATH', '')}",
    )
    environment.pop("PYTHONPATH", None)  # the environment's editable install, as a user has it
    result = subprocess.run(["bash", "block.sh"], cwd=repo, env=environment,
                            capture_output=True, text=True, timeout=1500)
    assert result.returncode == 0, (
        f"{block.where} failed (exit {result.returncode}) in {repo}:\n"
        f"{result.stdout[-3000:]}\n{result.stderr[-6000:]}"
    )
    for command in shell_commands(text):
        _check_products(command, repo, block.where)
