"""
``allennlp`` subcommands added by this plugin (registered when `elmo_plugin` is imported).
"""
from elmo_plugin.commands.elmo_command import ElmoCommand
from elmo_plugin.commands.export_command import ElmoExportCommand
from elmo_plugin.commands.tokenize_command import ElmoTokenizeCommand
from elmo_plugin.commands.vocab_command import ElmoVocabCommand
