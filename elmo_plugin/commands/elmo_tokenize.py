"""
The ``allennlp elmo-tokenize`` subcommand: raw Korean text files → the tokenized corpus format
that ``bilm_corpus`` and ``allennlp elmo-vocab`` read
(`elmo_plugin.korean.corpus_tokenization.tokenize_corpus` does the work).
"""
import argparse
import json
import os
from typing import Any, Dict

from allennlp.commands.subcommand import Subcommand
from allennlp.common.checks import ConfigurationError

from elmo_plugin.commands.common import positive_int, run_reporting_errors, subcommand_parser
from elmo_plugin.commands.glob_arguments import add_glob_and_output_arguments, check_single_glob
from elmo_plugin.korean.corpus_tokenization import (
    SUMMARY_FILE,
    TOKENIZER_CHOICES,
    TokenizeSummary,
    tokenize_corpus,
)

_DESCRIPTION = """Tokenize raw Korean text into morphemes and write the corpus format that ELMo
pretraining reads: one sentence per line, tokens separated by single spaces.

Every file matching INPUT_GLOB (quote it: "raw/*.txt"; UTF-8, one sentence or review per line)
gives one output file in OUTPUT_DIR with the same base name, one line per kept input line, in
order. Blank lines, lines without Hangul (unless --keep-non-korean) and lines with fewer than
--min-tokens tokens are skipped and counted. Output files appear only when complete: rerunning
the same command after an interruption skips the finished ones. The counts are printed and
written to OUTPUT_DIR/tokenize_summary.json.

Tokenizers: mecab_ko (= korean, the default; MeCab-ko, fast, surface forms) and kiwi (Kiwi,
slower, splits fused forms into morphemes). --tokenizer-params passes their options as JSON,
e.g. '{"pos_in_text": true}' for "form/TAG" tokens, '{"compatible_jamo": true}' for Kiwi.
The options are the tokenizers' parameters: see MecabKoTokenizer and KiwiTokenizer in
elmo_plugin/korean/tokenizers.py."""


def _json_object(value: str) -> Dict[str, Any]:
    try:
        parsed = json.loads(value)
    except json.JSONDecodeError as error:
        raise argparse.ArgumentTypeError(f"not valid JSON ({error}): {value!r}") from None
    if not isinstance(parsed, dict):
        raise argparse.ArgumentTypeError(f"must be a JSON object ({{...}}), got {value!r}")
    return parsed


@Subcommand.register("elmo-tokenize")
class ElmoTokenizeCommand(Subcommand):
    """``allennlp elmo-tokenize``: see the module documentation and ``--help``."""

    def add_subparser(self, parser: argparse._SubParsersAction) -> argparse.ArgumentParser:
        subparser = subcommand_parser(
            parser, self.name, _DESCRIPTION, "Tokenize raw Korean text files into morphemes, one sentence per line."
        )
        add_glob_and_output_arguments(
            subparser, "input_glob", 'the raw text files, a quoted glob: "raw/*.txt"',
            "output_dir", "the directory to write to (created if missing)",
        )
        subparser.add_argument(
            "--tokenizer", choices=TOKENIZER_CHOICES, default="mecab_ko",
            help="the morpheme tokenizer (default mecab_ko; korean is the same one)",
        )
        subparser.add_argument(
            "--tokenizer-params", type=_json_object, default={}, metavar="JSON",
            help="the tokenizer's parameters as a JSON object, e.g. '{\"pos_in_text\": true}'",
        )
        subparser.add_argument(
            "--workers", type=positive_int, default=os.cpu_count() or 1,
            help="processes that tokenize (default: the number of CPUs, here %(default)s)",
        )
        subparser.add_argument(
            "--lines-per-file", type=positive_int, default=None, metavar="N",
            help="split each output into NAME.000.txt, NAME.001.txt ..., one per N input "
            "lines (default: one output file per input file)",
        )
        subparser.add_argument(
            "--min-tokens", type=positive_int, default=1,
            help="skip lines that give fewer tokens than this (default 1: only lines that give "
            "no token at all)",
        )
        subparser.add_argument(
            "--keep-non-korean", action="store_true", help="also tokenize lines without Hangul (default: skip them)",
        )
        subparser.add_argument("--no-progress", action="store_true", help="do not show a progress bar")
        subparser.set_defaults(func=elmo_tokenize_command)
        return subparser


def format_summary(summary: TokenizeSummary) -> str:
    """The lines ``allennlp elmo-tokenize`` prints at the end."""
    totals = summary.totals
    rate = summary.lines_tokenized / summary.seconds if summary.seconds > 0 else 0.0
    return "\n".join([
        f"Tokenized corpus in {summary.output_dir}: {len(summary.parts)} file(s), "
        f"{len(summary.parts) - summary.num_resumed} written now, {summary.num_resumed} "
        "complete from an earlier run",
        f"  input files:          {summary.num_input_files}",
        f"  lines read:           {totals.lines_read}",
        f"  lines written:        {totals.lines_written} ({totals.tokens_written} tokens)",
        f"  skipped, blank:       {totals.skipped_blank}",
        f"  skipped, no Hangul:   {totals.skipped_non_korean}",
        f"  skipped, too short:   {totals.skipped_too_short} (fewer than {summary.settings['min_tokens']} token(s))",
        f"  time:                 {summary.seconds:.1f} s ({rate:.0f} lines/s tokenized by this run)",
        f"  summary:              {os.path.join(summary.output_dir, SUMMARY_FILE)}",
    ])


def elmo_tokenize_command(args: argparse.Namespace) -> None:
    """Runs ``allennlp elmo-tokenize`` for parsed arguments (a missing tokenizer package is one line too)."""
    check_single_glob("elmo-tokenize", args, "input_glob", "output_dir")
    summary = run_reporting_errors(
        "elmo-tokenize",
        lambda: tokenize_corpus(
            args.input_glob,
            args.output_dir,
            tokenizer=args.tokenizer,
            tokenizer_params=args.tokenizer_params,
            workers=args.workers,
            lines_per_file=args.lines_per_file,
            min_tokens=args.min_tokens,
            keep_non_korean=args.keep_non_korean,
            progress=not args.no_progress,
        ),
        interrupted="interrupted; the output files written so far are complete, rerun the same "
        "command to do the rest",
        errors=(ConfigurationError, ImportError),
    )
    print(format_summary(summary))
