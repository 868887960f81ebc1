"""
The ``allennlp elmo-vocab`` subcommand: the bilm-tf vocabulary file of a tokenized corpus
(`elmo_plugin.data.vocabulary`).
"""
import argparse

from allennlp.commands.subcommand import Subcommand

from elmo_plugin.commands.common import positive_int, run_reporting_errors, subcommand_parser
from elmo_plugin.commands.glob_arguments import add_glob_and_output_arguments, check_single_glob
from elmo_plugin.data.vocabulary import SPECIAL_TOKENS, LmVocabularyStats, build_lm_vocabulary

_DESCRIPTION = """Count the tokens of a tokenized corpus and write the vocabulary file that ELMo
pretraining (bilm-tf's format) uses: one token per line, <S>, </S>, <UNK> first, then the tokens
by descending frequency (ties in alphabetical order).

The corpus is every file matching CORPUS_GLOB (quote it: "data/train/*.txt"), UTF-8, one
sentence per line, tokens separated by whitespace; blank lines are skipped. OUTPUT_FILE may
not be one of the corpus files (an error); if the glob matches it because it is a vocabulary
from an earlier run, it is left out of the corpus (with a warning). Use the file in a
training config as
  "vocabulary": {"type": "from_bilm_tf_file", "vocabulary_file": "OUTPUT_FILE"}"""


def _max_size(value: str) -> int:
    number = positive_int(value)
    if number < len(SPECIAL_TOKENS):
        raise argparse.ArgumentTypeError(
            f"must be at least {len(SPECIAL_TOKENS)} (the special tokens count), got {value}"
        )
    return number


@Subcommand.register("elmo-vocab")
class ElmoVocabCommand(Subcommand):
    """``allennlp elmo-vocab``: see the module documentation and ``allennlp elmo-vocab --help``."""

    def add_subparser(self, parser: argparse._SubParsersAction) -> argparse.ArgumentParser:
        subparser = subcommand_parser(
            parser, self.name, _DESCRIPTION,
            "Write the bilm-tf vocabulary file (tokens by frequency) of a tokenized corpus.",
        )
        add_glob_and_output_arguments(
            subparser, "corpus_glob", 'the corpus files, a quoted glob: "data/train/*.txt"',
            "output_file", "the vocabulary file to write",
        )
        subparser.add_argument(
            "--min-count", type=positive_int, default=1,
            help="leave out tokens seen fewer times than this (default 1: keep all)",
        )
        subparser.add_argument(
            "--max-size", type=_max_size, default=None,
            help="at most this many lines, <S> </S> <UNK> included (default: no limit)",
        )
        subparser.add_argument("--no-progress", action="store_true", help="do not show a progress bar")
        subparser.set_defaults(func=elmo_vocab_command)
        return subparser


def format_summary(stats: LmVocabularyStats) -> str:
    """The lines ``allennlp elmo-vocab`` prints after writing the file."""
    excluded = [
        f"  left out:          {', '.join(stats.excluded_files)} (the output file, an earlier "
        "vocabulary, which the glob matches)"
    ] if stats.excluded_files else []
    return "\n".join([
        f"Wrote {stats.output_file}",
        f"  files read:        {stats.num_files}",
        *excluded,
        f"  sentences:         {stats.num_sentences} ({stats.num_blank_lines} blank lines skipped)",
        f"  tokens counted:    {stats.num_tokens}",
        f"  distinct tokens:   {stats.num_types}",
        f"  vocabulary size:   {stats.vocab_size} (including {', '.join(SPECIAL_TOKENS)})",
        f"  coverage:          {stats.coverage:.2%} of the corpus tokens "
        f"({stats.num_tokens - stats.num_covered_tokens} become <UNK>)",
    ])


def elmo_vocab_command(args: argparse.Namespace) -> None:
    """Runs ``allennlp elmo-vocab`` for parsed arguments."""
    check_single_glob("elmo-vocab", args, "corpus_glob", "output_file")
    stats = run_reporting_errors(
        "elmo-vocab",
        lambda: build_lm_vocabulary(
            args.corpus_glob,
            args.output_file,
            min_count=args.min_count,
            max_size=args.max_size,
            progress=not args.no_progress,
        ),
        interrupted=f"interrupted; {args.output_file} was not written.",
    )
    print(format_summary(stats))
