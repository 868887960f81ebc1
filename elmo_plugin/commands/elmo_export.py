"""
``allennlp elmo-export``: a trained ``elmo_bilm`` model in, bilm-tf ``options.json`` +
``weights.hdf5`` out.
"""
import argparse
import logging

from allennlp.commands.subcommand import Subcommand

from elmo_plugin.commands.common import run_reporting_errors, strict_subparser
from elmo_plugin.models.archive_to_bilm_tf import export_to_bilm_tf

logger = logging.getLogger(__name__)


@Subcommand.register("elmo-export")
class ElmoExportCommand(Subcommand):
    def add_subparser(self, parser: argparse._SubParsersAction) -> argparse.ArgumentParser:
        description = (
            "Export a trained elmo_bilm model (model.tar.gz or serialization directory) to the "
            "bilm-tf format: options.json, weights.hdf5 and vocabulary.txt, loadable by "
            "AllenNLP's Elmo, bilm-tf and `allennlp elmo`. Given a task model's archive (a "
            "tagger, a classifier, ... with an elmo_token_embedder, also one trained with "
            "AllenNLP's own), it exports that model's biLM, fine-tuned or not, as options.json "
            "and weights.hdf5."
        )
        subparser = strict_subparser(parser.add_parser(self.name, description=description, help=description))
        subparser.add_argument("model", help="model.tar.gz or the serialization directory")
        subparser.add_argument("output_directory", help="where to write the files")
        subparser.add_argument(
            "--include-softmax",
            action="store_true",
            help="also write softmax.hdf5 (softmax/W, softmax/b), needed only to go on training",
        )
        subparser.add_argument(
            "--n-characters",
            type=int,
            default=262,
            choices=(261, 262),
            help="n_characters written to options.json: 262 for prediction (AllenNLP), "
            "261 for bilm-tf training code (default 262)",
        )
        subparser.add_argument(
            "--embedder",
            default=None,
            metavar="NAME",
            help="which ELMo embedder of a task model with several to export: its key in the "
            "text_field_embedder (elmo) or its module name "
            "(text_field_embedder.token_embedder_elmo); an unknown name lists the ones there are",
        )
        subparser.set_defaults(func=export_from_args)
        return subparser


def export_from_args(args: argparse.Namespace) -> None:
    paths = run_reporting_errors(
        "elmo-export",
        lambda: export_to_bilm_tf(
            args.model,
            args.output_directory,
            args.include_softmax,
            args.n_characters,
            embedder=args.embedder,
        ),
        interrupted=f"interrupted; {args.output_directory} was left as it was.",
    )
    for kind, path in paths.items():
        print(f"wrote {kind}: {path}")
