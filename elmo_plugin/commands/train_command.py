"""
``allennlp train`` with the plugin imported (`elmo_plugin.patches.train_command` puts the two
functions here in ``allennlp.commands.train``): mistakes in the input are one line, found before
anything is created on disk, an interruption is one line too, and the run ends with a report.
"""
import argparse
import copy
import glob
import json
import logging
import os
import re
import shlex
import shutil
import sys
import time
from typing import Any, Dict, Iterator, List, Optional, Set

from allennlp.common import Params
from allennlp.common.checks import ConfigurationError
from allennlp.common.util import SigTermReceived
from torch.multiprocessing import ProcessExitedException

from elmo_plugin.commands.common import run_reporting_errors
from elmo_plugin.commands.train_distributed import check_distributed
from elmo_plugin.training.callbacks import START_METRICS_FILE
from elmo_plugin.training.console import (
    REPORT_LOGGER,
    duration,
    format_number,
    metrics_line,
    quiet_console_handlers,
    reported_metric_names,
)

report = logging.getLogger(REPORT_LOGGER)

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


def _plugin_readers() -> Set[str]:
    from allennlp.data import DatasetReader

    return {
        name for name in DatasetReader.list_available()
        if DatasetReader.resolve_class_name(name)[0].__module__.startswith("elmo_plugin.")
    }


def _check_data_path(key: str, path: str, reader_type: str) -> None:
    from elmo_plugin.model_files.download import is_remote

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
    from elmo_plugin.tasks.common.task_data import missing_task_data  # a task's reader: tasks imported

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

    model, options_file, weight_file = elmo.get("model"), elmo.get("options_file"), elmo.get("weight_file")
    if not all(v is None or isinstance(v, str) for v in (model, options_file, weight_file)):
        return
    elmo_output_dim(model, options_file, weight_file, None)
    if options_file is not None and weight_file is not None and not is_remote(weight_file):
        if not os.path.exists(os.path.expanduser(weight_file)):
            raise with_build_hint(ConfigurationError(f"ELMo weight_file {weight_file} does not exist"), weight_file)


def check_before_training(params: Params) -> None:
    """Raises a `ConfigurationError` for what the config names and cannot work, of what the plugin
    knows only: the data of its own readers, its vocabulary, its ELMo, the GPU."""
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
                f"vocabulary.vocabulary_file {path} does not exist (allennlp elmo-vocab writes one from a corpus)"
            )
    for elmo in _elmo_models(config.get("model")):
        _check_elmo(elmo)
    trainer = section("trainer")
    if "cuda_device" in trainer:
        check_training_device(trainer["cuda_device"])


def check_recovered_config(params: Params, serialization_dir: str) -> None:
    """With ``--recover``: a `ConfigurationError` naming where ``params`` differ from the run's own
    ``config.json`` (AllenNLP refuses any difference, in a sentence that names none), and the ways on."""
    recovered = os.path.join(serialization_dir, "config.json")
    if not os.path.isfile(recovered):
        return  # not a run's folder: AllenNLP's own errors say so
    given, saved = params.as_flat_dict(), read_config(recovered).as_flat_dict()
    value = lambda flat, key: json.dumps(flat[key])[:40] if key in flat else "unset"  # noqa: E731 (as shown)
    unset = object()  # a value that no setting has
    shown = [f"{key} {value(given, key)} here, {value(saved, key)} in the run"
             for key in sorted(given.keys() | saved.keys()) if given.get(key, unset) != saved.get(key, unset)]
    if shown:
        archive = os.path.join(serialization_dir, "model.tar.gz")
        model = json.dumps({"model": {"type": "from_archive", "archive_file": archive}})
        raise ConfigurationError(
            f"--recover goes on with the settings of {recovered}, and these differ ({'; '.join(shown[:3])}"
            f"{f'; {len(shown) - 3} more' if len(shown) > 3 else ''}): give the config and -o that started the run"
            + (f", or train a new run (another -s) from its weights: -o '{model}'" if os.path.isfile(archive) else "")
        )


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


def report_end(
    params_dict: Dict[str, Any], config: str, serialization_dir: str, seconds: float, export_hint: bool = True
) -> None:
    """The end of a run on the console: what, the held-out metrics (and the starting model's, where
    a ``continue_pretraining`` run measured them), the time, the model."""
    metrics_file = os.path.join(serialization_dir, "metrics.json")
    try:
        with open(metrics_file, encoding="utf-8") as handle:
            metrics = json.load(handle)
    except (OSError, ValueError):
        metrics = {}
    model_type = (params_dict.get("model") or {}).get("type", "model")
    epochs = metrics.get("epoch")
    trained = f"{epochs + 1} epoch(s)" if isinstance(epochs, int) else "training"
    report.info("Trained %s (%s): %s in %s", model_type, config, trained, duration(seconds))
    validation_metric = (params_dict.get("trainer") or {}).get("validation_metric", "-loss")
    if not isinstance(validation_metric, list):
        validation_metric = [validation_metric]
    tracked = [name.lstrip("+-") for name in validation_metric]
    names = reported_metric_names(metrics, tracked)
    best = metrics_line(metrics, "best_validation_", names)
    if best:
        best_epoch = metrics.get("best_epoch")
        at = f" {best_epoch + 1}" if isinstance(best_epoch, int) else ""
        start = _start_metrics(serialization_dir)
        before = metrics_line(start, "validation_", names) if start else ""
        report.info("  validation (best epoch%s): %s%s", at, best, f" (before training: {before})" if before else "")
    if "source_validation_ppl" in metrics:
        before = _start_metrics(serialization_dir).get("source_validation_ppl")
        report.info(
            "  the source domain's held-out ppl: %s after the last epoch%s",
            format_number(metrics["source_validation_ppl"]),
            f" ({format_number(before)} before training)" if before is not None else "",
        )
    test_names = sorted(key[len("test_"):] for key in metrics if key.startswith("test_"))
    test = metrics_line(metrics, "test_", [n for n in names if n in test_names] or test_names)
    if test:
        report.info("  test: %s", test)
    archive = os.path.join(serialization_dir, "model.tar.gz")
    if os.path.isfile(archive):
        report.info("  model: %s (log: %s)", archive, os.path.join(serialization_dir, "out.log"))
    if model_type == "elmo_bilm" and export_hint:
        bilm = os.path.join(serialization_dir, "bilm")
        report.info("  to embed with it: allennlp elmo-export %s %s", serialization_dir, bilm)


def _start_metrics(serialization_dir: str) -> Dict[str, Any]:
    try:
        with open(os.path.join(serialization_dir, START_METRICS_FILE), encoding="utf-8") as handle:
            return json.load(handle)
    except (OSError, ValueError):
        return {}


def _log_to_files(message: str) -> None:
    """``message`` into the run's log files that are still open (out.log of a kept directory)."""
    record = logging.LogRecord(__name__, logging.ERROR, __file__, 0, message, None, None)
    for handler in logging.getLogger().handlers:
        if isinstance(handler, logging.FileHandler):
            handler.handle(record)


def train_model_from_file(
    parameter_filename: Any, serialization_dir: Any, overrides: Any = "", recover: bool = False, force: bool = False,
    node_rank: int = 0, include_package: Optional[List[str]] = None, dry_run: bool = False,
    file_friendly_logging: bool = False, return_model: Optional[bool] = None, *,
    config_name: Optional[str] = None, export_hint: bool = True,
) -> Any:
    """
    AllenNLP's ``train_model_from_file`` (same parameters and result) with the plugin's checks
    before the run directory is made and its report at the end (naming the config
    ``config_name``, by default its path, and with the ``elmo-export`` command to run unless
    ``export_hint`` is false). On a `ConfigurationError` or an interruption, a run directory that
    this call made and that holds no checkpoint is removed (never with ``recover``).
    """
    from allennlp.commands import train

    started = time.monotonic()
    serialization_dir = os.fspath(serialization_dir)
    params = read_config(parameter_filename, overrides)
    # A copy: training pops the values out of the params.
    params_dict = copy.deepcopy(params.as_dict(quiet=True))
    check_distributed(params_dict)
    if recover:
        check_recovered_config(params, serialization_dir)
    else:
        check_before_training(params)
    existed = os.path.exists(serialization_dir)
    try:
        result = train.train_model(
            params=params, serialization_dir=serialization_dir, recover=recover, force=force, node_rank=node_rank,
            include_package=include_package, dry_run=dry_run, file_friendly_logging=file_friendly_logging,
            return_model=return_model,
        )
    except (ConfigurationError, KeyboardInterrupt, SigTermReceived):
        made_here = not recover and (force or not existed)
        if made_here and os.path.isdir(serialization_dir) and _nothing_trained(serialization_dir):
            _remove_run_directory(serialization_dir)
        raise
    if not dry_run:
        report_end(
            params_dict, config_name or os.fspath(parameter_filename), serialization_dir, time.monotonic() - started,
            export_hint,
        )
    return result


def resume_command(args: argparse.Namespace) -> str:
    """The ``allennlp train`` command line of ``args`` with ``--recover`` (and without ``-f``)."""
    parts = ["allennlp", "train", os.fspath(args.param_path), "-s", os.fspath(args.serialization_dir)]
    if args.overrides:
        parts += ["-o", args.overrides]
    if args.node_rank:
        parts += ["--node-rank", str(args.node_rank)]
    for package in getattr(args, "include_package", None) or []:
        parts += ["--include-package", package]
    if args.file_friendly_logging:
        parts.append("--file-friendly-logging")
    return shlex.join(parts + ["--recover"])


def interrupted_message(args: argparse.Namespace) -> str:
    """What an interrupted run left: nothing (its directory removed) or checkpoints to resume."""
    directory = os.fspath(args.serialization_dir)
    if not os.path.isdir(directory):
        return f"interrupted before the first checkpoint; {directory} was removed"
    if _nothing_trained(directory):
        return f"interrupted before the first checkpoint; {directory} holds no checkpoint"
    return f"interrupted; to go on from the last checkpoint in {directory}: {resume_command(args)}"


def train_model_from_args(args: argparse.Namespace) -> None:
    """The ``allennlp train`` command: `train_model_from_file`, errors and interruptions as one
    line."""
    quiet_console_handlers()  # the command's handler, until training sets up its own

    def train() -> None:
        try:
            train_model_from_file(
                args.param_path, args.serialization_dir, args.overrides, args.recover, args.force, args.node_rank,
                args.include_package, args.dry_run, args.file_friendly_logging,
            )
        except ConfigurationError as error:
            _log_to_files(f"allennlp train: error: {error}")
            raise
        except ProcessExitedException as error:
            # A training process of this node ended (the rendezvous given up, killed...); what
            # it said is above.
            raise ConfigurationError(
                f"training process {error.error_index} of this node exited with status {error.exit_code}"
            ) from None
        sys.stderr.flush()
        sys.stdout.flush()

    run_reporting_errors("train", train, interrupted=lambda: interrupted_message(args))
