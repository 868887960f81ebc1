"""
``allennlp elmo-export``: a trained ``elmo_bilm`` model in, bilm-tf ``options.json`` +
``weights.hdf5`` out (the default, ``--format bilm-tf``); or, with ``--format onnx``, any biLM
the plugin loads as one ONNX graph with dynamic batch and sentence length, for serving
(`elmo_plugin.export.onnx_export`). A TF-Hub ELMo module's directory converts to either
(`elmo_plugin.model_files.tf_hub.elmo_module`).
"""
import argparse

from allennlp.commands.subcommand import Subcommand

from elmo_plugin.commands.common import EXIT_USAGE, exit_with_error, run_reporting_errors, subcommand_parser
from elmo_plugin.export.archive_to_bilm_tf import export_to_bilm_tf
from elmo_plugin.export.onnx_export import export_onnx
from elmo_plugin.model_files.bilm_tf.directory import write_bilm_tf_directory
from elmo_plugin.model_files.resolve import ArgumentNames, describe_model_forms
from elmo_plugin.model_files.tf_hub.elmo_module import is_tf_hub_module, read_tf_hub_module

FORMATS = ("bilm-tf", "onnx")
# How errors about the model spell it: the command has MODEL only.
EXPORT_ARGUMENTS = ArgumentNames("--options-file", "--weight-file", "MODEL", " ")


@Subcommand.register("elmo-export")
class ElmoExportCommand(Subcommand):
    def add_subparser(self, parser: argparse._SubParsersAction) -> argparse.ArgumentParser:
        description = (
            "Export a trained elmo_bilm model (model.tar.gz or serialization directory) to the "
            "bilm-tf format: options.json, weights.hdf5 and vocabulary.txt, loadable by "
            "AllenNLP's Elmo, bilm-tf and `allennlp elmo`. Given a task model's archive (a "
            "tagger, a classifier, ... with an elmo_token_embedder, also one trained with "
            "AllenNLP's own), it exports that model's biLM, fine-tuned or not, as options.json "
            "and weights.hdf5. With --format onnx: any ELMo model the plugin loads ("
            f"{describe_model_forms()}, or a task model archive) as elmo.onnx, one graph taking "
            "character ids "
            "(batch, tokens, max_characters) of any batch and length and giving the layers and "
            "the mask, with options.json and character_ids.json beside it (for serving with "
            "ONNX Runtime, see examples/serve_onnx.py). A TF-Hub ELMo module's directory "
            "(google/elmo/2 or /3, DeepPavlov's; saved_model.pb and variables/) is converted "
            "to either format, without TensorFlow."
        )
        subparser = subcommand_parser(parser, self.name, description, description, argparse.HelpFormatter)
        subparser.add_argument(
            "model",
            help="model.tar.gz or the serialization directory, or a TF-Hub ELMo module's "
            "directory (--format onnx: any model, as allennlp elmo --model takes it)",
        )
        subparser.add_argument("output_directory", help="where to write the files")
        subparser.add_argument(
            "--include-softmax", action="store_true",
            help="also write softmax.hdf5 (softmax/W, softmax/b), needed to go on training and "
            "by allennlp elmo-score",
        )
        subparser.add_argument(
            "--n-characters", type=int, default=262, choices=(261, 262),
            help="n_characters written to options.json: 262 for prediction (AllenNLP), "
            "261 for bilm-tf training code (default 262)",
        )
        subparser.add_argument(
            "--embedder", default=None, metavar="NAME",
            help="which ELMo embedder of a task model with several to export: its key in the "
            "text_field_embedder (elmo) or its module name "
            "(text_field_embedder.token_embedder_elmo); an unknown name lists the ones there are",
        )
        subparser.add_argument(
            "--format", choices=FORMATS, default="bilm-tf",
            help="bilm-tf: options.json + weights.hdf5 (default); onnx: elmo.onnx for ONNX "
            "Runtime, with options.json and character_ids.json",
        )
        layers = subparser.add_mutually_exclusive_group()
        for layer, output in (
            ("all", "'layers', (num_layers, batch, tokens, dim) (the default)"),
            ("top", "'top', the top layer, (batch, tokens, dim)"),
            ("average", "'average', the mean of all layers, (batch, tokens, dim)"),
        ):
            layers.add_argument(
                f"--{layer}", dest="layers", action="store_const", const=layer, help=f"onnx: output {output}"
            )
        layers.add_argument(
            "--scalar-mix", type=int, default=None, metavar="K",
            help="onnx, a task model: output 'mix', the K-th scalar mix of its ELMo embedder "
            "(0 for the first; the fine-tuned weights and gamma), (batch, tokens, dim)",
        )
        subparser.set_defaults(func=export_from_args)
        return subparser


def export_from_args(args: argparse.Namespace) -> None:
    tf_hub = is_tf_hub_module(args.model)
    onnx = args.format == "onnx"
    onnx_outputs = args.layers is not None or args.scalar_mix is not None
    usage_errors = (
        (tf_hub and (args.include_softmax or args.embedder is not None),
         f"{'--include-softmax' if args.include_softmax else '--embedder'} is for training runs and task models; "
         "a TF-Hub module holds one biLM and no softmax"),
        (tf_hub and not onnx and onnx_outputs,
         "--all, --top, --average and --scalar-mix choose the outputs of --format onnx"),
        (onnx and args.include_softmax,
         "--include-softmax is for --format bilm-tf; an ONNX graph serves the biLM's layers"),
        (not onnx and onnx_outputs,
         f"{'--scalar-mix' if args.scalar_mix is not None else f'--{args.layers}'} chooses the outputs of "
         "--format onnx; the bilm-tf format holds the whole biLM"),
    )
    for wrong, message in usage_errors:
        if wrong:
            exit_with_error("elmo-export", message, EXIT_USAGE)

    def export():
        # A TF-Hub module is read for its notes (what was taken rather than read) and, for
        # bilm-tf, written with the one bilm-tf writer; the ONNX export reads any model itself.
        module = read_tf_hub_module(args.model) if tf_hub else None
        if onnx:
            paths = export_onnx(
                args.model, args.output_directory, output=args.layers or "all", embedder=args.embedder,
                scalar_mix=args.scalar_mix, n_characters=args.n_characters, argument_names=EXPORT_ARGUMENTS,
            )
        elif module is not None:
            paths = write_bilm_tf_directory(
                args.output_directory, module.options, module.state, n_characters=args.n_characters
            )
        else:
            paths = export_to_bilm_tf(
                args.model, args.output_directory, args.include_softmax, args.n_characters, embedder=args.embedder
            )
        return (module.notes if module is not None else []), paths

    notes, paths = run_reporting_errors(
        "elmo-export", export, interrupted=f"interrupted; {args.output_directory} was left as it was."
    )
    for note in notes:
        print(f"note: {note}")
    for kind, path in paths.items():
        print(f"wrote {kind}: {path}")
