"""
Shared test helpers: fixture paths, random biLMs written in the bilm-tf layout, small batches.
"""
import functools
import json
import math
import os
import signal
import subprocess
import sys
import sysconfig
from pathlib import Path
from typing import Any, Dict, List, NamedTuple, Optional, Sequence

import h5py
import numpy as np
import pytest
import torch
from allennlp.commands import ArgumentParserWithDefaults

from elmo_plugin.commands.elmo_export import ElmoExportCommand
from elmo_plugin.model_files.bilm_tf.directory import write_bilm_tf_directory
from elmo_plugin.model_files.bilm_tf.options import BilmOptions
from elmo_plugin.modules.bilm import ElmoBiLm

REPO_ROOT = Path(__file__).resolve().parents[1]
# AllenNLP's golden ELMo fixture, in the repository so that the tests need nothing beside it
# (its README gives the source and licence).
FIXTURES = REPO_ROOT / "tests" / "fixtures" / "elmo_allennlp"
FIXTURE_OPTIONS = FIXTURES / "options.json"
FIXTURE_WEIGHTS = FIXTURES / "lm_weights.hdf5"

# The real-language data of the project's machines, ../shared/data beside the repository (its
# README gives sources and licences): too large for the repository, so the tests that read it
# skip where it is absent (`requires_shared_data`).
SHARED_DATA = REPO_ROOT.parent / "shared" / "data"


def requires_shared_data(relative: str = "") -> pytest.MarkDecorator:
    """Skips a test, naming the path, when ``SHARED_DATA / relative`` is absent."""
    path = SHARED_DATA / relative
    return pytest.mark.skipif(
        not path.exists(), reason=f"needs {path}: the shared data, which is not in the repository"
    )

# The fixture's architecture, as keyword arguments of `BilmOptions`.
TINY_ARCH: Dict[str, Any] = dict(
    filters=[[1, 4], [2, 8], [3, 16], [4, 32], [5, 64]],
    char_embedding_dim=4,
    n_highway=2,
    max_characters_per_token=50,
    activation="relu",
    lstm_dim=64,
    projection_dim=16,
    n_layers=2,
    cell_clip=3.0,
    proj_clip=3.0,
    use_skip_connections=True,
)

# Sentences of varied lengths: a token longer than 48 bytes, non-ASCII (Korean, accented,
# emoji: 4-byte UTF-8) tokens and an empty sentence.
LONG_TOKEN = "Pneumonoultramicroscopicsilicovolcanoconiosis-and-then-some-more"  # 64 bytes
assert len(LONG_TOKEN.encode("utf-8")) > 48
KOREAN_LONG = "아버지가방에들어가신다"  # 11 syllables, 33 bytes
VARIED_BATCH: List[List[str]] = [
    ["The", "quick", "brown", "fox", "jumps", "over", "the", "lazy", "dog", "."],
    ["아버지가방에들어가신다", "밥", "을", "먹었다", "."],
    [],
    ["A", LONG_TOKEN, "token", "and", "café", "naïve", "😀", "!"],
    ["one"],
]


class BilmFiles(NamedTuple):
    options_file: Path
    weight_file: Path


def randomize_bilm_(bilm: ElmoBiLm, seed: int = 0, scale: float = 1.0) -> ElmoBiLm:
    """
    Overwrites every parameter of ``bilm`` with random values at a moderate scale: large enough
    that the gates, the highway carry and the clipping are all exercised, small enough that
    they are not all saturated. ``scale`` multiplies the LSTM weight scale.
    """
    generator = torch.Generator().manual_seed(seed)

    def normal_(tensor: torch.Tensor, std: float) -> None:
        tensor.copy_(torch.randn(tensor.shape, generator=generator) * std)

    def uniform_(tensor: torch.Tensor, bound: float) -> None:
        tensor.copy_((torch.rand(tensor.shape, generator=generator) * 2 - 1) * bound)

    encoder = bilm.character_encoder
    with torch.no_grad():
        uniform_(encoder.char_embedding.weight, 1.0)
        encoder.char_embedding.weight[0].zero_()
        char_dim = encoder.char_embedding.embedding_dim
        for (width, _), conv in zip(encoder.filters, encoder.convolutions):
            normal_(conv.weight, 1.0 / math.sqrt(width * char_dim))
            normal_(conv.bias, 0.2)
        n_filters = encoder.n_filters
        for layer in encoder.highway.layers:
            normal_(layer.weight, 1.0 / math.sqrt(n_filters))
            normal_(layer.bias, 0.5)
        if encoder.projection is not None:
            normal_(encoder.projection.weight, 1.5 / math.sqrt(n_filters))
            normal_(encoder.projection.bias, 0.2)
        for layers in (bilm.lstm.forward_layers, bilm.lstm.backward_layers):
            for layer in layers:
                normal_(layer.input_weight, scale / math.sqrt(layer.input_size))
                normal_(layer.recurrent_weight, scale / math.sqrt(layer.projection_size))
                normal_(layer.bias, 0.5)
                normal_(layer.projection_weight, 2.0 * scale / math.sqrt(layer.cell_size))
    return bilm


def make_random_bilm(seed: int = 0, scale: float = 1.0, stateful: bool = False, **arch: Any) -> ElmoBiLm:
    """An `ElmoBiLm` with the given architecture (defaults: `TINY_ARCH`) and random weights."""
    options = BilmOptions(**{**TINY_ARCH, **arch})
    torch.manual_seed(seed)
    return randomize_bilm_(ElmoBiLm(options, stateful=stateful), seed=seed, scale=scale).eval()


def make_random_bilm_files(
    tmp_path: Path, seed: int = 0, scale: float = 1.0, n_characters: int = 262, **arch: Any
) -> BilmFiles:
    """
    Builds a random biLM (see `make_random_bilm`) and writes ``options.json`` (with the given
    ``n_characters``) and ``weights.hdf5`` for it into the directory ``tmp_path / "bilm"``;
    returns both paths.
    """
    bilm = make_random_bilm(seed=seed, scale=scale, **arch)
    written = write_bilm_tf_directory(
        str(Path(tmp_path) / "bilm"), bilm.options, bilm.state_dict(), n_characters=n_characters
    )
    return BilmFiles(Path(written["options"]), Path(written["weights"]))


def read_hdf5_datasets(path: Path) -> Dict[str, np.ndarray]:
    """Every dataset of an HDF5 file, by full name."""
    arrays: Dict[str, np.ndarray] = {}
    with h5py.File(path, "r") as handle:
        handle.visititems(
            lambda name, obj: arrays.__setitem__(name, obj[...])
            if isinstance(obj, h5py.Dataset)
            else None
        )
    return arrays


def write_hdf5_datasets(path: Path, arrays: Dict[str, np.ndarray]) -> None:
    with h5py.File(path, "w") as handle:
        for name, value in arrays.items():
            handle.create_dataset(name, data=value)


def masked_max_abs_diff(
    ours: torch.Tensor, theirs: torch.Tensor, mask: Optional[torch.Tensor] = None
) -> float:
    """Largest absolute difference over the positions where ``mask`` (batch, time) is True."""
    assert ours.shape == theirs.shape, (ours.shape, theirs.shape)
    diff = (ours.double() - theirs.double()).abs()
    if mask is not None:
        diff = diff * mask.unsqueeze(-1).double()
    return float(diff.max()) if diff.numel() else 0.0


def lengths_of(batch: Sequence[Sequence[str]]) -> List[int]:
    return [len(sentence) for sentence in batch]


def assert_clips_exercised(bilm: ElmoBiLm, ids: torch.Tensor, min_effect: float = 1e-4) -> None:
    """
    Checks that the inputs make every configured clip (cell and projection) bite: switching it
    off changes the outputs. Otherwise a parity test could not see a clipping bug.
    """
    layers = list(bilm.lstm.forward_layers) + list(bilm.lstm.backward_layers)
    with torch.no_grad():
        reference = bilm(ids)["activations"][-1]
        for attribute in ("cell_clip", "proj_clip"):
            saved = [getattr(layer, attribute) for layer in layers]
            if all(value is None for value in saved):
                continue
            try:
                for layer in layers:
                    setattr(layer, attribute, None)
                unclipped = bilm(ids)["activations"][-1]
            finally:
                for layer, value in zip(layers, saved):
                    setattr(layer, attribute, value)
            effect = float((unclipped - reference).abs().max())
            assert effect > min_effect, f"{attribute} never bites on these inputs ({effect:.3g})"


CONFIG_DIR = REPO_ROOT / "training_configs"


def config_calling(path: Path, config: Path, **arguments: Any) -> Path:
    """
    Writes a jsonnet config at ``path`` that calls the function of ``config`` (a file of
    ``training_configs``, absolute or relative to it) with ``arguments``, the way a user adapts
    a config without copying it: ``(import "bilm.jsonnet")(num_epochs=1, ...)``. Returns ``path``.
    """
    config = Path(config) if Path(config).is_absolute() else CONFIG_DIR / config
    call = ", ".join(f"{name}={json.dumps(value)}" for name, value in arguments.items())
    Path(path).write_text(f'(import "{config}")({call})\n', encoding="utf-8")
    return Path(path)


def run_elmo(*arguments, model_files: bool = True) -> int:
    """
    Parses ``allennlp elmo ARGUMENTS`` (plus the golden fixture's model files unless
    ``model_files`` is False) with the command's own parser and runs it in-process; returns the
    exit status.
    """
    from elmo_plugin.commands.elmo import ElmoCommand

    parser = ArgumentParserWithDefaults(prog="allennlp")
    ElmoCommand().add_subparser(parser.add_subparsers())
    argv = ["elmo"] + [str(argument) for argument in arguments]
    if model_files:
        argv += ["--options-file", str(FIXTURE_OPTIONS), "--weight-file", str(FIXTURE_WEIGHTS)]
    try:
        args = parser.parse_args(argv)
        args.func(args)
    except SystemExit as exit:
        return exit.code if isinstance(exit.code, int) else 1
    return 0


def run_export(*arguments) -> int:
    """``allennlp elmo-export ARGUMENTS`` through the command's own parser, in-process."""
    parser = ArgumentParserWithDefaults(prog="allennlp")
    ElmoExportCommand().add_subparser(parser.add_subparsers())
    args = parser.parse_args(["elmo-export"] + [str(argument) for argument in arguments])
    try:
        args.func(args)
    except SystemExit as exit:
        return exit.code if isinstance(exit.code, int) else 1
    return 0


def write_serialization_directory(directory: Path, model: Any, config: Dict[str, Any]) -> Path:
    """
    What ``allennlp train`` leaves for a model, without training it: ``vocabulary/``,
    ``best.th`` and ``config.json`` in ``directory`` (created if need be), and the
    ``model.tar.gz`` that AllenNLP's ``archive_model`` makes of them. Returns ``directory``.
    """
    from allennlp.models.archival import archive_model

    directory.mkdir(parents=True, exist_ok=True)
    model.vocab.save_to_files(str(directory / "vocabulary"))
    torch.save(model.state_dict(), directory / "best.th")
    (directory / "config.json").write_text(json.dumps(config), encoding="utf-8")
    archive_model(str(directory))
    return directory


def record_bfloat16_autocast(module: torch.nn.Module) -> List[bool]:
    """Whether each later call of ``module`` ran under the CPU's bfloat16 autocast, in order."""
    states: List[bool] = []

    def hook(_module, _inputs):
        states.append(
            torch.is_autocast_enabled("cpu") and torch.get_autocast_dtype("cpu") == torch.bfloat16
        )

    module.register_forward_pre_hook(hook)
    return states


def write_lines(path: Path, lines: List[str]) -> Path:
    """Writes ``lines`` to ``path`` as UTF-8, each ended by a newline; returns ``path``."""
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return path


def read_output(path: Path):
    """An ``allennlp elmo`` HDF5 file: its datasets by key, and ``sentence_to_index`` (or None)."""
    with h5py.File(path, "r") as handle:
        datasets = {key: handle[key][...] for key in handle if key != "sentence_to_index"}
        mapping = (
            json.loads(handle["sentence_to_index"][0]) if "sentence_to_index" in handle else None
        )
    return datasets, mapping


def train_elmo_tagger(
    directory: Path, num_epochs: int = 1, requires_grad: bool = False, do_layer_norm: bool = False
) -> Path:
    """
    Trains AllenNLP's ``simple_tagger`` with the golden fixture's biLM in an
    ``elmo_token_embedder`` (one scalar mix) on two tagged sentences, into ``directory / "run"``;
    returns its ``model.tar.gz``: a task model with ELMo, for the export tests.
    """
    from allennlp.commands.train import train_model
    from allennlp.common import Params

    data = directory / "train.txt"
    data.parent.mkdir(parents=True, exist_ok=True)
    data.write_text("the###D dog###N runs###V .###P\na###D big###A cat###N .###P\n", encoding="utf-8")
    config = {
        "dataset_reader": {"type": "sequence_tagging",
                           "token_indexers": {"elmo": {"type": "elmo_characters"}}},
        "train_data_path": str(data),
        "model": {
            "type": "simple_tagger",
            "text_field_embedder": {"token_embedders": {"elmo": {
                "type": "elmo_token_embedder", "options_file": str(FIXTURE_OPTIONS),
                "weight_file": str(FIXTURE_WEIGHTS), "requires_grad": requires_grad,
                "do_layer_norm": do_layer_norm, "dropout": 0.0}}},
            "encoder": {"type": "pass_through", "input_dim": 32},
        },
        "data_loader": {"batch_size": 2},
        "trainer": {"num_epochs": num_epochs, "optimizer": {"type": "adam", "lr": 0.1},
                    "cuda_device": -1},
    }
    train_model(Params(config), str(directory / "run"))
    return directory / "run" / "model.tar.gz"


# The .pth files that the plugin's wheel and editable install put at the top of site-packages
# (setup.py).
PLUGIN_PTH_FILES = [
    REPO_ROOT / "elmo_plugin" / "patches" / "elmo_plugin_startup_hook.pth",
    REPO_ROOT / "elmo_plugin" / "legacy" / "elmo_plugin_allennlp_commands_elmo.pth",
]


def installed_allennlp(directory: Path) -> List[str]:
    """
    The ``allennlp`` command of an environment where this checkout is installed (``make``,
    ``pip install``), as an argument list to which the command's arguments are added: a site
    directory in ``directory`` with the plugin's ``.pth`` files (as pip puts them into
    site-packages, whatever the test environment's own are), and AllenNLP's entry point run the
    way its console script runs it (the script's folder, not the current one, first on the
    import path). Run it with ``PYTHONPATH`` at this checkout (`installed_environment`).
    """
    site = Path(directory) / "site-packages"
    site.mkdir(parents=True, exist_ok=True)
    for pth in PLUGIN_PTH_FILES:
        (site / pth.name).write_bytes(pth.read_bytes())
    launcher = Path(directory) / "allennlp"
    launcher.write_text(
        "import site, sys\n"
        f"site.addsitedir({str(site)!r})\n"
        "from allennlp.__main__ import run\n"
        "if __name__ == '__main__':  # not in the processes that multiprocessing spawns\n"
        "    sys.exit(run())\n",
        encoding="utf-8",
    )
    return [sys.executable, str(launcher)]


def ctrl_c_as_in_a_terminal() -> None:
    """A `subprocess.Popen` ``preexec_fn``: Ctrl-C (SIGINT) at its default action in the child,
    as a terminal starts a command, whatever this process inherited (a job that a non-interactive
    shell starts in the background ignores it, and so would the child)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


# Set in the pytest that `in_a_process_of_its_own` starts: there the test itself runs.
_OWN_PROCESS = "TESTS_RUN_IN_A_PROCESS_OF_THEIR_OWN"


def in_a_process_of_its_own(test):
    """
    Runs the test (by its node id) in a pytest of its own, for what leaves threads behind in the
    process that ran it: after a Ray driver's, a later fork of the test process (a
    `multiprocessing` pool, a data loader's workers) can deadlock in the child.
    """

    @functools.wraps(test)
    def run(*args, **kwargs):
        if os.environ.get(_OWN_PROCESS):
            return test(*args, **kwargs)
        node_id = os.environ["PYTEST_CURRENT_TEST"].rsplit(" ", 1)[0]
        result = subprocess.run(
            [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-m", "slow or not slow", node_id],
            cwd=REPO_ROOT, env={**os.environ, _OWN_PROCESS: "1"}, capture_output=True, text=True, timeout=1200,
        )
        output = f"{node_id} in a pytest of its own:\n{result.stdout[-8000:]}{result.stderr[-3000:]}"
        assert result.returncode == 0, output
        assert "1 passed" in result.stdout, output

    return run


def installed_environment(home: Path, **variables: str) -> Dict[str, str]:
    """The environment for `installed_allennlp`: this checkout as the plugin, a HOME of its own
    (no ``~/.allennlp/plugins``), and ``variables``."""
    Path(home).mkdir(parents=True, exist_ok=True)
    environment = {k: v for k, v in os.environ.items() if not k.startswith("ELMO_")}
    environment.update(PYTHONPATH=str(REPO_ROOT), HOME=str(home), **variables)
    return environment


def installed_python(directory: Path) -> Path:
    """
    The Python of an environment where this checkout is installed, for what starts Python
    processes of its own (``make demo``'s steps run ``python -m allennlp``): a virtual environment
    in ``directory`` that reads the test environment's packages (a path line), with that
    environment's quiet start-up files and nltk data (scripts/quiet_environment.py) and this
    checkout's ``.pth`` files (as pip installs them). Run it with ``PYTHONPATH`` at this
    checkout (`installed_environment`).
    """
    python = Path(directory) / "bin" / "python"
    if not python.exists():
        subprocess.run([sys._base_executable, "-m", "venv", "--without-pip", str(directory)],
                       check=True)
    tested = Path(sysconfig.get_paths()["purelib"])
    site = Path(directory) / "lib" / f"python{sys.version_info[0]}.{sys.version_info[1]}" / "site-packages"
    (site / "tested_set.pth").write_text(f"{tested}\n", encoding="utf-8")
    ours = {pth.name for pth in PLUGIN_PTH_FILES}
    for pth in tested.glob("elmo_plugin_*.pth"):  # scripts/quiet_environment.py's
        if pth.name not in ours:
            (site / pth.name).write_bytes(pth.read_bytes())
    for pth in PLUGIN_PTH_FILES:
        (site / pth.name).write_bytes(pth.read_bytes())
    # nltk's placeholder data (scripts/quiet_environment.py), which nltk looks for in sys.prefix.
    nltk_data = Path(sys.prefix) / "nltk_data"
    if nltk_data.is_dir() and not (Path(directory) / "nltk_data").exists():
        (Path(directory) / "nltk_data").symlink_to(nltk_data)
    return python
