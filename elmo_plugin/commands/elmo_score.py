"""
The ``allennlp elmo-score`` subcommand: a biLM used as the language model it was trained to be,
on a file of tokenized sentences (`elmo_plugin.models.language_model_scorer`).
"""
import argparse
import sys

from allennlp.commands.subcommand import Subcommand

from elmo_plugin.commands.common import (
    add_file_friendly_logging,
    gpu_memory_as_error,
    positive_int,
    run_reporting_errors,
    subcommand_parser,
    use_file_friendly_logging,
)
from elmo_plugin.models.language_model_scorer import (
    DEFAULT_BATCH_SIZE,
    CorpusScore,
    LanguageModelScorer,
    check_scoring_files,
)

_DESCRIPTION = """Score tokenized sentences with a biLM's two language models.

The input has one sentence per line, tokens separated by whitespace, UTF-8, no blank lines (as
for allennlp elmo). For each line one JSON object is written, in order (JSON lines):
  line                the line number (1-based)
  tokens              the number of tokens
  forward_log_prob    natural-log probability of the tokens and </S> under the forward LM
  backward_log_prob   the same for the tokens and <S> under the backward LM
  forward_perplexity, backward_perplexity   exp(-log_prob / (tokens + 1))
  perplexity          their mean
Every sentence is scored on its own, from a zero LSTM state, with the full softmax over the
vocabulary; a word outside it counts as <UNK>. At the end, the file's perplexities, weighted by
tokens as allennlp evaluate computes them, are printed.

--substitutes K adds, for each token, the K words the forward LM expects there (from the words
before it), the K the backward LM expects (from the words after it), and the K with the highest
sum of the two log-probabilities ("both"), with their log-probabilities, best first (as
simple_elmo's get_elmo_substitutes, without <S> and </S>).

The model must have its softmax: the model.tar.gz or serialization directory of allennlp train
with an elmo_bilm config, or what allennlp elmo-export --include-softmax wrote from it. The
published bilm-tf models hold the biLM only.
"""


@Subcommand.register("elmo-score")
class ElmoScoreCommand(Subcommand):
    """``allennlp elmo-score``: see the module documentation and ``allennlp elmo-score --help``."""

    def add_subparser(self, parser: argparse._SubParsersAction) -> argparse.ArgumentParser:
        subparser = subcommand_parser(
            parser, self.name, _DESCRIPTION,
            "Score tokenized sentences with a biLM's language models (log-probabilities, "
            "perplexities, lexical substitutes), as JSON lines.",
        )
        subparser.add_argument(
            "model",
            help="an elmo_bilm model.tar.gz or serialization directory, or an elmo-export "
            "directory with softmax.hdf5 and vocabulary.txt",
        )
        subparser.add_argument("input_file", help="the sentences: one tokenized sentence per line, UTF-8")
        subparser.add_argument(
            "--output", metavar="SCORES_JSONL",
            help="the JSON lines file to write (written whole or not at all); default: stdout",
        )
        subparser.add_argument(
            "--substitutes", type=positive_int, default=0, metavar="K",
            help="also give, for each token, the K words the language models expect there",
        )
        subparser.add_argument(
            "--batch-size", type=positive_int, default=DEFAULT_BATCH_SIZE, help="sentences per biLM call",
        )
        subparser.add_argument("--cuda-device", type=int, default=-1, help="the GPU to run on; -1 runs on the CPU")
        add_file_friendly_logging(subparser)
        subparser.set_defaults(func=score_command)
        return subparser


def score_command(args: argparse.Namespace) -> None:
    """Runs ``allennlp elmo-score``: the input and output are checked before the model is loaded."""
    use_file_friendly_logging(args)

    def score() -> CorpusScore:
        num_sentences = check_scoring_files(args.input_file, args.output)
        # The scorer checks the GPU before it reads the model.
        scorer = LanguageModelScorer(args.model, cuda_device=args.cuda_device)
        with gpu_memory_as_error(args.batch_size):
            return scorer.score_file(
                args.input_file, args.output, substitutes=args.substitutes, batch_size=args.batch_size,
                num_sentences=num_sentences,
            )

    corpus = run_reporting_errors(
        "elmo-score",
        score,
        interrupted=f"interrupted; {args.output} was not written." if args.output else "interrupted.",
    )
    summary = (
        f"Scored {corpus.sentences} sentences of {args.input_file} ({corpus.predictions} predictions "
        f"per direction) into {args.output or 'stdout'}: forward ppl {corpus.forward_perplexity:.2f}, backward ppl "
        f"{corpus.backward_perplexity:.2f}, ppl {corpus.perplexity:.2f} (weighted by tokens, as "
        "allennlp evaluate computes them)"
    )
    # The scores on stdout stay JSON lines: the summary goes to stderr then.
    print(summary, file=sys.stderr if args.output is None else sys.stdout)
