"""
``allennlp elmo-task-text``: a task config's training and validation text, one sentence a line, for
the paper's protocol of fine-tuning the biLM on the task's text (`elmo_plugin.training.task_text`).
"""
import argparse

from allennlp.commands.subcommand import Subcommand

from elmo_plugin.commands.common import run_reporting_errors, subcommand_parser
from elmo_plugin.training.console import quiet_console_handlers
from elmo_plugin.training.task_text import TEXT_FILES, TaskText, write_task_text

_DESCRIPTION = f"""Write the text of a task's data, for fine-tuning the biLM on it as Peters et al.
(2018) did (docs/adapting.md, "The paper's protocol for a task"): the tokens of the config's
train_data_path and validation_data_path as its dataset_reader gives them to the task model, one
sentence a line, labels left out, into OUTPUT_DIR/{TEXT_FILES["train_data_path"]} and
OUTPUT_DIR/{TEXT_FILES["validation_data_path"]}. Then:
  allennlp elmo-adapt SOURCE OUTPUT_DIR/{TEXT_FILES["train_data_path"]} RUN \\
      --validation-data OUTPUT_DIR/{TEXT_FILES["validation_data_path"]}
A sentence equal to the one before it (one instance per predicate, as SRL readers give them) is
written once. A file appears only when complete."""


@Subcommand.register("elmo-task-text")
class ElmoTaskTextCommand(Subcommand):
    """``allennlp elmo-task-text``: see the module documentation and ``allennlp elmo-task-text --help``."""

    def add_subparser(self, parser: argparse._SubParsersAction) -> argparse.ArgumentParser:
        subparser = subcommand_parser(
            parser, self.name, _DESCRIPTION, "Write a task config's text, one sentence a line, for elmo-adapt."
        )
        subparser.add_argument("config_file", help="the task's training config (as allennlp train takes it)")
        subparser.add_argument("output_directory", help="where the text files go")
        subparser.add_argument(
            "-o", "--overrides", default="", help="JSON overrides of the config, as allennlp train -o takes them"
        )
        subparser.add_argument(
            "--field", default=None,
            help="the instances' text field to read (default: tokens, or the only text field)",
        )
        subparser.add_argument("--no-progress", action="store_true", help="do not show a progress bar")
        subparser.set_defaults(func=elmo_task_text_command)
        return subparser


def format_summary(text: TaskText) -> str:
    """The lines ``allennlp elmo-task-text`` prints."""
    lines = []
    for key, path in text.files.items():
        notes = [f"{text.repeats_dropped[key]} repeated sentences written once"] if text.repeats_dropped[key] else []
        if text.tokens_joined[key]:
            notes.append(f"{text.tokens_joined[key]} tokens with spaces inside written with _")
        extra = f" ({'; '.join(notes)})" if notes else ""
        lines.append(f"wrote {path}: {text.sentences[key]} sentences, {text.tokens[key]} tokens of {key}{extra}")
    return "\n".join(lines)


def elmo_task_text_command(args: argparse.Namespace) -> None:
    """Runs ``allennlp elmo-task-text`` for parsed arguments."""
    quiet_console_handlers()
    text = run_reporting_errors(
        "elmo-task-text",
        lambda: write_task_text(
            args.config_file, args.output_directory, args.overrides, args.field, progress=not args.no_progress
        ),
        interrupted=f"interrupted; a file not yet complete in {args.output_directory} was not written",
    )
    print(format_summary(text))
