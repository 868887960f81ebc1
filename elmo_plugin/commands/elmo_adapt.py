"""
``allennlp elmo-adapt``: go on pretraining a trained biLM on your own text (docs/adapting.md). It
runs ``training_configs/bilm_adapt.jsonnet`` through the plugin's ``allennlp train``, then exports
the adapted model (with its softmax) for ``allennlp elmo``, the task configs and a further round.
"""
import argparse
import json
import os
import shlex
import sys
import tempfile
from pathlib import Path
from typing import Any, Dict, List, Optional

from allennlp.commands.subcommand import Subcommand
from allennlp.common.checks import ConfigurationError

from elmo_plugin.commands.common import (
    add_file_friendly_logging,
    positive_int,
    run_reporting_errors,
    subcommand_parser,
    use_file_friendly_logging,
)
from elmo_plugin.commands.train_command import train_model_from_file
from elmo_plugin.export.archive_to_bilm_tf import export_to_bilm_tf
from elmo_plugin.training.console import quiet_console_handlers

# The configs live in the repository beside the package (a source checkout or an editable install).
DEFAULT_CONFIG = Path(__file__).resolve().parents[2] / "training_configs" / "bilm_adapt.jsonnet"
# Words of the new corpus seen this often join the vocabulary with --extend-vocabulary alone.
DEFAULT_EXTEND_MIN_COUNT = 3
EXPORT_DIRECTORY = "bilm"

_DESCRIPTION = f"""Go on pretraining a trained ELMo biLM on your own text, the way to an ELMo of
your domain (docs/adapting.md).

SOURCE is the language model to start from: an elmo_bilm run (its directory or model.tar.gz), an
export with its softmax (allennlp elmo-export RUN DIR --include-softmax, or an earlier
elmo-adapt's OUTPUT_DIRECTORY/{EXPORT_DIRECTORY}), a published name ("original" comes with its
published softmax), a bilm-tf training checkpoint (model.ckpt-N or its directory), or any biLM
without a softmax (a TF-Hub module, another published size), whose new softmax then trains alone
for an epoch first. TRAIN_DATA is a quoted glob of your tokenized text, one sentence a line.

The architecture is the source's; the vocabulary is the source's, re-sorted by your text's counts
(the order the sampled softmax's sampler assumes), each word keeping its softmax row;
--extend-vocabulary adds your text's frequent words. The run directory OUTPUT_DIRECTORY holds the
run (model.tar.gz, metrics.json, metrics_start.json: the source's validation perplexity on your
text) and, at the end, the adapted biLM as options.json + weights.hdf5 + vocabulary.txt +
softmax.hdf5 in OUTPUT_DIRECTORY/{EXPORT_DIRECTORY}, for allennlp elmo --model and the task
configs. An interrupted run goes on with the same command and --recover.

The run is an ordinary allennlp train of {DEFAULT_CONFIG.name}: call that config's function from
a config of your own for any other setting."""


@Subcommand.register("elmo-adapt")
class ElmoAdaptCommand(Subcommand):
    """``allennlp elmo-adapt``: see the module documentation and ``allennlp elmo-adapt --help``."""

    def add_subparser(self, parser: argparse._SubParsersAction) -> argparse.ArgumentParser:
        subparser = subcommand_parser(
            parser, self.name, _DESCRIPTION, "Go on pretraining a trained biLM on your own text."
        )
        subparser.add_argument("source", help="the language model to adapt (see above)")
        subparser.add_argument("train_data", help='your tokenized text, a quoted glob: "my_text/train/*.txt"')
        subparser.add_argument("output_directory", help="the run directory (must not exist, unless --recover or -f)")
        subparser.add_argument(
            "--validation-data", required=True, metavar="FILE",
            help="held-out text of the same kind, which measures the source and chooses the best epoch",
        )
        subparser.add_argument(
            "--source-validation-data", metavar="FILE", default=None,
            help="held-out text of the source's domain, measured before training and after every epoch "
            "(what adapting costs there)",
        )
        subparser.add_argument(
            "--validate-every", type=positive_int, default=None, metavar="N",
            help="measure --validation-data every N batches too (long epochs; default: after each epoch)",
        )
        subparser.add_argument("--epochs", type=positive_int, default=1, help="epochs over TRAIN_DATA (default 1)")
        subparser.add_argument(
            "--extend-vocabulary", type=positive_int, nargs="?", const=DEFAULT_EXTEND_MIN_COUNT, default=None,
            metavar="MIN_COUNT",
            help="add the words of TRAIN_DATA seen MIN_COUNT times or more (default "
            f"{DEFAULT_EXTEND_MIN_COUNT}) that the source lacks, each starting from <UNK>'s softmax row",
        )
        subparser.add_argument(
            "--source-vocabulary", metavar="FILE", default=None,
            help="the vocabulary file of a bilm-tf checkpoint that has none beside it",
        )
        subparser.add_argument(
            "--learning-rate", type=float, default=None,
            help="default: Adagrad 0.2 going on with a checkpoint's accumulators, else Adam 0.001 decayed to 0",
        )
        subparser.add_argument("--batch-size", type=positive_int, default=None, help="sentences a batch (default 64)")
        subparser.add_argument(
            "--num-samples", type=positive_int, default=None,
            help="the sampled softmax's negatives (default 8192 above 100,000 words, else 1024)",
        )
        subparser.add_argument(
            "--softmax-first-epochs", type=int, default=None, metavar="N",
            help="epochs of the softmax alone, the biLM frozen, before --epochs (default 1 for a source "
            "without a softmax, else 0)",
        )
        subparser.add_argument("--cuda-device", type=int, default=None, help="GPU index (default -1: the CPU)")
        subparser.add_argument(
            "--config", default=None, metavar="JSONNET",
            help=f"the adaptation config (default: the repository's training_configs/{DEFAULT_CONFIG.name})",
        )
        subparser.add_argument(
            "-r", "--recover", action="store_true", help="go on with the interrupted run in OUTPUT_DIRECTORY"
        )
        subparser.add_argument(
            "-f", "--force", action="store_true", help="overwrite OUTPUT_DIRECTORY if it exists"
        )
        add_file_friendly_logging(subparser)
        subparser.set_defaults(func=elmo_adapt_command)
        return subparser


def _local(path: str) -> str:
    """A path or glob as an absolute one (the run's config then reads the same from anywhere);
    a URL, a published name or anything else as given."""
    expanded = os.path.expanduser(path)
    if "://" in path or not (os.path.exists(expanded) or any(c in expanded for c in "*?[") or os.sep in expanded):
        return path
    return os.path.abspath(expanded)


def adaptation_arguments(args: argparse.Namespace) -> Dict[str, Any]:
    """The arguments of ``bilm_adapt.jsonnet``'s function that ``args`` sets."""
    given = {
        "start_from": _local(args.source),
        "train_data_path": _local(args.train_data),
        "validation_data_path": _local(args.validation_data),
        "source_validation_data_path": _local(args.source_validation_data) if args.source_validation_data else None,
        "validate_every_num_batches": args.validate_every,
        "num_epochs": args.epochs,
        "extend_vocabulary": args.extend_vocabulary,
        "source_vocabulary": _local(args.source_vocabulary) if args.source_vocabulary else None,
        "learning_rate": args.learning_rate,
        "batch_size": args.batch_size,
        "num_samples": args.num_samples,
        "softmax_first_epochs": args.softmax_first_epochs,
        "cuda_device": args.cuda_device,
    }
    return {name: value for name, value in given.items() if value is not None}


def adaptation_config_text(config: str, arguments: Dict[str, Any]) -> str:
    """A jsonnet config calling ``config``'s function with ``arguments``."""
    call = ", ".join(f"{name}={json.dumps(value)}" for name, value in arguments.items())
    return f"(import {json.dumps(os.path.abspath(config))})({call})\n"


def _config_file(args: argparse.Namespace) -> str:
    config = os.path.expanduser(args.config) if args.config else os.fspath(DEFAULT_CONFIG)
    if not os.path.isfile(config):
        if args.config:
            raise ConfigurationError(f"--config {args.config}: no such file")
        raise ConfigurationError(
            f"the adaptation config {config} is not there (the configs are part of the repository, not "
            "of an installed wheel): pass --config PATH/TO/training_configs/bilm_adapt.jsonnet"
        )
    return config


def resume_command(argv: List[str]) -> str:
    """The command line ``argv`` (``elmo-adapt ...``) with ``--recover`` and without ``-f``."""
    kept = [part for part in argv if part not in ("-f", "--force", "-r", "--recover")]
    return shlex.join(["allennlp", *kept, "--recover"])


def _interrupted_message(output_directory: str, argv: Optional[List[str]]) -> str:
    if not os.path.isdir(output_directory):
        return f"interrupted before the first checkpoint; {output_directory} was removed"
    if argv is None or not argv or argv[0] != "elmo-adapt":
        return f"interrupted; the run in {output_directory} goes on with the same command and --recover"
    return f"interrupted; to go on from the last checkpoint in {output_directory}: {resume_command(argv)}"


def elmo_adapt_command(args: argparse.Namespace) -> None:
    """Runs ``allennlp elmo-adapt`` for parsed arguments."""
    quiet_console_handlers()
    use_file_friendly_logging(args)
    output_directory = os.fspath(args.output_directory)

    def adapt() -> Dict[str, str]:
        config = _config_file(args)
        text = adaptation_config_text(config, adaptation_arguments(args))
        with tempfile.TemporaryDirectory(prefix="elmo-adapt-") as directory:
            call = os.path.join(directory, "elmo_adapt.jsonnet")
            with open(call, "w", encoding="utf-8") as handle:
                handle.write(text)
            train_model_from_file(
                call, output_directory, recover=args.recover, force=args.force, include_package=["elmo_plugin"],
                file_friendly_logging=args.file_friendly_logging,
                config_name=f"{os.path.basename(config)}, {args.source} on {args.train_data}", export_hint=False,
            )
        return export_to_bilm_tf(output_directory, os.path.join(output_directory, EXPORT_DIRECTORY), True)

    argv = sys.argv[1:]
    paths = run_reporting_errors(
        "elmo-adapt", adapt, interrupted=lambda: _interrupted_message(output_directory, argv)
    )
    for kind, path in paths.items():
        print(f"wrote {kind}: {path}")
    exported = os.path.join(output_directory, EXPORT_DIRECTORY)
    print(f"to embed with it: allennlp elmo SENTENCES OUT.hdf5 --model {exported}")
