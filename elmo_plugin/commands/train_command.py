"""
``allennlp train`` with the plugin imported: mistakes in the input are one line, found before
anything is created on disk, and the run ends with a report.

AllenNLP parses ``allennlp train``'s arguments before it imports plugins, then calls
``train_model_from_args``, which calls ``allennlp.commands.train.train_model_from_file`` (looked
up when it is called). `install` puts `train_model_from_file` there, with the same parameters
and result, which

1. reads the config, turning a jsonnet error (an ``assert`` of the configs, an ELMo width that
   disagrees with the model, a syntax error) into a `ConfigurationError` naming the config;
2. checks what the plugin's configs name before AllenNLP creates the serialization directory
   (`check_before_training`): the data files of the plugin's readers, a ``from_bilm_tf_file``
   vocabulary, the ELMo biLMs (with the ``make`` target for the repository's own), the GPU;
3. trains with AllenNLP's ``train_model``; when a `ConfigurationError` (a mistake in the input
   found only as training starts: an empty corpus, ...) ends a run that saved no checkpoint, it
   removes the serialization directory that the run created (never with ``--recover``), so that
   the next try needs no ``-f``;
4. reports the end of the run on the console (`elmo_plugin.training.console`): what was
   trained, the held-out metrics, the wall time, where the model is.

Called by ``allennlp train`` (found by the caller's code object), a `ConfigurationError` is then
``allennlp train: error: MESSAGE`` on stderr and exit status 1, without a traceback; called from
Python it is raised as before. Errors that are not `ConfigurationError` (bugs) keep AllenNLP's
traceback.
"""
import copy
import functools
import glob
import json
import logging
import os
import re
import shutil
import sys
import time
from typing import Any, Dict, Iterator, List, Optional

from allennlp.common import Params
from allennlp.common.checks import ConfigurationError

from elmo_plugin.training.console import (
    REPORT_LOGGER,
    metrics_line,
    quiet_console_handlers,
    reported_metric_names,
)

report = logging.getLogger(REPORT_LOGGER)

EXIT_ERROR = 1
_DATA_KEYS = ("train_data_path", "validation_data_path", "test_data_path")
_GLOB_CHARACTERS = set("*?[")


def read_config(parameter_filename: str, overrides: Any = "") -> Params:
    """`Params.from_file`, with a missing file and jsonnet's errors as one `ConfigurationError`."""
    from allennlp.common.params import parse_overrides

    from elmo_plugin.training.config_functions import jsonnet_error_line

    path = os.fspath(parameter_filename)
    if not os.path.isfile(path):
        raise ConfigurationError(f"the config file {path} does not exist")
    if isinstance(overrides, str) and overrides.strip():
        try:
            parse_overrides(overrides)
        except (RuntimeError, ValueError) as error:
            raise ConfigurationError(
                f"-o {overrides}: not a JSON (or jsonnet) object: {jsonnet_error_line(error)}"
            ) from None
    try:
        return Params.from_file(path, overrides)
    except RuntimeError as error:  # _jsonnet's errors
        raise ConfigurationError(f"{path}: {jsonnet_error_line(error)}") from None
    except json.JSONDecodeError as error:
        raise ConfigurationError(f"{path}: not valid JSON ({error})") from None


def _plugin_readers() -> set:
    from allennlp.data import DatasetReader

    names = set()
    for name in DatasetReader.list_available():
        cls, _ = DatasetReader.resolve_class_name(name)
        if cls.__module__.startswith("elmo_plugin."):
            names.add(name)
    return names


def _check_data_path(key: str, path: str, reader_type: str) -> None:
    from elmo_plugin.model_files.download import is_remote
    from elmo_plugin.tasks.common.task_data import missing_task_data

    if is_remote(path):
        return
    if reader_type == "bilm_corpus":
        from elmo_plugin.common.text_files import expand_corpus_glob

        try:
            expand_corpus_glob(path)
        except ConfigurationError as error:
            raise ConfigurationError(f"{key}: {error}") from None
        return
    # A reader may take a part of a file: "train.tsv[:90%]" (klue_ner).
    part = re.match(r"^(.*?)\[[^\[\]]*\]$", path)
    base = part.group(1) if part else path
    if os.path.exists(os.path.expanduser(path)) or os.path.exists(os.path.expanduser(base)):
        return
    if _GLOB_CHARACTERS & set(path) and glob.glob(os.path.expanduser(path)):
        return
    raise ConfigurationError(f"{key}: {missing_task_data(base)}") from None


def _elmo_models(config: Any) -> Iterator[Dict[str, Any]]:
    """The parameters of every ELMo the config loads (token embedders, elmo_input_output)."""
    if isinstance(config, dict):
        if config.get("type") == "elmo_token_embedder":
            yield config
        if config.get("type") == "elmo_input_output" and isinstance(config.get("elmo"), dict):
            yield config["elmo"]
        for value in config.values():
            yield from _elmo_models(value)
    elif isinstance(config, list):
        for value in config:
            yield from _elmo_models(value)


def _check_elmo(elmo: Dict[str, Any]) -> None:
    from elmo_plugin.model_files.build_hints import with_build_hint
    from elmo_plugin.model_files.download import is_remote
    from elmo_plugin.training.config_functions import elmo_output_dim

    model, options_file, weight_file = (
        elmo.get("model"), elmo.get("options_file"), elmo.get("weight_file")
    )
    if not all(v is None or isinstance(v, str) for v in (model, options_file, weight_file)):
        return
    elmo_output_dim(model, options_file, weight_file, None)
    if options_file is not None and weight_file is not None and not is_remote(weight_file):
        if not os.path.exists(os.path.expanduser(weight_file)):
            raise with_build_hint(
                ConfigurationError(f"ELMo weight_file {weight_file} does not exist"),
                weight_file,
            )


def check_before_training(params: Params) -> None:
    """
    Raises a `ConfigurationError` for what the config names and cannot work (see the module
    documentation). Only what the plugin knows is checked: the data of its own readers, its
    vocabulary, its ELMo, the GPU.
    """
    from elmo_plugin.training.trainer import check_training_device

    config = params.as_dict(quiet=True)

    def section(key: str) -> Dict[str, Any]:
        value = config.get(key)
        return value if isinstance(value, dict) else {}

    plugin_readers = _plugin_readers()
    reader = section("dataset_reader").get("type")
    validation_reader = section("validation_dataset_reader").get("type", reader)
    for key in _DATA_KEYS:
        path = config.get(key)
        reader_type = reader if key == "train_data_path" else validation_reader
        if isinstance(path, str) and reader_type in plugin_readers:
            _check_data_path(key, path, reader_type)
    vocabulary = section("vocabulary")
    if vocabulary.get("type") == "from_bilm_tf_file":
        path = vocabulary.get("vocabulary_file")
        if isinstance(path, str) and "://" not in path and not os.path.isfile(path):
            raise ConfigurationError(
                f"vocabulary.vocabulary_file {path} does not exist (allennlp elmo-vocab writes "
                "one from a corpus)"
            )
    for elmo in _elmo_models(config.get("model")):
        _check_elmo(elmo)
    trainer = section("trainer")
    if "cuda_device" in trainer:
        check_training_device(trainer["cuda_device"])


def _nothing_trained(serialization_dir: str) -> bool:
    patterns = ("model_state_*.th", "best.th", "model.tar.gz")
    return not any(glob.glob(os.path.join(glob.escape(serialization_dir), p)) for p in patterns)


def _remove_run_directory(serialization_dir: str) -> None:
    """Closes the log files AllenNLP opened there, then removes the directory."""
    directory = os.path.abspath(serialization_dir)
    for name in (None, "tqdm"):
        owner = logging.getLogger(name)
        for handler in list(owner.handlers):
            filename = getattr(handler, "baseFilename", None)
            if filename and os.path.abspath(filename).startswith(directory + os.sep):
                owner.removeHandler(handler)
                handler.close()
    shutil.rmtree(directory, ignore_errors=True)


def _duration(seconds: float) -> str:
    seconds = int(round(seconds))
    hours, rest = divmod(seconds, 3600)
    minutes, seconds = divmod(rest, 60)
    return f"{hours}:{minutes:02d}:{seconds:02d}"


def report_end(
    params_dict: Dict[str, Any], config: str, serialization_dir: str, seconds: float
) -> None:
    """The end of a run on the console: what, the held-out metrics, the time, the model."""
    metrics_file = os.path.join(serialization_dir, "metrics.json")
    try:
        with open(metrics_file, encoding="utf-8") as handle:
            metrics = json.load(handle)
    except (OSError, ValueError):
        metrics = {}
    model_type = (params_dict.get("model") or {}).get("type", "model")
    epochs = metrics.get("epoch")
    trained = f"{epochs + 1} epoch(s)" if isinstance(epochs, int) else "training"
    report.info("Trained %s (%s): %s in %s", model_type, config, trained, _duration(seconds))
    validation_metric = (params_dict.get("trainer") or {}).get("validation_metric", "-loss")
    if not isinstance(validation_metric, list):
        validation_metric = [validation_metric]
    tracked = [name.lstrip("+-") for name in validation_metric]
    names = reported_metric_names(metrics, tracked)
    best = metrics_line(metrics, "best_validation_", names)
    if best:
        best_epoch = metrics.get("best_epoch")
        at = f" {best_epoch + 1}" if isinstance(best_epoch, int) else ""
        report.info("  validation (best epoch%s): %s", at, best)
    test_names = sorted(key[len("test_"):] for key in metrics if key.startswith("test_"))
    test = metrics_line(metrics, "test_", [n for n in names if n in test_names] or test_names)
    if test:
        report.info("  test: %s", test)
    archive = os.path.join(serialization_dir, "model.tar.gz")
    if os.path.isfile(archive):
        report.info("  model: %s (log: %s)", archive, os.path.join(serialization_dir, "out.log"))
    if model_type == "elmo_bilm":
        report.info(
            "  to embed with it: allennlp elmo-export %s %s",
            serialization_dir,
            os.path.join(serialization_dir, "bilm"),
        )


def _log_to_files(message: str) -> None:
    """``message`` into the run's log files that are still open (out.log of a kept directory)."""
    record = logging.LogRecord(__name__, logging.ERROR, __file__, 0, message, None, None)
    for handler in logging.getLogger().handlers:
        if isinstance(handler, logging.FileHandler):
            handler.handle(record)


def _from_command(frame: Any) -> bool:
    from allennlp.commands import train

    return frame is not None and frame.f_code is train.train_model_from_args.__code__


def _wrap(original: Any) -> Any:
    @functools.wraps(original)
    def train_model_from_file(
        parameter_filename: Any,
        serialization_dir: Any,
        overrides: Any = "",
        recover: bool = False,
        force: bool = False,
        node_rank: int = 0,
        include_package: Optional[List[str]] = None,
        dry_run: bool = False,
        file_friendly_logging: bool = False,
        return_model: Optional[bool] = None,
    ) -> Any:
        from allennlp.commands import train

        from_command = _from_command(sys._getframe(1))
        if from_command:
            quiet_console_handlers()  # the command's handler, until training sets up its own
        started = time.monotonic()
        serialization_dir = os.fspath(serialization_dir)
        try:
            params = read_config(parameter_filename, overrides)
            # A copy: training pops the values out of the params.
            params_dict = copy.deepcopy(params.as_dict(quiet=True))
            if not recover:
                check_before_training(params)
            existed = os.path.exists(serialization_dir)
            try:
                result = train.train_model(
                    params=params,
                    serialization_dir=serialization_dir,
                    recover=recover,
                    force=force,
                    node_rank=node_rank,
                    include_package=include_package,
                    dry_run=dry_run,
                    file_friendly_logging=file_friendly_logging,
                    return_model=return_model,
                )
            except ConfigurationError:
                if (
                    not recover
                    and (force or not existed)
                    and os.path.isdir(serialization_dir)
                    and _nothing_trained(serialization_dir)
                ):
                    _remove_run_directory(serialization_dir)
                raise
        except ConfigurationError as error:
            if not from_command:
                raise
            _log_to_files(f"allennlp train: error: {error}")
            sys.stderr.flush()
            sys.stdout.flush()
            sys.stderr.write(f"allennlp train: error: {error}\n")
            sys.exit(EXIT_ERROR)
        if not dry_run:
            report_end(params_dict, os.fspath(parameter_filename), serialization_dir,
                       time.monotonic() - started)
        return result

    train_model_from_file._elmo_plugin = True  # type: ignore[attr-defined]
    return train_model_from_file


def install() -> None:
    """Puts `train_model_from_file` in ``allennlp.commands.train`` (once)."""
    from allennlp.commands import train

    if not getattr(train.train_model_from_file, "_elmo_plugin", False):
        train.train_model_from_file = _wrap(train.train_model_from_file)
