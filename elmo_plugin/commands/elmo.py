"""
The ``allennlp elmo`` subcommand (AllenNLP 0.9, removed in 1.0): bulk ELMo embeddings of a file
of tokenized sentences, written to HDF5.

```
allennlp elmo INPUT_FILE OUTPUT_FILE (--all | --top | --average)
    --options-file OPTIONS_JSON --weight-file WEIGHTS_HDF5 [--batch-size 64]
    [--cuda-device -1] [--forget-sentences] [--use-sentence-keys] [--stateful]
    [--file-friendly-logging] [--include-package P]
```

Unlike 0.9 nothing is downloaded, so ``--options-file`` and ``--weight-file`` must be given, and
the default is stateless (see `ElmoEmbedder`); ``--stateful`` gives 0.9's results.
"""
import argparse
import logging

import torch

from allennlp.commands.subcommand import Subcommand
from allennlp.common import logging as common_logging
from allennlp.common.checks import ConfigurationError

from elmo_plugin.embedding.elmo_embedder import DEFAULT_BATCH_SIZE, ElmoEmbedder
from elmo_plugin.commands.common import (
    EXIT_USAGE,
    exit_with_error,
    positive_int,
    run_reporting_errors,
)

logger = logging.getLogger(__name__)

_DESCRIPTION = """Embed a file of tokenized sentences with a pretrained ELMo biLM.

The input has one sentence per line, tokens separated by whitespace, UTF-8, no blank lines.
The output is an HDF5 file with one float32 dataset per line, keyed by the 0-based line number
(or by the sentence, with --use-sentence-keys):
  --all      (num_layers, num_tokens, dim): the token layer and every LSTM layer
  --top      (num_tokens, dim): the top LSTM layer
  --average  (num_tokens, dim): the mean of all layers
plus a dataset "sentence_to_index" with a JSON string that maps each sentence (tokens joined by
single spaces) to its key. The file appears only when the run completed.

This plugin downloads nothing: --options-file and --weight-file must point to a bilm-tf
options.json and its weights.hdf5. By default every batch starts from a zero LSTM state, so a
sentence always gets the same vectors; --stateful reproduces AllenNLP 0.9 (state carried from
batch to batch, results depend on --batch-size and the order of the lines)."""

_MISSING_MODEL_MESSAGE = (
    "{missing} not given. This plugin does not download a model (AllenNLP 0.9 fetched a default "
    "English one); --options-file must point to a bilm-tf options.json and --weight-file to the "
    "weights.hdf5 that goes with it, e.g. --options-file elmo_options.json "
    "--weight-file elmo_weights.hdf5"
)


@Subcommand.register("elmo")
class ElmoCommand(Subcommand):
    """
    ``allennlp elmo``: see the module documentation and ``allennlp elmo --help``.
    """

    def add_subparser(self, parser: argparse._SubParsersAction) -> argparse.ArgumentParser:
        subparser = parser.add_parser(
            self.name,
            description=_DESCRIPTION,
            help="Embed a file of tokenized sentences with a pretrained ELMo biLM (HDF5 output).",
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )
        subparser.add_argument(
            "input_file", type=str, help="the sentences: one tokenized sentence per line, UTF-8"
        )
        subparser.add_argument("output_file", type=str, help="the HDF5 file to write")

        layers = subparser.add_mutually_exclusive_group(required=True)
        layers.add_argument(
            "--all", action="store_true", help="write every layer: (num_layers, num_tokens, dim)"
        )
        layers.add_argument(
            "--top", action="store_true", help="write the top layer only: (num_tokens, dim)"
        )
        layers.add_argument(
            "--average",
            action="store_true",
            help="write the mean of all layers: (num_tokens, dim)",
        )

        # Not required=True for argparse: a missing model file gets its own explanation
        # (there is no download here, unlike 0.9), see `elmo_command`.
        subparser.add_argument(
            "--options-file",
            type=str,
            metavar="OPTIONS_JSON",
            help="required: the bilm-tf options.json of the model",
        )
        subparser.add_argument(
            "--weight-file",
            type=str,
            metavar="WEIGHTS_HDF5",
            help="required: the bilm-tf weights.hdf5 of the model",
        )
        subparser.add_argument(
            "--batch-size",
            type=positive_int,
            default=DEFAULT_BATCH_SIZE,
            help="sentences per biLM call",
        )
        subparser.add_argument(
            "--cuda-device", type=int, default=-1, help="the GPU to run on; -1 runs on the CPU"
        )
        subparser.add_argument(
            "--forget-sentences",
            action="store_true",
            help='do not write the "sentence_to_index" dataset that maps each sentence to its '
            "line number (useful when the sentence file is kept anyway)",
        )
        subparser.add_argument(
            "--use-sentence-keys",
            action="store_true",
            help="key each embedding by its sentence instead of its line number; duplicate "
            "sentences and sentences containing '/' are then errors",
        )
        subparser.add_argument(
            "--stateful",
            action="store_true",
            help="carry the LSTM state from each batch to the next, as AllenNLP 0.9 did (its "
            "exact results; they then depend on --batch-size and the line order)",
        )
        subparser.add_argument(
            "--file-friendly-logging",
            action="store_true",
            help="print the progress bar on separate lines, less often (for log files)",
        )
        subparser.set_defaults(func=elmo_command, elmo_usage=subparser.format_usage())
        return subparser


def elmo_command(args: argparse.Namespace) -> None:
    """
    Runs ``allennlp elmo`` for parsed arguments. Problems with the inputs are reported on one
    line of stderr and exit with status 2 (missing model files, like argparse's usage errors) or
    1 (everything else); an interruption exits with 130 (Ctrl-C) or 143 (SIGTERM). No output
    file is left behind in any of these cases.
    """
    model_files = (("--options-file", args.options_file), ("--weight-file", args.weight_file))
    missing = [flag for flag, value in model_files if not value]
    if missing:
        exit_with_error(
            "elmo",
            _MISSING_MODEL_MESSAGE.format(missing=" and ".join(missing)),
            EXIT_USAGE,
            getattr(args, "elmo_usage", ""),
        )
    if args.file_friendly_logging:
        common_logging.FILE_FRIENDLY_LOGGING = True
    output_format = "all" if args.all else "top" if args.top else "average"

    def embed() -> None:
        embedder = ElmoEmbedder(
            args.options_file,
            args.weight_file,
            cuda_device=args.cuda_device,
            stateful=args.stateful,
        )
        try:
            embedder.embed_file(
                args.input_file,
                args.output_file,
                output_format=output_format,
                batch_size=args.batch_size,
                forget_sentences=args.forget_sentences,
                use_sentence_keys=args.use_sentence_keys,
            )
        except torch.cuda.OutOfMemoryError:
            raise ConfigurationError(
                f"the GPU ran out of memory with --batch-size {args.batch_size}; try a smaller "
                f"batch size. {args.output_file} was not written."
            ) from None

    run_reporting_errors(
        "elmo", embed, interrupted=f"interrupted; {args.output_file} was not written."
    )
    print(f"Wrote ELMo embeddings ({output_format}) of {args.input_file} to {args.output_file}")
