"""
Every fenced code block of README.md and of the documentation pages, run or checked against the
code as it is, so that the documentation cannot drift from it:

- ``python`` blocks run, in page order, in a sandbox folder that holds what the pages assume:
  the demo's biLM (``demo_output/run/bilm``, here the golden fixture's tiny model), a training run's
  archive (``runs/en/bilm/model.tar.gz``, the 0.1 fixture's), ``sentences.txt``
  and ``embeddings.hdf5``, an ELMoForManyLangs model (``ko.model``), the repository's ``tests``
  and ``training_configs``, and the published models served by a local HTTP server (the
  fixture's files under each published name), so that ``ElmoEmbedder()`` downloads as it would.
- ``jsonnet``/``json`` blocks: programs are evaluated with the repository's configs (imports of
  ``/path/to/elmo_plugin/...`` and ``../training_configs/...`` resolve to this checkout),
  fragments are evaluated as the fields of an object (a ``...`` stands for what the page leaves
  out), and every ``"type"`` they name must be registered with AllenNLP.
- ``bash`` blocks: every ``allennlp`` command line is parsed by AllenNLP's own parser with the
  plugin's subcommands (an unknown flag or a missing argument fails), ``torchrun`` lines by
  torchrun's parser and then the command they launch, ``make`` lines by ``make -n`` (the
  target exists and expands); the whole block passes ``bash -n``. Commands of other programs
  (``source``, ``pip``, ``curl``, ...) must be in `OTHER_PROGRAMS`, so that a new kind of command
  gets a rule here instead of going unchecked. Then `test_shell_blocks_run.py` (slow) runs every
  shell block as typed, with stand-ins for what a test machine cannot do; the quick start and the
  own-environment set-up also run in a fresh shell in `tests/test_first_hour.py`.
- Blocks without a language are output or file listings, and ``mermaid`` blocks figures: not run.
"""
import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import textwrap
from contextlib import redirect_stderr, redirect_stdout
from io import StringIO
from pathlib import Path
from typing import Dict, List, Optional, Set, Tuple

import pytest

from elmo_plugin.model_files.catalogue import MODELS_URL_VARIABLE, PUBLISHED_MODELS
from tests.documentation.code_blocks import CodeBlock, all_code_blocks, shell_commands
from tests.helpers import FIXTURES, REPO_ROOT
from tests.model_server import ModelServer

BLOCKS = all_code_blocks()
LANGUAGES = {"python", "jsonnet", "json", "bash", "sh", "console", "text", "mermaid", ""}
# Programs whose command lines are only syntax-checked (bash -n), each for a stated reason.
OTHER_PROGRAMS = {
    "source": "activates the virtual environment the set-up made",
    "cd": "changes directory",
    "python3.11": "creates a virtual environment (run in full by tests/test_first_hour.py)",
    "python3.12": "the same on Python 3.12",
    "python3.13": "the same on Python 3.13",
    "pip": "installs into a user's environment (run in full by tests/test_first_hour.py)",
    "python": "a script of the repository, named by its path (checked to exist below)",
    "curl": "downloads a published model (no internet in the tests)",
    "unzip": "unpacks that download",
    "tar": "unpacks a downloaded TF-Hub module",
    "mkdir": "makes a folder",
    "echo": "writes a file",
    "printf": "writes a file",
    "export": "sets a variable",
    "head": "looks at a file",
    "ray": "starts a node of a Ray cluster (several machines: not run in the tests)",
    "kubectl": "creates a Ray cluster on Kubernetes (KubeRay: not run in the tests)",
    "h5ls": "looks at an HDF5 file",
    "grep": "looks into a file",
    "wait": "waits for the commands started in the background",
    "kill": "stops a process (the resume examples)",
    "srun": "SLURM's launcher, which calls torchrun on each node",
}


def _blocks(*languages: str) -> List[CodeBlock]:
    return [block for block in BLOCKS if block.language in languages]


def test_the_pages_have_blocks_and_every_language_has_a_rule():
    assert len(BLOCKS) > 20
    unknown = [f"{block.where}: ```{block.language}" for block in BLOCKS if block.language not in LANGUAGES]
    assert unknown == [], "a code block in a language this test has no rule for"


# --- python ---------------------------------------------------------------------------------


def _elmoformanylangs_model(directory: Path) -> None:
    from tests.model_files.test_elmoformanylangs import make_model_directory

    make_model_directory(directory, word_dim=6)


@pytest.fixture(scope="module")
def sandbox(tmp_path_factory):
    """The folder the python blocks run in, with what the pages assume is there."""
    root = tmp_path_factory.mktemp("documentation")
    for name in ("tests", "training_configs"):
        (root / name).symlink_to(REPO_ROOT / name)
    bilm = root / "demo_output" / "run" / "bilm"
    bilm.mkdir(parents=True)
    shutil.copy(FIXTURES / "options.json", bilm / "options.json")
    shutil.copy(FIXTURES / "lm_weights.hdf5", bilm / "weights.hdf5")
    # An elmo_bilm training run's archive (the one elmo_plugin 0.1 wrote, kept as a fixture).
    (root / "runs" / "en" / "bilm").mkdir(parents=True)
    shutil.copy(
        REPO_ROOT / "tests" / "fixtures" / "legacy_elmo_bilm" / "model.tar.gz",
        root / "runs" / "en" / "bilm" / "model.tar.gz",
    )
    (root / "sentences.txt").write_text(
        "the boy hit the ball with a bat .\nI went to the bank .\n", encoding="utf-8"
    )
    _elmoformanylangs_model(root / "ko.model")
    from elmo_plugin.elmo_embedder import ElmoEmbedder

    ElmoEmbedder(model=str(bilm)).embed_file(
        str(root / "sentences.txt"), str(root / "embeddings.hdf5"), output_format="all"
    )
    with ModelServer() as server:
        for model in PUBLISHED_MODELS.values():
            server.serve_published(model, FIXTURES)
        yield root, server.url


_RUNNER = textwrap.dedent(
    """
    import json, sys, traceback
    failures = []
    for where, source in json.load(open(sys.argv[1], encoding="utf-8")):
        try:
            exec(compile(source, where, "exec"), {"__name__": "__main__"})
        except BaseException:
            failures.append(where + "\\n" + traceback.format_exc(limit=-3))
    print("\\n\\n".join(failures), file=sys.stderr)
    sys.exit(1 if failures else 0)
    """
)


def test_every_python_block_runs(sandbox):
    root, models_url = sandbox
    blocks = _blocks("python")
    assert blocks, "no python blocks found"
    (root / "blocks.json").write_text(
        json.dumps([[block.where, block.text] for block in blocks]), encoding="utf-8"
    )
    environment = dict(
        os.environ,
        **{MODELS_URL_VARIABLE: models_url, "ALLENNLP_CACHE_ROOT": str(root / "cache")},
        PYTHONPATH=str(REPO_ROOT),
        OMP_NUM_THREADS="1",
    )
    result = subprocess.run(
        [sys.executable, "-c", _RUNNER, str(root / "blocks.json")],
        cwd=root,
        env=environment,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, result.stderr[-6000:]


# --- jsonnet --------------------------------------------------------------------------------


def _registered_names() -> Set[str]:
    from allennlp.common.plugins import import_plugins
    from allennlp.common.registrable import Registrable

    import_plugins()
    return {name for registry in Registrable._registry.values() for name in registry}


# The width the configs' native function gives for a biLM the page names but the tests do not
# have (``runs/small/bilm``, the repository's ``build/ko/bilm``): reading it from a model is
# tested in tests/training_configs/test_config_of_your_own.py.
ABSENT_BILM_WIDTH = 64
ABSENT_SOURCE = REPO_ROOT / "tests" / "fixtures" / "bilm_tf_checkpoint"


def _natives():
    """The plugin's native functions for jsonnet, with a width for biLMs that are not here."""
    from elmo_plugin.model_files.catalogue import PUBLISHED_MODELS
    from elmo_plugin.training.config_functions import native_callbacks

    natives = native_callbacks()
    width_parameters, read_width = natives["elmo_output_dim"]
    source_parameters, describe_source = natives["elmo_adaptation_source"]

    def width(elmo_json: str) -> int:
        elmo = json.loads(elmo_json)
        model, options = elmo.get("model"), elmo.get("options_file")
        absent = (options is not None and not os.path.exists(options)) or (
            model is not None and model not in PUBLISHED_MODELS and not os.path.exists(model)
        )
        return (elmo.get("output_dim") or ABSENT_BILM_WIDTH) if absent else read_width(elmo_json)

    def source(source_json: str) -> dict:
        # A source the docs name but this machine lacks (a published model: no download in tests,
        # ``runs/general``) is described as the fixture bilm-tf checkpoint, whose shape is a source's.
        start_from = json.loads(source_json).get("start_from")
        if isinstance(start_from, str) and not os.path.exists(start_from):
            source_json = json.dumps({"start_from": str(ABSENT_SOURCE)})
        return describe_source(source_json)

    return {"elmo_output_dim": (width_parameters, width), "elmo_adaptation_source": (source_parameters, source)}


def _evaluate_jsonnet(block: CodeBlock) -> Dict:
    import _jsonnet

    text = block.text.replace("/path/to/elmo_plugin/", str(REPO_ROOT) + "/")
    if "import" in text:
        # Run from the repository (``training_configs/...``), or a config of one's own in a folder
        # beside training_configs (``../training_configs/...``: tests/ is such a folder).
        search = [str(REPO_ROOT), str(REPO_ROOT / "tests")]
        return json.loads(_jsonnet.evaluate_snippet(
            block.where, text, jpathdir=search, native_callbacks=_natives()
        ))
    fields = text.replace("...", "")
    return json.loads(_jsonnet.evaluate_snippet(block.where, "{\n" + fields + "\n}"))


@pytest.mark.parametrize("block", _blocks("jsonnet", "json"), ids=lambda block: block.where)
def test_every_config_block_evaluates_and_names_registered_types(block):
    config = _evaluate_jsonnet(block)
    assert config
    named = set(re.findall(r"""["']?type["']?\s*:\s*["']([\w-]+)["']""", block.text))
    unregistered = named - _registered_names()
    assert unregistered == set(), f"{block.where}: types not registered with AllenNLP"


# --- bash -----------------------------------------------------------------------------------


def _parse_allennlp(arguments: List[str]) -> str:
    """AllenNLP's own parser, with the plugin's subcommands (as the ``allennlp`` command builds
    it); raises with argparse's message if the line does not parse, else returns what it printed
    (``--help``'s text)."""
    return _allennlp_parse(arguments)[1]


def allennlp_arguments(arguments: List[str]) -> argparse.Namespace:
    """What AllenNLP's parser makes of an ``allennlp`` command line (`_parse_allennlp`)."""
    return _allennlp_parse(arguments)[0]


def _allennlp_parse(arguments: List[str]) -> Tuple[Optional[argparse.Namespace], str]:
    from allennlp.commands import parse_args

    saved = sys.argv
    sys.argv = ["allennlp", *arguments]
    output = StringIO()
    namespace = None
    try:
        with redirect_stdout(output), redirect_stderr(output):
            namespace = parse_args()[1]
    except SystemExit as exit:
        if exit.code not in (0, None):
            raise AssertionError(f"allennlp {' '.join(arguments)}: {output.getvalue()}") from None
    finally:
        sys.argv = saved
    return namespace, output.getvalue()


def _parse_torchrun(arguments: List[str]) -> List[str]:
    """torchrun's own parser; returns the command it launches."""
    from torch.distributed.run import get_args_parser

    parsed = get_args_parser().parse_args(arguments)
    return [parsed.training_script, *parsed.training_script_args]


def _check_command(command: List[str], where: str) -> None:
    program = os.path.basename(command[0])  # .venv/bin/allennlp, ~/elmo-env/bin/pip
    if program == "allennlp":
        _parse_allennlp(command[1:])
    elif program == "torchrun":
        launched = _parse_torchrun(command[1:])
        assert launched[0].endswith("allennlp") or "command -v allennlp" in launched[0], launched
        _parse_allennlp(launched[1:])
    elif program == "make":
        result = subprocess.run(
            ["make", "-n", *command[1:]], cwd=REPO_ROOT, capture_output=True, text=True, timeout=60
        )
        assert result.returncode == 0, f"{where}: make -n {' '.join(command[1:])}: {result.stderr}"
    elif program == "python" and len(command) > 1 and command[1].endswith(".py"):
        assert (REPO_ROOT / command[1]).is_file(), f"{where}: {command[1]} does not exist"
    else:
        assert program in OTHER_PROGRAMS, (
            f"{where}: `{program}` has no rule in tests/documentation/test_code_blocks.py"
        )


@pytest.mark.parametrize("block", _blocks("bash", "sh"), ids=lambda block: block.where)
def test_every_shell_block_parses_with_the_commands_as_they_are(block):
    syntax = subprocess.run(["bash", "-n"], input=block.text, capture_output=True, text=True)
    assert syntax.returncode == 0, f"{block.where}: {syntax.stderr}"
    commands = shell_commands(block.text)
    assert commands, f"{block.where}: an empty shell block"
    for command in commands:
        _check_command(command, block.where)


def _plain_allennlp_blocks() -> List[CodeBlock]:
    # Not the messages a command prints ("allennlp elmo: error: ...").
    return [block for block in _blocks("")
            if re.match(r"allennlp [\w-]+(?!:)\s", block.text)]


@pytest.mark.parametrize("block", _plain_allennlp_blocks(), ids=lambda block: block.where)
def test_a_command_synopsis_names_the_options_there_are(block):
    # A block without a language that starts with `allennlp` is a synopsis (``[--option]``, as
    # --help prints it): its options must be the subcommand's. A command to type goes in a bash
    # block, which runs (test_shell_blocks_run.py).
    assert "[" in block.text, f"{block.where}: a command in a block without a language: make it ```bash"
    subcommand = block.text.split()[1]
    help_text = _parse_allennlp([subcommand, "--help"])
    for option in set(re.findall(r"(?<![\w-])--[a-z][\w-]*", block.text)):
        assert re.search(rf"(?<![\w-]){option}(?![\w-])", help_text), (
            f"{block.where}: allennlp {subcommand} has no {option}"
        )


def test_the_checks_can_fail():
    with pytest.raises(AssertionError, match="--modle"):
        _parse_allennlp(["elmo", "in.txt", "out.hdf5", "--all", "--modle", "x"])
    with pytest.raises(AssertionError, match="no rule"):
        _check_command(["rm", "-rf", "/"], "here")
    with pytest.raises(AssertionError):
        _check_command(["make", "no-such-target"], "here")
    assert shell_commands("A=1 allennlp elmo a b > x.log 2>&1 \\\n  --all  # note\nmake demo && make test") == [
        ["allennlp", "elmo", "a", "b", "--all"],
        ["make", "demo"],
        ["make", "test"],
    ]
