"""
``allennlp`` subcommands added by this plugin (registered when `elmo_plugin` is imported).
"""
from elmo_plugin.commands.elmo import ElmoCommand
from elmo_plugin.commands.elmo_adapt import ElmoAdaptCommand
from elmo_plugin.commands.elmo_export import ElmoExportCommand
from elmo_plugin.commands.elmo_score import ElmoScoreCommand
from elmo_plugin.commands.elmo_task_text import ElmoTaskTextCommand
from elmo_plugin.commands.elmo_tokenize import ElmoTokenizeCommand
from elmo_plugin.commands.elmo_vocab import ElmoVocabCommand

__all__ = [
    "ElmoAdaptCommand",
    "ElmoCommand",
    "ElmoExportCommand",
    "ElmoScoreCommand",
    "ElmoTaskTextCommand",
    "ElmoTokenizeCommand",
    "ElmoVocabCommand",
]
